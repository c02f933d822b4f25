"""The copies derived from the event catalogue (common/events/catalogue.py), written and checked.

`python -m common.events.generate` writes each; `--check` writes nothing and exits non-zero naming each
copy that differs from what the catalogue gives (tests/unit/test_event_generate.py runs it, so CI fails on
a copy edited by hand or a catalogue changed without writing them again).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from common.events.generate import lua, markdown, models, shapes, typescript

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True, slots=True)
class Copy:
    """One derived copy: a whole file, or the region of a file between two marker lines (`region`)."""

    path: str
    render: Callable[[shapes.Catalogue], str]
    region: tuple[str, str] | None = None

    def written(self, current: str, catalogue: shapes.Catalogue) -> str:
        """The file's text with this copy as the catalogue gives it."""
        text = self.render(catalogue)
        if self.region is None:
            return text
        begin, end = self.region
        found = re.search(re.escape(begin) + r"\n.*?" + re.escape(end), current, re.DOTALL)
        if found is None:
            raise ValueError(f"{self.path}: no region between {begin!r} and {end!r}")
        return current[: found.start()] + begin + "\n" + text + end + current[found.end() :]


COPIES = (
    Copy(lua.PATH, lua.render),
    Copy(models.PATH, models.render),
    Copy(typescript.PATH, typescript.render, typescript.REGION),
    Copy(markdown.PATH, markdown.render, markdown.REGION),
)


def _stale(root: Path) -> Iterator[tuple[Path, str, str]]:
    """Each copy whose file differs from what the catalogue gives: its path, that text, and its name."""
    catalogue = shapes.read()
    for copy in COPIES:
        path = root / copy.path
        current = path.read_text() if path.exists() else ""
        text = copy.written(current, catalogue)
        if text != current:
            yield path, text, copy.path


def drifted(root: Path = ROOT) -> list[str]:
    """The copies whose file differs from what the catalogue gives."""
    return [name for _, _, name in _stale(root)]


def write(root: Path = ROOT) -> list[str]:
    """Write every copy; the paths that changed."""
    changed = []
    for path, text, name in _stale(root):
        path.write_text(text)
        changed.append(name)
    return changed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m common.events.generate", description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; fail naming each copy that drifted")
    check = parser.parse_args(argv).check
    paths = drifted() if check else write()
    verb = "drifted from the catalogue (run python -m common.events.generate)" if check else "written"
    for path in paths:
        sys.stderr.write(f"{path}: {verb}\n")
    return 1 if check and paths else 0
