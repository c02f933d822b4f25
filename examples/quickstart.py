"""The Python quickstart: the real `subako` SDK against Switchboard's built-in scripted model.

It finds the agent called "scripted" (the one `switchboard session new` makes; it makes it if there is
none), opens a session, serves one tool from this process, and asks the scripted model to call it:

    python3.12 -m venv .venv-quickstart && .venv-quickstart/bin/pip install subako
    SWITCHBOARD_API_KEY=$(cat .switchboard/dev-api-key) .venv-quickstart/bin/python examples/quickstart.py

`SWITCHBOARD_URL` is the API (http://127.0.0.1:8000 by default) and `SWITCHBOARD_API_KEY` the key
`switchboard up` printed. It prints the model's answer and exits 0, or says what failed and exits 1.
The SDK needs Python 3.12 or newer; the server does not.
"""

from __future__ import annotations

import asyncio
import os
import sys

from pydantic import BaseModel
from subako import (
    CreateAgentBody,
    CreatedSessionBody,
    CreateSessionBody,
    PublishAgentVersionBody,
    SessionConnection,
    SubakoClient,
    SubakoConnectionError,
    SubakoError,
    Tool,
    ToolCall,
)

AGENT_NAME = "scripted"
SCRIPTED_MODEL = {"format": "openai_responses", "model": "scripted", "max_tokens": 1000, "context_window": 8000}
RUN_ENDS = ("run_completed", "run_failed", "run_cancelled")
WAIT_S = 30.0


class Row(BaseModel):
    row_id: str


async def highlight(args: Row, call: ToolCall) -> str:
    # Runs here, in the app: the model only asked for it.
    return f"Row {args.row_id} is highlighted."


async def scripted_agent(admin: SubakoClient) -> str:
    """The id of the newest agent called AGENT_NAME, made with the scripted model if there is none."""
    async for agent in await admin.agents.list():
        if agent.name == AGENT_NAME:
            return str(agent.id)
    scripted = [p async for p in await admin.model_providers.list() if p.display_name == "Scripted"]
    if not scripted:
        raise RuntimeError("this server lists no provider called Scripted")
    agent = await admin.agents.create(CreateAgentBody(name=AGENT_NAME))
    await admin.agents.publish_version(
        agent.id, PublishAgentVersionBody(model_provider_id=scripted[0].id, model=SCRIPTED_MODEL)
    )
    return str(agent.id)


def last_text(session: SessionConnection) -> str:
    """The text of the transcript's newest message (the model's answer once the run is over)."""
    message = session.transcript[-1].message
    return "".join(block.data.text for block in message.content if block.type == "text")


async def main(url: str, key: str) -> str:
    async with SubakoClient(base_url=url, api_key=key) as admin:
        agent_id = await scripted_agent(admin)
        created = await admin.sessions.create(CreateSessionBody(agent_id=agent_id))
    assert isinstance(created, CreatedSessionBody)
    # From here on, what a frontend does: it holds only the session token, never the API key.
    async with (
        SubakoClient(base_url=url, api_key=created.session_token) as client,
        client.sessions.connect(created.id, history=True) as session,
    ):
        web = session.create_tool_client("web")
        web.add_tool("highlight_row", Tool(description="Highlight a row", parameters=Row, execute=highlight))
        await web.ready()
        # The scripted model turns each `/call <model-visible name> <JSON arguments>` line into a tool call.
        sent = await session.send(f'/call client__{web.name}__highlight_row {{"row_id": "42"}}')
        # The connection holds every event of the session, in order: read them until this run ends.
        async with asyncio.timeout(WAIT_S):
            async for end in session:
                if end.type in RUN_ENDS and str(end.run_id) == str(sent.run_id):
                    break
            else:
                raise RuntimeError("the session's event stream ended before the run did")
        if end.type != "run_completed":
            raise RuntimeError(f"the run ended with {end.type}: {getattr(end, 'error', '')}")
        return last_text(session)


def fail(why: str) -> int:
    sys.stderr.write(f"quickstart: {why}\n")
    return 1


def run() -> int:
    url = os.environ.get("SWITCHBOARD_URL", "http://127.0.0.1:8000").rstrip("/")
    key = os.environ.get("SWITCHBOARD_API_KEY", "")
    if not key:
        return fail("set SWITCHBOARD_API_KEY to the key `switchboard up` printed (its Key file line says where it is)")
    try:
        answer = asyncio.run(main(url, key))
    except SubakoConnectionError as error:
        return fail(f"cannot reach {url} ({error}); is `switchboard up` running?")
    except SubakoError as error:
        status = f" {error.status} {error.code}" if error.status else ""
        return fail(f"{url} answered{status}: {error}")
    except TimeoutError:
        return fail(f"the run did not end within {WAIT_S:g} s; is a worker running?")
    except (OSError, RuntimeError) as error:
        return fail(str(error))
    print(answer)  # noqa: T201 (the answer is what this script is for)
    # client__web__highlight_row: Row 42 is highlighted.
    return 0


if __name__ == "__main__":
    sys.exit(run())
