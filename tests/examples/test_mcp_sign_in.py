"""examples/mcp_sign_in.py against API and worker processes and the `mcp` package's own authorization server
(tests/oauth_server.py, served by this test's loop): the script prints the sign-in link, the test plays the
person's browser, and the script sees the sign-in complete and the grant's tool answer with the person's
token; a refused API key fails it saying so."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable

import httpx
import pytest

from switchboard.processes import Processes
from tests.e2e.signing_stack import server, stack
from tests.examples.support import EXAMPLES, Event
from tests.oauth_server import CLIENT_ID, CLIENT_SECRET, MemoryAuthorizationServer

__all__ = ["server", "stack"]

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]

SCRIPT = EXAMPLES / "mcp_sign_in.py"


async def run_example(env: dict[str, str], person: Person | None = None) -> tuple[int, list[str], str]:
    """The script with `env` over this environment (the runner's SWITCHBOARD_* left out): its exit code,
    its lines, and its stderr. A line starting `sign in to ` is handed to `person` (by default its link is
    opened as a browser would) with the lines so far."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SCRIPT),
        env={**base, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    lines: list[str] = []
    async with asyncio.timeout(60):
        async for raw in process.stdout:
            line = raw.decode().rstrip("\n")
            lines.append(line)
            if line.startswith("sign in to "):
                await (person or signs_in)(env, lines)
        code = await process.wait()
    return code, lines, (await process.stderr.read()).decode()


Person = Callable[[dict[str, str], list[str]], Awaitable[None]]


async def signs_in(env: dict[str, str], lines: list[str]) -> None:
    await sign_in(lines[-1].rsplit(": ", 1)[1], env["SWITCHBOARD_URL"])


async def declines(env: dict[str, str], lines: list[str]) -> None:
    """The person says no, from the operator's app (its API key): the run goes on without the grant."""
    session_id = lines[0].removeprefix("session ")
    key = {"Authorization": f"Bearer {env['SWITCHBOARD_API_KEY']}"}
    async with httpx.AsyncClient(base_url=env["SWITCHBOARD_URL"], headers=key) as admin:
        page = await admin.get(f"/v1/sessions/{session_id}/events", params={"include": "extensions", "limit": 200})
        (asked,) = [e for e in page.json()["items"] if e["type"] == "mcp_authorization_required"]
        sent = await admin.post(f"/v1/sessions/{session_id}/mcp-authorizations/{asked['authorization_id']}/decline")
    assert sent.status_code == 200, sent.text


async def sign_in(authorization_url: str, api: str) -> None:
    """The person's browser: signed in at once, sent back to the callback under the public URL (the API's)."""
    async with httpx.AsyncClient() as browser:
        sent = await browser.get(authorization_url)
        assert sent.status_code == 302, sent.text
        assert sent.headers["location"].startswith(api + "/v1/mcp/oauth/callback?")
        page = await browser.get(sent.headers["location"])
    assert page.status_code == 200, page.text


def example_env(stack: tuple[Processes, str], server: MemoryAuthorizationServer) -> dict[str, str]:
    """The script's settings: the stack, its API key, and the grant's server with its registered client."""
    return {
        "SWITCHBOARD_URL": stack[1],
        "SWITCHBOARD_API_KEY": stack[0].env["TEST_API_KEY"],
        "SWITCHBOARD_MCP_URL": server.issuer + "/mcp",
        "SWITCHBOARD_MCP_CLIENT_ID": CLIENT_ID,
        "SWITCHBOARD_MCP_CLIENT_SECRET": CLIENT_SECRET,
    }


async def test_the_script_prints_the_link_and_the_tool_runs_once_signed_in(
    stack: tuple[Processes, str], server: MemoryAuthorizationServer
) -> None:
    processes, url = stack
    env = example_env(stack, server) | {"SWITCHBOARD_SUBJECT": "person-1"}
    code, lines, stderr = await run_example(env)
    assert code == 0, "\n".join(lines) + stderr + processes.tail()
    session_id = lines[0].removeprefix("session ")
    (asked,) = [line for line in lines if line.startswith("sign in to ")]
    assert asked.startswith(f"sign in to notes ({server.issuer}/mcp) by ")
    assert "signed in to notes" in lines
    assert lines[-1] == "result: noted: signed in from the example"
    key = {"Authorization": f"Bearer {env['SWITCHBOARD_API_KEY']}"}
    async with httpx.AsyncClient(base_url=url, headers=key) as admin:
        page = await admin.get(
            f"/v1/sessions/{session_id}/events", params={"include": "extensions", "limit": 200, "order": "asc"}
        )
        events: list[Event] = page.json()["items"]
        listed = await admin.get("/v1/mcp/connections", params={"subject": "person-1"})
    kinds = [e["type"] for e in events if e["type"].startswith("mcp_authorization")]
    assert kinds == ["mcp_authorization_required", "mcp_authorization_completed"]
    # The token is the subject's: one sign-in serves every session of that person.
    assert [(c["grant"], c["subject"]) for c in listed.json()["items"]] == [("notes", "person-1")]


async def test_a_declined_sign_in_ends_the_script_saying_so(
    stack: tuple[Processes, str], server: MemoryAuthorizationServer
) -> None:
    processes, _ = stack
    code, lines, stderr = await run_example(example_env(stack, server), declines)
    assert code == 1, "\n".join(lines) + stderr + processes.tail()
    assert lines[-1] == "no sign-in to notes: declined"


async def test_a_refused_api_key_fails_the_script_saying_so(
    stack: tuple[Processes, str], server: MemoryAuthorizationServer
) -> None:
    env = {"SWITCHBOARD_URL": stack[1], "SWITCHBOARD_API_KEY": "swb_ak_nothing", "SWITCHBOARD_MCP_URL": server.issuer}
    code, lines, stderr = await run_example(env)
    assert code == 1
    assert lines == []
    assert "401" in stderr
