"""The README's first steps answer what a newcomer runs into: how to pick a port, how to find Python 3.12
under pyenv, the docs site served beside `switchboard up` and built from the `docs` extra alone."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import yaml

from api.settings import ApiSettings
from common.settings import env_names

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()


def test_the_readme_says_how_to_pick_the_port() -> None:
    setting = "SWITCHBOARD_PORT"
    assert setting in env_names(ApiSettings)
    assert re.search(rf"`{setting}=\d+ \.venv/bin/switchboard up`", README), "no `SWITCHBOARD_PORT=... switchboard up`"


def test_the_readme_says_how_to_find_python_3_12_under_pyenv() -> None:
    assert "$(pyenv root)/versions/3.12.*/bin/python -m venv .venv-quickstart" in README


def test_the_docs_site_is_served_beside_up_from_the_docs_extra() -> None:
    [command] = re.findall(r"`([^`]*mkdocs serve[^`]*)`", README)
    assert "pip install -e '.[docs]'" in command
    [port] = re.findall(r"mkdocs serve -a 127\.0\.0\.1:(\d+)", command)
    assert int(port) != ApiSettings.model_fields["port"].default


def test_the_docs_extra_is_mkdocs_alone_and_the_site_needs_nothing_else() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert [re.split(r"[=<>!~ ]", item)[0] for item in extras["docs"]] == ["mkdocs"]
    assert "switchboard[embedded,docs]" in extras["dev"]
    assert [item for item in extras["dev"] if item.startswith("mkdocs")] == []
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    # Built into mkdocs: its themes, and the Markdown extensions of Python-Markdown, which it requires.
    assert config["theme"]["name"] in ("mkdocs", "readthedocs")
    assert set(config.get("plugins", ["search"])) <= {"search"}
    assert "hooks" not in config
    for extension in config["markdown_extensions"]:
        name = next(iter(extension)) if isinstance(extension, dict) else extension
        assert importlib.util.find_spec(f"markdown.extensions.{name}") is not None, name
