"""Two saved runs side by side: `python -m bench --compare OLD.json NEW.json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.harness import columns


def _load(path: Path) -> tuple[dict[str, Any], dict[tuple[str, str], dict[str, Any]]]:
    body = json.loads(path.read_text())
    return body["meta"], {(f["scenario"], f["name"]): f for f in body["figures"]}


def _cell(figure: dict[str, Any] | None) -> str:
    if figure is None:
        return "-"
    return f"{figure['value']:.4g} {figure['unit']}"


def compare(old_path: Path, new_path: Path) -> str:
    """One line per figure: the old value, the new one and new/old; figures only one run has show `-`."""
    old_meta, old = _load(old_path)
    new_meta, new = _load(new_path)
    lines = [f"old: {old_path} (commit {old_meta.get('commit')})", f"new: {new_path} (commit {new_meta.get('commit')})"]
    rows = [("scenario", "figure", "old", "new", "new/old")]
    for key in [*old, *(k for k in new if k not in old)]:
        before, after = old.get(key), new.get(key)
        change = f"{after['value'] / before['value']:.3g}x" if before and after and before["value"] else ""
        rows.append((key[0], key[1], _cell(before), _cell(after), change))
    return "\n".join([*lines, columns(rows)])
