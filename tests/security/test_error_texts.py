"""What a session reads when something fails (issue 10): words a person can act on, never an exception's
class, repr or module. Schema and JSON body cases are in test_schema_attacks.py; these are the rest the
sweep found: a step that fails unexpectedly, an MCP server's failures, a server tool's, a cloud key's."""

from __future__ import annotations

from typing import Any, cast

import anyio
import httpx2
import pydantic
import pytest

from tests.api_client import Api, of_type, run_over
from tests.security.test_schema_attacks import clean
from workers.mcp.connection import describe
from workers.models.base import ModelError
from workers.models.clouds import cloud_failure, service_account
from workers.server_tools import ServerToolRunner
from workers.steps import StepRunner
from workers.tools.builtins import BUILTINS
from workers.tools.registry import Registry, ServerTool


async def test_a_step_that_fails_unexpectedly_ends_its_run_without_the_exception(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*_: Any) -> Any:
        raise RuntimeError("<class 'workers.secret.Thing'> at 0x7f00: the worker's own detail")

    # The worker runs in this process: its next step meets the bug.
    monkeypatch.setattr(StepRunner, "_call", broken)
    session = await api.session()
    await api.send(session, "hello")
    events = await api.wait_for(session, run_over, timeout=10)
    [failed] = of_type(events, "run_failed")
    assert clean(failed["error"]) == "internal: the step failed unexpectedly; the worker logged why"


class _Arguments(pydantic.BaseModel):
    n: int


async def _raising(error: Exception) -> str:
    raise error


@pytest.mark.parametrize(
    ("tool", "arguments", "words"),
    [
        ("count", {"n": "many"}, "the arguments were not valid: n: Input should be a valid integer"),
        ("lookup", {"n": 1}, "the tool lookup failed unexpectedly; the worker logged why"),
        ("refuse", {"n": 1}, "7 is not a row of this table"),
        ("calculate", {"expression": "(10.0 ** 300) ** 2"}, "the result is too large for a floating-point number"),
    ],
)
async def test_a_server_tool_failure_reads_as_words(tool: str, arguments: dict[str, Any], words: str) -> None:
    tools = Registry(
        [
            *BUILTINS.values(),
            ServerTool("count", "", _Arguments, lambda _: _raising(KeyError("n"))),
            ServerTool("lookup", "", _Arguments, lambda _: _raising(KeyError("row"))),
            ServerTool("refuse", "", _Arguments, lambda _: _raising(ValueError("7 is not a row of this table"))),
        ]
    )
    runner = ServerToolRunner(cast(Any, None), tools, cast(Any, None), cast(Any, None), cast(Any, None))
    mapped = await runner._execute(tool, arguments)
    assert mapped.is_error
    [block] = mapped.blocks
    assert words in clean(block["data"]["text"])


def _not_mcp() -> pydantic.ValidationError:
    try:
        _Arguments.model_validate({"n": "x"})
    except pydantic.ValidationError as error:
        return error
    raise AssertionError("validated")


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (httpx2.ReadTimeout(""), "no answer in time"),
        (TimeoutError(), "no answer in time"),
        (anyio.ClosedResourceError(), "the connection failed"),
        (ExceptionGroup("task group", [anyio.EndOfStream()]), "the connection failed"),
        (_not_mcp(), "the server answered something that is not MCP"),
        (KeyError(), "it failed without saying why"),
        (httpx2.ConnectError("All connection attempts failed"), "All connection attempts failed"),
    ],
)
def test_an_mcp_failure_is_described_in_words(error: BaseException, words: str) -> None:
    assert clean(describe(error)) == words


@pytest.mark.parametrize(
    ("key", "words"),
    [
        (
            '{"type": "service_account", "client_email": "a@b", "private_key": "not-a-key"}',
            "a value in it is malformed",
        ),
        ('{"type": "service_account", "private_key": 5}', "cannot be used"),
    ],
)
def test_a_service_account_key_that_cannot_be_used_says_what_kind_of_thing_is_wrong(key: str, words: str) -> None:
    with pytest.raises(ModelError) as raised:
        service_account(key)
    assert words in clean(str(raised.value))


def test_a_cloud_identity_failure_says_why_without_its_class() -> None:
    failure = cloud_failure(RuntimeError("no credentials were found in the environment"))
    assert failure is not None
    assert (
        clean(str(failure)) == "the cloud's credentials could not be used: no credentials were found in the environment"
    )
