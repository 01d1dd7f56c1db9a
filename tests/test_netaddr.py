"""Where a node stands relative to the rendezvous endpoint, from the routing table."""

import socket

import pytest

from dpwise.infra.hardware import Hardware
from dpwise.launch import netaddr
from dpwise.launch.elastic import launch_config
from dpwise.launch.env import DistEnv
from dpwise.train.config import TrainConfig
from dpwise.train.plan import resolve


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [("head:29400", ("head", 29400)), ("10.0.0.1:1", ("10.0.0.1", 1)),
     ("[fe80::1]:29500", ("fe80::1", 29500)), ("head", ("head", None))],
)  # fmt: skip
def test_split_endpoint(endpoint, expected):
    assert netaddr.split_endpoint(endpoint) == expected


def test_loopback_route_and_interface():
    assert netaddr.route_source("127.0.0.1") == "127.0.0.1"
    assert netaddr.interface_of("127.0.0.1") == "lo"
    assert netaddr.interface_of("192.0.2.77") is None  # TEST-NET-1: nobody's address


def test_a_loopback_endpoint_leaves_the_store_to_torch():
    net = netaddr.node_network("localhost:29400")
    assert net.is_host is None and net.address == "127.0.0.1"


def test_an_address_that_is_not_ours_is_a_store_client():
    assert netaddr.owns_free("192.0.2.77", 29400) is False


def test_our_address_with_its_port_taken_is_a_client():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        assert netaddr.owns_free("127.0.0.1", held.getsockname()[1]) is False
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    assert netaddr.owns_free("127.0.0.1", free) is True


def test_launch_config_passes_the_node_network_to_torch():
    cfg = TrainConfig(strategy="ddp", nproc=1, nnodes=2, rdzv_endpoint="10.9.8.7:29400")
    plan = resolve(cfg, Hardware(cuda_devices=0, cpu_cores=2), DistEnv())
    net = netaddr.NodeNetwork(address="10.9.8.6", interface="eth1", is_host=False)
    lc = launch_config(plan.launch_settings, net)
    assert lc.rdzv_configs["is_host"] is False and lc.local_addr == "10.9.8.6"
    undecided = launch_config(plan.launch_settings, netaddr.NodeNetwork("10.9.8.6", None, None))
    assert "is_host" not in undecided.rdzv_configs


def test_an_unresolvable_endpoint_changes_nothing():
    assert netaddr.node_network("no-such-host.invalid:29400") == netaddr.NodeNetwork(
        None, None, None
    )
