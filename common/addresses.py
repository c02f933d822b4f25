"""Where a workspace's model provider or an agent's MCP server may be reached: its host's addresses,
resolved when the provider is created or moved (the grant published) and again for every connection, must
be public unless the deployment allows private ones (SWITCHBOARD_PROVIDER_ALLOW_PRIVATE); cloud metadata
addresses never are. The platform providers (the deployment's own base URLs) are not checked."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from common.errors import AddressRefused, InvalidRequest

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# (host, port) -> the addresses the host resolves to, as text; socket.gaierror when it does not.
Resolver = Callable[[str, int], Awaitable[list[str]]]

ALLOW_SETTING = "SWITCHBOARD_PROVIDER_ALLOW_PRIVATE"
# Instance metadata services (AWS, GCP, Azure, Oracle on 169.254.169.254; AWS over IPv6; ECS task
# metadata; Alibaba): they hand out the machine's cloud credentials and no model lives there, so they are
# refused even where private addresses are allowed.
METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "169.254.170.2", "100.100.100.200")
)
_METADATA_WHY = "a cloud metadata address (refused whatever the settings say)"
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


async def system_resolver(host: str, port: int) -> list[str]:
    """The loop's getaddrinfo (in its executor: the event loop goes on meanwhile)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    # An IPv6 form that reaches an IPv4 address (mapped, 6to4, Teredo, NAT64) is judged by that address:
    # ::ffff:127.0.0.1 is the loopback whatever the v6 tables say.
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def refusal(address: IPAddress, *, allow_private: bool) -> str | None:
    """Why `address` is no place for a provider (words for a message), or None when it may be used."""
    inner = _embedded_v4(address) if isinstance(address, ipaddress.IPv6Address) else None
    if inner is not None:
        return refusal(inner, allow_private=allow_private)
    if address in METADATA:
        return _METADATA_WHY
    if allow_private:
        return None
    for words, hit in (
        ("a loopback address", address.is_loopback),
        ("the unspecified address", address.is_unspecified),
        ("a link-local address", address.is_link_local),
        ("a multicast address", address.is_multicast),
        ("a private address", address.is_private),
        ("a reserved address", address.is_reserved),
        ("a non-public address", not address.is_global),
    ):
        if hit:
            return words
    return None


def split_base_url(base_url: str, field: str = "base_url") -> tuple[str, int]:
    """The host and port a base URL names (the scheme's port when it names none); InvalidRequest naming
    `field` when it is no http(s) URL with a host, or carries a user or password."""
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError as error:
        raise InvalidRequest(f"{field}: not a URL this server can use ({error})") from None
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host:
        raise InvalidRequest(f"{field}: must be an http or https URL with a host, such as https://api.example.com/v1")
    if parts.username is not None or parts.password is not None:
        raise InvalidRequest(f"{field}: must not carry a user or password (a credential goes in its own field)")
    return host, port or (443 if parts.scheme == "https" else 80)


class ProviderAddresses:
    """The address check of one process, with its resolver (the system's unless a test brings its own)."""

    def __init__(self, *, allow_private: bool, timeout_s: float, resolver: Resolver | None = None) -> None:
        self.allow_private = allow_private
        self._timeout_s = timeout_s
        self._resolve = resolver or system_resolver

    async def check_base_url(self, base_url: str, field: str = "base_url", what: str = "a model provider") -> None:
        """For a provider being created or moved (a grant published): InvalidRequest naming `field` when
        its host resolves to an address refused here. A name that does not resolve (yet, or not from this
        host) passes: every connection resolves and checks it again."""
        host, port = split_base_url(base_url, field)
        try:
            addresses = await self.addresses(host, port)
        except (OSError, UnicodeError, TimeoutError):
            return
        self._refuse_any(host, addresses, f"{field}: ", what)

    async def connectable(self, host: str, port: int, what: str = "the model provider") -> str:
        """The address to connect to for `host`, every address it resolves to checked; AddressRefused when
        one is refused, OSError or TimeoutError when it does not resolve in time."""
        addresses = await self.addresses(host, port)
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} resolves to no address")
        self._refuse_any(host, addresses, f"{what}'s address is refused: ", "a " + what.removeprefix("the "))
        return str(addresses[0])

    async def addresses(self, host: str, port: int) -> list[IPAddress]:
        """What `host` resolves to, within the resolution timeout."""
        try:
            # A literal is itself: no resolver asked (and none can answer something else for it).
            return [ipaddress.ip_address(host)]
        except ValueError:
            pass
        async with asyncio.timeout(self._timeout_s):
            found = await self._resolve(host, port)
        # An IPv6 answer may carry a zone (fe80::1%eth0); the address is what is judged.
        return [ipaddress.ip_address(text.split("%", 1)[0]) for text in found]

    def _refuse_any(self, host: str, addresses: list[IPAddress], lead: str, what: str = "a model provider") -> None:
        # Every address the name has counts, not just the first: a name with one public and one private
        # address would otherwise reach the private one whenever the system sorts it first.
        for address in addresses:
            why = refusal(address, allow_private=self.allow_private)
            if why is None:
                continue
            named = f"{host} resolves to {address}" if host != str(address) else str(address)
            if why == _METADATA_WHY:
                raise AddressRefused(f"{lead}{named}, {why}")
            raise AddressRefused(
                f"{lead}{named}, {why}; {what} on a loopback, private, link-local or other non-public"
                f" address needs {ALLOW_SETTING}=true (off by default)"
            )
