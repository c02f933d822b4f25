"""The test and bench Cluster comes up even when a port it picked is taken before its node binds it (any
process's outgoing connection can take one: the ports come from the same range), and a cluster that
fails to come up leaves no node running."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from broker.errors import BrokerUnavailable
from broker.transport.embedded import EmbeddedCluster, free_cluster_port


def test_picked_ports_and_their_bus_ports_never_meet() -> None:
    taken = frozenset({30_000, 40_000})
    for _ in range(200):
        port = free_cluster_port(taken)
        assert not {port, port + 10_000} & taken


def test_a_port_taken_before_its_node_binds_it_is_picked_again(tmp_path: Path) -> None:
    cluster = EmbeddedCluster(tmp_path, masters=3)
    squatted = cluster.nodes[1].port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", squatted))
        squatter.listen()
        cluster.start()
        try:
            assert cluster.nodes[1].port != squatted
            assert "cluster_state:ok" in cluster.cli("cluster", "info", port=cluster.nodes[1].port)
        finally:
            cluster.stop()


def test_a_cluster_that_fails_to_start_stops_the_nodes_it_started(tmp_path: Path) -> None:
    cluster = EmbeddedCluster(tmp_path, masters=3)
    last = cluster.nodes[-1]
    # Not a port problem: the last node cannot start at all.
    last.data_dir.parent.mkdir(parents=True, exist_ok=True)
    last.data_dir.write_text("a file where its directory should be")
    with pytest.raises((BrokerUnavailable, OSError)):
        cluster.start()
    for node in cluster.nodes[:-1]:
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", node.port)) != 0
