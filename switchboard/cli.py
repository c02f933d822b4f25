"""`switchboard up | api | worker [--check] | keys mint | session new | models try | tools serve | tools mcp`."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from pydantic import ValidationError

from api.settings import ApiSettings
from broker import BrokerSettings
from broker.services.credentials import PERMISSIONS
from common.settings import ProcessSettings
from switchboard.settings import LocalApiSettings, Settings
from workers.settings import WorkerSettings

Role = TypeVar("Role", bound=BrokerSettings)


def _settings(role: type[Role]) -> Role:
    """The settings of the command's role, read from the environment once and passed down: `switchboard
    api` reads the API's alone (api/settings.py, none of the model providers' keys), a worker its own
    (workers/settings.py), `keys mint` the broker's (switchboard/settings.py composes them)."""
    try:
        return role()
    except ValidationError as error:
        raise SystemExit(f"switchboard: bad setting: {error}") from None


def _redis_url(settings: BrokerSettings, role: str) -> str:
    if settings.redis_url is None:
        raise SystemExit(
            f"switchboard {role}: set SWITCHBOARD_REDIS_URL (`switchboard up` starts an embedded Redis instead)"
        )
    return settings.redis_url


def _logging(settings: ProcessSettings) -> None:
    from common.jsonlog import configure

    configure(settings.log_format)


def _cmd_api(_: argparse.Namespace) -> int:
    from api.server import serve

    settings = _settings(ApiSettings)
    _logging(settings)
    serve(settings, _redis_url(settings, "api"))
    return 0


def _cmd_worker(args: argparse.Namespace) -> int:
    from workers.worker import healthy, serve

    settings = _settings(WorkerSettings)
    url = _redis_url(settings, "worker")
    if args.check:
        ok = asyncio.run(healthy(settings, url))
        print("worker healthy" if ok else "no fresh worker health key on this host")
        return 0 if ok else 1
    _logging(settings)
    asyncio.run(serve(settings, url))
    return 0


def _cmd_models_try(args: argparse.Namespace) -> int:
    from switchboard.models_try import try_model

    settings = _settings(WorkerSettings)
    url = _redis_url(settings, "models try")
    return asyncio.run(try_model(settings, url, args.provider, args.model, args.max_tokens))


def _cmd_mint(args: argparse.Namespace) -> int:
    from broker import Broker

    settings = _settings(BrokerSettings)
    url = _redis_url(settings, "keys mint")

    async def mint() -> str:
        broker = await Broker.connect(settings, url)
        try:
            _, secret = await broker.credentials.mint_api_key(args.label, list(args.permission), None)
        finally:
            await broker.close()
        return secret

    print(asyncio.run(mint()))
    return 0


def _cmd_up(_: argparse.Namespace) -> int:
    from switchboard.up import run

    return run(_settings(Settings))


def _token(args: argparse.Namespace) -> str:
    from switchboard.tool_registration import TOKEN_ENV

    token: str | None = args.token or os.environ.get(TOKEN_ENV)
    if not token:
        raise SystemExit(
            f"switchboard tools {args.tools_command}: no token: set ${TOKEN_ENV} to a session token or an API key "
            "(or give --token, which other users of this machine can read through `ps`)"
        )
    return token


def _cmd_tools_serve(args: argparse.Namespace) -> int:
    from switchboard.tool_log import configure
    from switchboard.tool_registration import ServeError
    from switchboard.tool_serve import ServeOptions, serve
    from switchboard.typed_tools import ToolError, load_tools

    configure(args.log_format)
    token = _token(args)
    try:
        tools = load_tools(args.spec)
    except ToolError as error:
        raise SystemExit(f"switchboard tools serve: {error}") from None
    options = ServeOptions(
        spec=args.spec,
        url=args.url,
        session_id=args.session,
        token=token,
        name=args.name,
        ttl_s=None if args.ttl == 0 else args.ttl,
        client_id=args.client_id,
        processes=args.processes,
        concurrency=args.concurrency,
        drain_s=args.drain,
        log_format=args.log_format,
    )
    try:
        asyncio.run(serve(options, tools))
    except ServeError as error:
        raise SystemExit(f"switchboard tools serve: {error}") from None
    return 0


def _cmd_tools_member(args: argparse.Namespace) -> int:
    from switchboard.tool_log import configure
    from switchboard.tool_member import Target
    from switchboard.tool_serve import member
    from switchboard.typed_tools import load_tools

    configure(args.log_format, args.member)
    if args.report_fd is not None:
        # Ours alone: a program a tool starts must not hold the pipe open.
        os.set_inheritable(args.report_fd, False)
    target = Target(args.url, args.session, _token(args), args.client_id)
    asyncio.run(member(target, load_tools(args.spec), args.concurrency, args.report_fd, args.supervisor))
    return 0


def _cmd_tools_mcp(args: argparse.Namespace) -> int:
    from switchboard.mcp_link import ServerSpec
    from switchboard.tool_log import configure
    from switchboard.tool_mcp import McpOptions, bridge
    from switchboard.tool_registration import TOKEN_ENV, ServeError

    command = tuple(args.command)
    if not command and not args.server_url:
        args.parser.error("give the MCP server's command after --, or --server-url for one over HTTP")
    if command and args.server_url:
        args.parser.error("give the MCP server's command or --server-url, not both")
    if args.header and not args.server_url:
        args.parser.error("--header goes with --server-url")
    configure(args.log_format, prefix="switchboard tools mcp")
    token = _token(args)
    # The child gets this environment, less the token it has no use for.
    env = {name: value for name, value in os.environ.items() if name != TOKEN_ENV}
    server = ServerSpec(command, args.server_url, dict(args.header or ()), env if command else None)
    options = McpOptions(
        url=args.url,
        session_id=args.session,
        token=token,
        name=args.name,
        ttl_s=None if args.ttl == 0 else args.ttl,
        server=server,
        log_format=args.log_format,
    )
    try:
        asyncio.run(bridge(options))
    except ServeError as error:
        raise SystemExit(f"switchboard tools mcp: {error}") from None
    return 0


def _cmd_session_new(args: argparse.Namespace) -> int:
    from switchboard.session_new import SessionNotCreated, api_key, new_session

    settings = _settings(LocalApiSettings)
    url = args.url or settings.local_api_url
    try:
        made = new_session(url, api_key(settings, dict(os.environ)), args.agent)
    except SessionNotCreated as error:
        raise SystemExit(f"switchboard session new: {error}") from None
    if args.json:
        print(json.dumps(dataclasses.asdict(made) | {"url": url}))
    else:
        agent = f"{made.agent_name} ({made.agent_id}{', new, scripted model' if made.created_agent else ''})"
        print(f"session id:    {made.session_id}\nsession token: {made.session_token}\nagent:         {agent}")
    return 0


def _at_least(least: float, kind: type[int] | type[float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{text} is less than {least:g}")
        return value

    return parse


def _header(text: str) -> tuple[str, str]:
    name, colon, value = text.partition(":")
    if not colon or not name.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not a header: write it as 'Name: value'")
    return name.strip(), value.strip()


def _http_url(text: str) -> str:
    if not text.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"{text!r} is not an http:// or https:// URL")
    return text


def _session_arguments(sub: argparse.ArgumentParser) -> None:
    from switchboard.tool_log import LOG_FORMATS

    sub.add_argument("--url", default="http://127.0.0.1:8000", help="the Switchboard API")
    sub.add_argument("--session", required=True, help="the session id")
    sub.add_argument(
        "--token",
        help="session token or API key; other users of this machine can read it through `ps`, so set "
        "$SWITCHBOARD_SESSION_TOKEN instead (the default)",
    )
    sub.add_argument(
        "--log-format", choices=LOG_FORMATS, default="plain", help="plain lines, or one JSON object a line (plain)"
    )


def _ttl_argument(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--ttl",
        type=_at_least(0, int),
        default=30,
        metavar="SECONDS",
        help="registration ttl in seconds, 0 for never (30)",
    )


def _mcp_parser(tools: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = tools.add_parser(
        "mcp",
        help="serve a local MCP server's tools (a command, or --server-url) as a client registration",
        usage="%(prog)s --session SID [options] -- COMMAND [ARGS...]\n       %(prog)s --session SID [options] "
        "--server-url URL [--header 'Name: value' ...]",
        description="Run a stdio MCP server as a child (or connect to one over HTTP with --server-url) and serve "
        "its tools on a session as a client registration. The token is read from $SWITCHBOARD_SESSION_TOKEN "
        "(a session token, or an API key that may manage the session).",
    )
    _session_arguments(mcp)
    mcp.add_argument("--name", default="mcp", help="the client name to register (mcp)")
    _ttl_argument(mcp)
    mcp.add_argument("--server-url", type=_http_url, metavar="URL", help="an MCP server over HTTP, not a command")
    mcp.add_argument(
        "--header",
        type=_header,
        action="append",
        metavar="'NAME: VALUE'",
        help="a header for every request to --server-url (repeatable)",
    )
    mcp.add_argument("command", nargs="*", metavar="COMMAND", help="the MCP server's command and arguments, after --")
    mcp.set_defaults(run=_cmd_tools_mcp, prog=mcp.prog, parser=mcp)


def _tools_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tools = commands.add_parser("tools", help="serve Python tools, or an MCP server's").add_subparsers(
        dest="tools_command", required=True
    )
    serve = tools.add_parser(
        "serve",
        help="register MODULE:OBJECT's tools and serve them with N processes",
        description="Register MODULE:OBJECT's tools on a session and serve their calls. The token is read from "
        "$SWITCHBOARD_SESSION_TOKEN (a session token, or an API key that may manage the session).",
    )
    member = tools.add_parser("member", help="one member process of `tools serve` (started by it)")
    for sub in (serve, member):
        sub.add_argument("spec", metavar="MODULE:OBJECT", help="a function, or a list or dict of them")
        _session_arguments(sub)
        sub.add_argument(
            "--concurrency", type=_at_least(1, int), default=8, metavar="N", help="calls one process runs at once (8)"
        )
    serve.add_argument("--name", default="tools", help="the client name to register (tools)")
    _ttl_argument(serve)
    serve.add_argument("--client-id", help="join this registration instead of registering (it is not left)")
    serve.add_argument("--processes", type=_at_least(1, int), default=1, metavar="N", help="member processes (1)")
    serve.add_argument(
        "--drain",
        type=_at_least(0, float),
        default=30.0,
        metavar="SECONDS",
        help="seconds members get to finish on stop (30)",
    )
    serve.set_defaults(run=_cmd_tools_serve, prog=serve.prog)
    member.add_argument("--client-id", required=True)
    member.add_argument("--member", type=int, help="this member's slot in the pool, named in its lines")
    member.add_argument("--report-fd", type=int, help="a pipe for what it did, written as it exits")
    member.add_argument("--supervisor", type=int, help="the pid whose death stops it (default: its parent)")
    member.set_defaults(run=_cmd_tools_member)
    _mcp_parser(tools)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="switchboard", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="embedded Redis (unless SWITCHBOARD_REDIS_URL), the API and one worker")
    up.set_defaults(run=_cmd_up)
    api = commands.add_parser("api", help="serve the HTTP API")
    api.set_defaults(run=_cmd_api)
    worker = commands.add_parser("worker", help="run model steps and deadlines")
    worker.add_argument("--check", action="store_true", help="exit 0 only if this host's worker is healthy")
    worker.set_defaults(run=_cmd_worker)
    keys = commands.add_parser("keys", help="API keys").add_subparsers(dest="keys_command", required=True)
    mint = keys.add_parser("mint", help="print a new API key")
    mint.add_argument("--label", required=True)
    mint.add_argument("--permission", action="append", choices=PERMISSIONS, required=True, metavar="PERMISSION")
    mint.set_defaults(run=_cmd_mint)
    sessions = commands.add_parser("session", help="sessions").add_subparsers(dest="session_command", required=True)
    new = sessions.add_parser("new", help="print a new session's id and token (needs a running API)")
    new.add_argument("--agent", default="scripted", help="the agent, by name; made with --model if none (scripted)")
    new.add_argument("--model", default="scripted", choices=["scripted"], help="the model of an agent made here")
    new.add_argument("--url", help="the API (default: http://SWITCHBOARD_HOST:SWITCHBOARD_PORT)")
    new.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    new.set_defaults(run=_cmd_session_new)
    models = commands.add_parser("models", help="model providers").add_subparsers(dest="models_command", required=True)
    attempt = models.add_parser(
        "try", help="send a provider one short request with one tool; print the answer, the call and the tokens"
    )
    attempt.add_argument("--provider", required=True, help="the provider's id (GET /v1/model-providers)")
    attempt.add_argument("--model", required=True, help="the model's name, as the provider spells it")
    attempt.add_argument(
        "--max-tokens", type=_at_least(1, int), default=512, metavar="N", help="the answer's token limit (512)"
    )
    attempt.set_defaults(run=_cmd_models_try)
    _tools_parser(commands)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        # A Ctrl-C before a command has its own handling in place (while it imports or loads a module).
        print(f"{getattr(args, 'prog', 'switchboard ' + args.command)}: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
