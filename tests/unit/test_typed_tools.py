"""Typed tools: schemas from annotations, validated arguments, results as text, modules read as tools."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from switchboard.typed_tools import ToolError, load_tools, typed_tool


class Row(BaseModel):
    id: str
    tags: list[str] = []


def highlight_row(row_id: str, color: Literal["yellow", "red"] = "yellow") -> str:
    """Highlight one row of the table.

    Longer text that is not part of the description."""
    return f"row {row_id} is {color}"


async def lookup(rows: list[Row], limit: int = 10) -> dict[str, Any]:
    """Look rows up."""
    return {"ids": [row.id for row in rows][:limit]}


def explode() -> str:
    """Always fails."""
    raise RuntimeError("the table is gone")


def unserialisable() -> object:
    return object()


def test_a_declaration_carries_name_description_and_json_schema() -> None:
    declared = typed_tool(highlight_row).declaration()
    assert declared["name"] == "highlight_row"
    assert declared["description"] == "Highlight one row of the table."
    schema = declared["parameters"]
    assert schema["type"] == "object"
    assert schema["required"] == ["row_id"]
    assert schema["properties"]["color"]["enum"] == ["yellow", "red"]
    assert schema["additionalProperties"] is False


async def test_arguments_are_validated_and_converted_before_the_body_runs() -> None:
    assert await typed_tool(highlight_row).run({"row_id": "7"}) == ("row 7 is yellow", False)
    text, is_error = await typed_tool(lookup).run({"rows": [{"id": "a"}, {"id": "b"}], "limit": 1})
    assert (text, is_error) == ('{"ids":["a"]}', False)
    text, is_error = await typed_tool(highlight_row).run({"row_id": "7", "color": "blue"})
    assert is_error
    assert text.startswith("invalid arguments for highlight_row: color: Input should be 'yellow' or 'red'")
    text, is_error = await typed_tool(highlight_row).run({"row": "7"})
    assert is_error
    assert "row_id: Field required" in text
    assert "row: Extra inputs are not permitted" in text


async def test_a_raising_body_and_an_unserialisable_value_are_error_results() -> None:
    assert await typed_tool(explode).run({}) == ("RuntimeError: the table is gone", True)
    text, is_error = await typed_tool(unserialisable).run({})
    assert is_error
    assert text.startswith("the tool returned a value that is not JSON-serialisable")


def test_unannotated_or_variadic_parameters_are_refused() -> None:
    def bare(x):  # type: ignore[no-untyped-def]
        return x

    def variadic(*args: int) -> int:
        return len(args)

    with pytest.raises(ToolError, match="parameter x needs a type annotation"):
        typed_tool(bare)
    with pytest.raises(ToolError, match="parameter args must be a plain named parameter"):
        typed_tool(variadic)
    with pytest.raises(ToolError, match="tool name 'a b'"):
        typed_tool(highlight_row, name="a b")


@pytest.fixture
def tool_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"toolmod_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(
        "def a(x: int) -> int:\n    return x\n\n"
        "def b(y: str) -> str:\n    return y\n\n"
        "LIST = [a, b]\nDICT = {'first': a, 'second': b}\nREPEATED = [a, a]\nEMPTY = []\nNUMBER = 3\n"
        "class Holder:\n    tools = [a]\nHOLDER = Holder()\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return name


def test_a_module_object_is_read_as_tools_in_each_shape(tool_module: str) -> None:
    assert [t.name for t in load_tools(f"{tool_module}:LIST")] == ["a", "b"]
    assert [t.name for t in load_tools(f"{tool_module}:DICT")] == ["first", "second"]
    assert [t.name for t in load_tools(f"{tool_module}:a")] == ["a"]
    assert [t.name for t in load_tools(f"{tool_module}:HOLDER")] == ["a"]


@pytest.mark.parametrize(
    ("attribute", "message"),
    [
        ("REPEATED", "tool names repeat"),
        ("EMPTY", "holds no tools"),
        ("NUMBER", "cannot read tools from a int"),
        ("MISSING", "has no MISSING"),
    ],
)
def test_a_module_object_that_is_not_tools_says_why(tool_module: str, attribute: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        load_tools(f"{tool_module}:{attribute}")


def test_a_bad_spec_says_what_is_expected() -> None:
    with pytest.raises(ToolError, match="expected MODULE:OBJECT"):
        load_tools("just_a_module")
    with pytest.raises(ToolError, match="cannot import no_such_module_here"):
        load_tools("no_such_module_here:X")
