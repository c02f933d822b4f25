"""What `switchboard tools mcp` refuses before it bridges anything, and what of a server's tool list it
leaves out: bad input as usage errors, a command that does not start, no token, and the names, counts
and schemas a registration cannot carry (the bridge at work: tests/e2e/test_tool_mcp.py)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import mcp.types as mt
import pytest

from tests.e2e.test_tool_mcp import KIT, ROOT

pytestmark = pytest.mark.processes


def _mcp(*args: str, token: str | None = "swb_st_x") -> subprocess.CompletedProcess[str]:  # noqa: S107
    env = {name: value for name, value in os.environ.items() if name != "SWITCHBOARD_SESSION_TOKEN"}
    env |= {} if token is None else {"SWITCHBOARD_SESSION_TOKEN": token}
    command = [sys.executable, "-m", "switchboard", "tools", "mcp", "--session", "s", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        ((), "give the MCP server's command after --, or --server-url for one over HTTP"),
        (("--server-url", "http://127.0.0.1:9/mcp", "--", "kit"), "give the MCP server's command or --server-url"),
        (("--server-url", "http://127.0.0.1:9/mcp", "--header", "X-Team"), "argument --header: 'X-Team' is not a"),
        (("--header", "X-Team: blue", "--", "kit"), "--header goes with --server-url"),
        (("--server-url", "ftp://example.com"), "argument --server-url: 'ftp://example.com' is not an http"),
    ],
    ids=["neither", "both", "header", "header-without-url", "url"],
)
def test_bad_input_is_a_usage_error(args: tuple[str, ...], complaint: str) -> None:
    refused = _mcp(*args)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("usage: switchboard tools mcp"), refused.stderr
    assert complaint in refused.stderr, refused.stderr


def test_a_command_that_does_not_exist_or_exits_at_once_is_one_line() -> None:
    missing = _mcp("--", "no-such-mcp-server", "--stdio")
    assert missing.returncode == 1
    assert missing.stderr == (
        "switchboard tools mcp: cannot start the MCP server `no-such-mcp-server --stdio`: "
        "[Errno 2] No such file or directory: 'no-such-mcp-server'\n"
    )
    exits = _mcp("--", sys.executable, "-c", "import sys; sys.exit(4)")
    assert exits.returncode == 1
    assert exits.stderr.startswith("switchboard tools mcp: cannot start the MCP server `"), exits.stderr
    assert "Traceback" not in exits.stderr


def test_without_a_token_the_error_names_both_ways() -> None:
    refused = _mcp("--", *KIT, token=None)
    assert refused.returncode == 1
    assert "$SWITCHBOARD_SESSION_TOKEN" in refused.stderr, refused.stderr
    assert "--token" in refused.stderr


def test_names_a_registration_cannot_carry_and_tools_past_64_are_left_out(caplog: pytest.LogCaptureFixture) -> None:
    from switchboard.tool_mcp import declarations

    def tool(name: str) -> mt.Tool:
        return mt.Tool(name=name, description="d", input_schema={"type": "object"})

    listed = [tool("has space"), tool("x" * 65), tool("dotted.name")] + [tool(f"t{i}") for i in range(70)]
    warned: set[str] = set()
    with caplog.at_level(logging.WARNING, "switchboard.tools"):
        kept = declarations(listed, warned)
        again = declarations(listed, warned)
    assert [t["name"] for t in kept] == [f"t{i}" for i in range(64)] == [t["name"] for t in again]
    assert kept[0] == {"name": "t0", "description": "d", "parameters": {"type": "object"}}
    lines = [record.getMessage() for record in caplog.records]
    # One warning each, however often the list is read.
    assert len(lines) == 4, lines
    assert "left out the tool 'has space': its name is not 1 to 64 letters, digits, '_' or '-'" in lines
    assert "left out 6 tools past the 64 a registration holds: t64, t65, t66, t67, t68, t69" in lines


def test_a_second_tool_of_one_name_and_a_schema_of_another_type_are_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A registration refuses both (400), which would refuse every tool of the server with them.
    from switchboard.tool_mcp import declarations

    listed = [
        mt.Tool(name="same", description="first", input_schema={"type": "object"}),
        mt.Tool(name="same", description="second", input_schema={"type": "object"}),
        mt.Tool(name="text", description="d", input_schema={"type": "string"}),
        mt.Tool(name="dangling", description="d", input_schema={"properties": {"a": {"$ref": "#/nope"}}}),
    ]
    with caplog.at_level(logging.WARNING, "switchboard.tools"):
        kept = declarations(listed, set())
    assert [(t["name"], t["description"]) for t in kept] == [("same", "first")]
    lines = [record.getMessage() for record in caplog.records]
    assert "left out the tool 'same': the server lists another tool of this name before it" in lines
    assert any(
        line.startswith("left out the tool 'text': a registration cannot carry it: not accepted") for line in lines
    )
    assert any("'dangling'" in line and "points at nothing in the schema" in line for line in lines), lines
