"""The docs site: it builds strict, loads nothing from another host, lists every page, and the pages that
restate the code (settings, error statuses, Redis keys, the scripted model) say what the code says."""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import TypeAdapter

from api.errors import STATUS
from broker import keys
from broker.errors import ErrorCode
from switchboard.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MKDOCS = Path(sys.executable).parent / "mkdocs"

# A URL that leaves the site: a scheme of http(s), or protocol-relative.
_REMOTE = r"(?:https?:)?//"
_CSS_REMOTE = re.compile(rf"@import\s+(?:url\()?\s*['\"]?{_REMOTE}|url\(\s*['\"]?{_REMOTE}", re.IGNORECASE)
_JS_REMOTE = re.compile(rf"\b(?:src|href)\s*=\s*['\"]{_REMOTE}", re.IGNORECASE)


class _Loads(HTMLParser):
    """Every URL a page makes the browser fetch by itself: `src`/`srcset` of any element, `href` of
    `<link>`, and CSS in `<style>` and `style=`. An `<a href>` is a link a reader follows, not a load."""

    def __init__(self) -> None:
        super().__init__()
        self.remote: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            loads = name in ("src", "srcset", "data") or (name == "href" and tag == "link")
            if value and loads and re.match(_REMOTE, value.strip(), re.IGNORECASE):
                self.remote.append(f"<{tag} {name}={value}>")
            if name == "style" and value and _CSS_REMOTE.search(value):
                self.remote.append(f"<{tag} style={value}>")
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style and _CSS_REMOTE.search(data):
            self.remote.append(f"<style>{data[:200]}")


def _remote_loads(site: Path) -> list[str]:
    found: list[str] = []
    for path in sorted(site.rglob("*")):
        if path.suffix not in (".html", ".css", ".js"):
            continue
        text = path.read_text(errors="replace")
        where = path.relative_to(site)
        if path.suffix == ".html":
            parser = _Loads()
            parser.feed(text)
            found += [f"{where}: {load}" for load in parser.remote]
        elif path.suffix == ".css":
            found += [f"{where}: {m.group(0)}" for m in _CSS_REMOTE.finditer(text)]
        else:
            found += [f"{where}: {m.group(0)}" for m in _JS_REMOTE.finditer(text)]
            found += [f"{where}: {m.group(0)}" for m in _CSS_REMOTE.finditer(text)]
    return found


def _table_rows(page: str, first_cell: str) -> list[list[str]]:
    """The cells of every Markdown table row of `page` whose first cell matches `first_cell`."""
    rows = []
    for line in (DOCS / page).read_text().splitlines():
        if not line.startswith("|"):
            continue
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if cells and re.fullmatch(first_cell, cells[0]):
            rows.append(cells)
    return rows


def _nav_pages(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    raise AssertionError(f"unexpected nav entry {nav!r}")


def test_the_site_builds_strict_and_loads_nothing_from_another_host(tmp_path: Path) -> None:
    site = tmp_path / "site"
    built = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    output = built.stdout + built.stderr
    assert built.returncode == 0, output
    assert "WARNING" not in output, output
    assert (site / "index.html").is_file()
    assert _remote_loads(site) == []


def test_the_scan_finds_what_would_load_from_another_host(tmp_path: Path) -> None:
    (tmp_path / "page.html").write_text(
        '<link rel="stylesheet" href="https://cdn.example/x.css"><script src="//cdn.example/x.js"></script>'
        '<img srcset="http://img.example/a.png 2x"><a href="https://www.mkdocs.org/">MkDocs</a>'
        "<style>@import url('https://fonts.example/css');</style>"
    )
    (tmp_path / "site.css").write_text("body { background: url(//img.example/b.png) } .x { background: url(a.png) }")
    (tmp_path / "site.js").write_text('el.src = "https://x.example/y.js"; const a = "<a href=\\"https://ok\\">";')
    found = _remote_loads(tmp_path)
    assert len(found) == 6, found
    assert not any("mkdocs.org" in load for load in found)


def test_the_nav_lists_every_page_once() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    listed = _nav_pages(config["nav"])
    pages = sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md"))
    assert sorted(listed) == pages
    assert len(set(listed)) == len(listed)
    assert config["theme"]["highlightjs"] is False


def _shown_default(cell: str) -> object:
    if cell.startswith("unset"):
        return None
    if cell.startswith("empty"):
        return ""
    shown = re.match(r"`([^`]*)`", cell)
    assert shown, f"a default is `value`, unset or empty, not {cell!r}"
    return shown.group(1)


def test_the_settings_table_is_the_settings_class() -> None:
    # `Settings` is the full set, every role's fields (switchboard/settings.py): each variable once.
    prefix = Settings.model_config["env_prefix"]
    fields = {f"{prefix}{name.upper()}": field for name, field in Settings.model_fields.items()}
    rows = _table_rows("configuration.md", r"`SWITCHBOARD_[A-Z0-9_]+`")
    names = [row[0].strip("`") for row in rows]
    assert sorted(names) == sorted(fields), set(names) ^ set(fields)
    assert len(set(names)) == len(names), "a setting appears twice"
    for name, default_cell, *_ in rows:
        field = fields[name.strip("`")]
        shown = _shown_default(default_cell)
        default = field.get_default()
        if shown is None or default is None:
            assert shown is default, f"{name}: shown {default_cell}, default {default!r}"
            continue
        assert field.annotation is not None
        parsed = TypeAdapter(field.annotation).validate_python(shown)
        value = default.get_secret_value() if hasattr(default, "get_secret_value") else default
        assert parsed == value, f"{name}: shown {default_cell}, default {default!r}"


def test_the_error_table_is_the_statuses_the_api_answers() -> None:
    rows = _table_rows("http-api.md", r"`[a-z_]+`")
    shown = {row[0].strip("`"): int(row[1]) for row in rows if row[1].isdigit()}
    assert shown == {str(code): STATUS[code] for code in ErrorCode}


def test_the_architecture_page_holds_every_key_of_the_layout() -> None:
    layout = keys.__doc__ or ""
    named = re.findall(r"^\| `(sb:[^`]+)`", layout, re.MULTILINE)
    assert len(named) > 30
    page = (DOCS / "architecture.md").read_text()
    assert [key for key in named if f"`{key}`" not in page] == []


def test_the_scripted_models_commands_are_documented() -> None:
    source = (ROOT / "workers" / "models" / "scripted.py").read_text()
    commands = set(re.findall(r"startswith\(\"(/[a-z]+) \"\)", source))
    assert commands == {"/call", "/sleep", "/fail"}
    page = (DOCS / "agents-and-models.md").read_text()
    assert [command for command in sorted(commands) if f"| `{command} " not in page] == []


@pytest.mark.parametrize("document", ["README.md", *(f"docs/{p.name}" for p in sorted(DOCS.glob("*.md")))])
def test_relative_links_lead_to_files(document: str) -> None:
    text = (ROOT / document).read_text()
    # Links in Markdown, outside code: `[text](target)` whose target has no scheme.
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    targets = re.findall(r"\]\(([^)\s]+)\)", prose)
    broken = []
    for target in targets:
        if re.match(r"[a-z]+:|#", target):
            continue
        path = target.split("#", 1)[0]
        if not (ROOT / document).parent.joinpath(path).exists():
            broken.append(target)
    assert broken == []


def test_the_readme_is_a_landing_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    # The one-command start, exactly, and a way into each page of the docs.
    assert "python3 -m venv .venv && .venv/bin/pip install -e '.[embedded]' && .venv/bin/switchboard up" in readme
    assert "bash .ci/run" in readme
    linked = set(re.findall(r"\]\(docs/([a-z-]+\.md)", readme))
    assert linked == {p.name for p in DOCS.glob("*.md")}
