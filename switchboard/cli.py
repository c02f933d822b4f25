"""`switchboard up | api | worker [--check] | keys mint`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from broker import Settings
from broker.credentials import PERMISSIONS


def _settings() -> Settings:
    try:
        return Settings()
    except ValidationError as error:
        raise SystemExit(f"switchboard: bad setting: {error}") from None


def _redis_url(settings: Settings, role: str) -> str:
    if settings.redis_url is None:
        raise SystemExit(
            f"switchboard {role}: set SWITCHBOARD_REDIS_URL (`switchboard up` starts an embedded Redis instead)"
        )
    return settings.redis_url


def _logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _cmd_api(_: argparse.Namespace) -> int:
    from api.server import serve

    _logging()
    settings = _settings()
    serve(settings, _redis_url(settings, "api"))
    return 0


def _cmd_worker(args: argparse.Namespace) -> int:
    from workers.worker import healthy, serve

    settings = _settings()
    url = _redis_url(settings, "worker")
    if args.check:
        ok = asyncio.run(healthy(settings, url))
        print("worker healthy" if ok else "no fresh worker health key on this host")
        return 0 if ok else 1
    _logging()
    asyncio.run(serve(settings, url))
    return 0


def _cmd_mint(args: argparse.Namespace) -> int:
    from broker import Broker

    settings = _settings()
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

    return run(_settings())


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
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
