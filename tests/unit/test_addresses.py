"""Which addresses a workspace provider may be reached at, in every spelling an address has."""

from __future__ import annotations

import ipaddress

import pytest

from broker.errors import AddressRefused, InvalidRequest
from common.addresses import ProviderAddresses, refusal, split_base_url
from tests.resolver import Names


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("10.0.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.0.1", "private"),
        ("192.0.2.1", "private"),
        ("100.64.0.1", "non-public"),
        ("169.254.1.1", "link-local"),
        ("0.0.0.0", "unspecified"),  # noqa: S104 (an address judged, not bound)
        ("224.0.0.251", "multicast"),
        ("240.0.0.1", "private"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:192.168.0.1", "private"),
        ("2002:7f00:1::1", "loopback"),
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "private"),
        ("64:ff9b::a00:1", "private"),
        ("::127.0.0.1", "reserved"),
    ],
)
def test_non_public_addresses_are_refused_by_default_and_allowed_with_the_setting(address: str, words: str) -> None:
    parsed = ipaddress.ip_address(address)
    why = refusal(parsed, allow_private=False)
    assert why is not None, address
    assert words in why, (address, why)
    assert refusal(parsed, allow_private=True) is None


@pytest.mark.parametrize(
    "address", ["169.254.169.254", "fd00:ec2::254", "::ffff:169.254.169.254", "169.254.170.2", "100.100.100.200"]
)
def test_metadata_addresses_are_refused_whatever_the_setting(address: str) -> None:
    for allow in (False, True):
        why = refusal(ipaddress.ip_address(address), allow_private=allow)
        assert why is not None
        assert "cloud metadata" in why


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert refusal(ipaddress.ip_address(address), allow_private=False) is None


def test_a_base_url_names_its_host_and_port() -> None:
    assert split_base_url("https://api.openai.com/v1") == ("api.openai.com", 443)
    assert split_base_url("http://LLM.example:8080") == ("llm.example", 8080)
    assert split_base_url("http://[::1]:9/v1") == ("::1", 9)
    for bad in ("ftp://x.example", "https://", "https://u@x.example", "https://x.example:0x10"):
        with pytest.raises(InvalidRequest):
            split_base_url(bad)


async def test_the_connection_gets_the_checked_address_and_a_refusal_names_the_setting() -> None:
    names = Names({"one.example": ["93.184.215.14"], "inside.example": ["10.0.0.9"]})
    addresses = ProviderAddresses(allow_private=False, timeout_s=1, resolver=names)
    assert await addresses.connectable("one.example", 443) == "93.184.215.14"
    with pytest.raises(AddressRefused) as refused:
        await addresses.connectable("inside.example", 443)
    assert refused.value.message == (
        "the model provider's address is refused: inside.example resolves to 10.0.0.9, a private address;"
        " a model provider on a loopback, private, link-local or other non-public address needs"
        " SWITCHBOARD_PROVIDER_ALLOW_PRIVATE=true (off by default)"
    )
    with pytest.raises(OSError, match="not in the test's table"):
        await addresses.connectable("nowhere.invalid", 443)
