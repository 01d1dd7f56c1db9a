"""Two hosts with their own addresses (network namespaces joined by a veth pair): ddp across them
trains like one process, and the harness leaves nothing behind, whatever happens."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import netlab

REASON = netlab.unavailable_reason()
# Under CI the namespaces must work: a machine that cannot make them fails the suite.
needs_netns = pytest.mark.skipif(
    REASON is not None and os.environ.get("CI") != "true", reason=f"no namespaces: {REASON}"
)
PORT = 29400  # inside a fresh namespace every port is free
RUN_LIMIT_S = 180
STEPS = 10  # enough to prove two hosts train as one process; an epoch adds nothing to that


def _train_args(out: Path, endpoint: str, nnodes: int = 2) -> list[str]:
    return [
        sys.executable, "-m", "dpwise", "train", "--strategy", "ddp", "--nnodes", str(nnodes),
        "--nproc", "1", "--rdzv-endpoint", endpoint, "--threads", "1", "--epochs", "1",
        "--max-steps", str(STEPS), "--timeout", "60", "--out", str(out),
    ]  # fmt: skip


@needs_netns
def test_an_exception_inside_the_pair_removes_it():
    with pytest.raises(RuntimeError), netlab.NetPair(rate="50mbit") as net:
        assert net.run("a", ["ip", "-o", "addr"]).stdout.count(net.addr["a"]) == 1
        raise RuntimeError("a failing test")
    assert netlab.leftovers(net.tag) == []


_HOLDER = """
import signal, sys, time
# a shell that starts a job in the background ignores Ctrl-C in it, and the child inherits that
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {tests!r})
import netlab
with {make} as net:
    net.popen("b", ["sleep", "600"])  # a process still running inside is killed too
    print("ready", *net.namespaces, flush=True)
    time.sleep(600)
"""


PAIR = 'netlab.NetPair(rate="200mbit")'
FOUR = 'netlab.NetHosts(4, rate="200mbit")'  # four hosts and the switch: five namespaces


def _holder(make: str) -> subprocess.Popen[str]:
    code = _HOLDER.format(tests=str(Path(__file__).parent), make=make)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


@needs_netns
@pytest.mark.parametrize("make", [PAIR, FOUR], ids=["pair", "four"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_holder_removes_the_net(sig, make):
    holder = _holder(make)
    try:
        ready, *names = holder.stdout.readline().split()
        assert ready == "ready"
        tag = netlab.tag_of(names[0])
        assert len(netlab.leftovers(tag)) >= 2
        holder.send_signal(sig)
        holder.wait(timeout=60)
    finally:
        if holder.poll() is None:  # it did not exit: what it left must not fail the next test
            holder.kill()
            holder.wait()
            netlab.sweep(tag)
    assert holder.returncode != 0
    deadline = time.monotonic() + 10
    while netlab.leftovers(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert netlab.leftovers(tag) == []


@needs_netns
@pytest.mark.parametrize(("make", "made"), [(PAIR, 2), (FOUR, 5)], ids=["pair", "four"])
def test_sweep_removes_what_a_killed_holder_left(make, made):
    holder = _holder(make)
    try:
        ready, *left = holder.stdout.readline().split()
        assert ready == "ready" and len(left) == made
    finally:
        holder.kill()  # SIGKILL: no handler runs
        holder.wait(timeout=60)
    tag = netlab.tag_of(left[0])  # another test's pair may live meanwhile: only this one goes
    assert set(left) == set(netlab.sweep(tag))  # its namespaces
    assert netlab.leftovers(tag) == []


@needs_netns
def test_the_shaped_link_holds_its_rate():
    with netlab.NetPair(rate="50mbit") as net:
        qdisc = net.run("a", ["tc", "qdisc", "show", "dev", net.dev["a"]]).stdout
        assert "tbf" in qdisc and "50Mbit" in qdisc


@needs_netns
def test_four_hosts_reach_each_other_through_the_switch_each_link_shaped_both_ways():
    with netlab.NetHosts(4, rate="50mbit") as net:
        ports = netlab._ip("-n", net.switch, "-o", "link", "show", "master", net.bridge).stdout
        assert sorted(net.port.values()) == sorted(
            line.split()[1].split("@")[0] for line in ports.splitlines()
        )
        switch_qdiscs = netlab._ip("netns", "exec", net.switch, "tc", "qdisc", "show").stdout
        for side in net.sides:  # each host's egress, and the bridge port's towards the host
            own = net.run(side, ["tc", "qdisc", "show", "dev", net.dev[side]]).stdout
            assert "tbf" in own and "50Mbit" in own
            assert f"dev {net.port[side]} root" in switch_qdiscs
        assert switch_qdiscs.count("50Mbit") == 4
        listen = "import socket; s = socket.create_server(('', 9)); print(1, flush=True); "
        listen += "[s.accept() for _ in range(3)]"
        server = net.popen("a", [sys.executable, "-c", listen], stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "1"
        reach = "import socket, sys; socket.create_connection((sys.argv[1], 9), 5)"
        for side in "bcd":  # each other host reaches host a
            done = net.run(side, [sys.executable, "-c", reach, net.addr["a"]])
            assert done.returncode == 0, done.stderr
        server.wait(timeout=10)
    assert netlab.leftovers(net.tag) == []
