"""A Redis Cluster reached at a `rediss://` URL is TLS to every node, not just the seed: each node's client
is built from the seed URL (its scheme, credentials and options kept). The Cluster here has no plain-text
port at all, so a node client that fell back to `redis://` could not even PING."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.asyncio.connection import SSLConnection

from broker.transport.connect import open_redis
from broker.transport.slots import SlotMap, node_url
from switchboard.settings import Settings
from tests.helpers import HIGHLIGHT, aw, make_session, types
from tests.stack import hang_report, opened_broker
from tests.tls import TlsCluster, TlsUnsupported, make_certificates

WEB = "0190f2a0-0000-7000-8000-00000000000a"

# The module's Cluster is made once, on one worker of a run across cores.
pytestmark = pytest.mark.xdist_group("tls_cluster")


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsCluster]:
    """Three masters, TLS only (the cluster bus too), with certificates from a throwaway CA."""
    directory = Path(tmp_path_factory.mktemp("tls-cluster"))
    cluster = TlsCluster(directory, make_certificates(directory / "certs"), masters=3)
    try:
        cluster.start()
    except TlsUnsupported as missing:
        pytest.skip(str(missing))
    try:
        yield cluster
    finally:
        cluster.stop()


def assert_tls(client: Redis, ca: Path) -> None:
    """The client's connections are TLS, verifying the server against the test CA."""
    pool = client.connection_pool
    assert issubclass(pool.connection_class, SSLConnection)
    assert pool.connection_kwargs["ssl_ca_certs"] == str(ca)
    assert pool.connection_kwargs["ssl_cert_reqs"] == "required"


def key_on(slots: SlotMap, address: str, prefix: str) -> str:
    """A key whose slot the master at `address` serves."""
    for n in range(100_000):
        key = f"{prefix}:k{n}"
        if slots.address(SlotMap.slot(key)) == address:
            return key
    raise AssertionError(f"no key found for {address}")


async def test_every_node_of_a_rediss_cluster_is_reached_over_tls(tls_cluster: TlsCluster, key_prefix: str) -> None:
    connected = await open_redis(tls_cluster.url)
    try:
        slots = connected.slots
        assert slots is not None, "a Redis Cluster behind a rediss:// URL was taken for one Redis"
        masters = slots.masters()
        # The nodes announce their TLS ports (there is no other).
        assert sorted(masters) == sorted(tls_cluster.addresses)
        for address in masters:
            node = slots.client(address)
            assert_tls(node, tls_cluster.certificates.ca)
            assert await aw(node.ping())
        for address in masters:
            key = key_on(slots, address, key_prefix)
            await connected.commands.set(key, address)
            assert await connected.commands.get(key) == address.encode()
            # It went to the master serving its slot, not just any node.
            assert await slots.client(address).get(key) == address.encode()
            await connected.commands.unlink(key)
            assert not await slots.client(address).exists(key)
    finally:
        await connected.aclose()


async def test_the_broker_scripts_load_and_run_on_every_tls_node(
    tls_cluster: TlsCluster, key_prefix: str, tmp_path: Path
) -> None:
    settings = Settings(redis_url=tls_cluster.url, key_prefix=key_prefix, data_dir=tmp_path)
    with hang_report():
        async with opened_broker(settings, tls_cluster.url) as broker:
            slots = broker.core.slots
            assert slots is not None
            assert await broker.ready()
            masters = set(slots.masters())
            assert masters == set(tls_cluster.addresses)
            for address in masters:
                assert_tls(slots.client(address), tls_cluster.certificates.ca)
            # Sessions land on partitions spread over the masters: new ones until each master has run
            # the session and client scripts for one.
            served: set[str] = set()
            for _ in range(60):
                session_id = await make_session(broker)
                registered = await broker.clients.register(session_id, WEB, "web", 60, [HIGHLIGHT])
                assert registered.name == "web"
                assert await types(broker, session_id) == ["session_created", "client_registered"]
                home = slots.address(SlotMap.slot(broker.core.keys.session(session_id).meta))
                assert home is not None
                served.add(home)
                if served == masters:
                    break
            assert served == masters


SEED = "rediss://user:p%40ss@seed.example:7000/3?ssl_ca_certs=%2Fetc%2Fca.pem&ssl_cert_reqs=required"


async def test_node_url_keeps_the_seed_urls_scheme_credentials_and_options() -> None:
    assert node_url(SEED, "10.0.0.2", 7001) == (
        "rediss://user:p%40ss@10.0.0.2:7001/0?ssl_ca_certs=%2Fetc%2Fca.pem&ssl_cert_reqs=required"
    )
    assert node_url("rediss://:secret@[::1]:7000/2", "fe80::1", 7002) == "rediss://:secret@[fe80::1]:7002/0"
    assert node_url("redis://127.0.0.1:6379", "127.0.0.1", 7003) == "redis://127.0.0.1:7003/0"
    # What redis-py makes of a node's URL: TLS with the seed's options, the node's address, database 0.
    slots = SlotMap("test", 4, "rediss://:secret@[::1]:7000/2?ssl_ca_certs=%2Fetc%2Fca.pem&ssl_cert_reqs=required")
    try:
        for address, host in [("10.0.0.2:7001", "10.0.0.2"), ("fe80::1:7002", "fe80::1")]:
            client = slots.client(address)
            assert issubclass(client.connection_pool.connection_class, SSLConnection)
            options = client.connection_pool.connection_kwargs
            assert (options["host"], options["port"], options["db"]) == (host, int(address.rpartition(":")[2]), 0)
            assert (options["password"], options["ssl_ca_certs"], options["ssl_cert_reqs"]) == (
                "secret",
                "/etc/ca.pem",
                "required",
            )
    finally:
        await slots.aclose()
