"""A resolver for provider host names that the test controls, so no test asks a DNS server anything."""

from __future__ import annotations

import socket

# A public address for names a test wants to pass the check; nothing ever connects to it (a test that
# runs a model through such a name points the name at its local fake before the run).
PUBLIC = "93.184.215.14"


class Names:
    """Answers from a table the test may change at any time (`answers[name] = [...]`); `localhost` is the
    loopback, literals are themselves, and any other name does not resolve."""

    def __init__(self, answers: dict[str, list[str]] | None = None) -> None:
        self.answers: dict[str, list[str]] = {"localhost": ["127.0.0.1", "::1"], **(answers or {})}
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host in self.answers:
            return list(self.answers[host])
        try:
            # Numeric forms only (127.1 and 2130706433 too, as the system reads them): no DNS asked.
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
        except socket.gaierror:
            pass
        else:
            return [str(info[4][0]) for info in infos]
        raise socket.gaierror(socket.EAI_NONAME, f"{host}: not in the test's table")
