"""A flood from a process of its own, as an attacker's machine would send it: the same request again and
again until it is killed, so the server's work (not the sender's) is what another session competes with.

    python -m tests.flood URL TOKEN METHOD PATH BODY_FILE
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx


def main(argv: list[str]) -> None:
    url, token, method, path, body_file = argv
    body = Path(body_file).read_bytes()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        while True:
            answer = client.request(method, path, content=body)
            if answer.status_code not in (404, 409):
                raise SystemExit(f"the flood was answered {answer.status_code}: {answer.text[:300]}")


if __name__ == "__main__":
    main(sys.argv[1:])
