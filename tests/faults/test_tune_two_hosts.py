"""`dpwise tune` on two hosts (network namespaces joined by a veth pair, tests/netlab.py), one
worker each, with a real fault once round 1 is in the journal: node rank 1's dpwise killed with
kill -9, node rank 0's (which hosts the rendezvous store and writes --out) killed, or the link
between them cut. Every node left ends within --timeout in one line (node rank 0 adds the line
saying what was kept), no traceback; what was measured stays in node rank 0's --out, and
`--resume` on both nodes continues the search to its end (after a kill: the link cut leaves what
node rank 1 killed leaves)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import netlab
from conftest import child_env

REASON = netlab.unavailable_reason()
# Under CI the namespaces must work: a machine that cannot make them fails the suite.
needs_netns = pytest.mark.skipif(
    REASON is not None and os.environ.get("CI") != "true", reason=f"no namespaces: {REASON}"
)
PORT = 29400  # inside a fresh namespace every port is free
TIMEOUT = 6  # --timeout: how long a node waits for a silent peer
SLACK = 20  # seconds past --timeout a node may take to stop its workers and write what it keeps
START_LIMIT_S = 180  # both nodes started, calibrated and through round 1, on a busy machine
TINY = ["--strategy", "ddp", "--nproc", "1", "--nnodes", "2", "--threads", "1",
        "--model", "userpkg:tiny_model", "--data", "userpkg:tiny_data", "--batch-size", "8",
        "--knobs", "gradient_as_bucket_view", "--budget", "90",
        "--timeout", str(TIMEOUT)]  # fmt: skip


class Node:
    """`dpwise tune` on one host; its stderr lines with the time each arrived."""

    def __init__(self, net: netlab.NetPair, side: str, out: Path, *more: str) -> None:
        endpoint = f"{net.addr['a']}:{PORT}"  # host a hosts the store and sorts first: rank 0
        args = [sys.executable, "-m", "dpwise", "tune", *TINY, "--rdzv-endpoint", endpoint,
                "--out", str(out), *more]  # fmt: skip
        self.proc = net.popen(side, args, env=child_env(), text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)  # fmt: skip
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def finish(self, timeout: float) -> tuple[int, float]:
        """Its exit code and when it ended (it is killed past ``timeout``)."""
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        ended = time.monotonic()
        self._reader.join(10)
        return self.proc.returncode, ended

    def said_since(self, moment: float) -> list[str]:
        return [line for at, line in self.lines if at >= moment]

    def said(self) -> str:
        return "\n".join(line for _, line in self.lines)


def _journal(out: Path) -> dict:
    try:
        return json.loads((out / ".search" / "journal.json").read_text())
    except (OSError, ValueError):
        return {}


def _mid_search(nodes: dict[str, Node], out: Path) -> None:
    """Until round 1 is in rank 0's journal and a later training is under way."""
    deadline = time.monotonic() + START_LIMIT_S
    while True:
        j = _journal(out)
        if j.get("rounds", 0) >= 1 and j.get("in_flight"):
            return
        for side, node in nodes.items():
            assert node.proc.poll() is None, f"host {side} ended early:\n{node.said()}"
        assert time.monotonic() < deadline, f"no round 1 within {START_LIMIT_S} s"
        time.sleep(0.02)


def _fault(net: netlab.NetPair, nodes: dict[str, Node], fault: str) -> list[str]:
    """Make the fault; the hosts whose dpwise is still running."""
    if fault == "link cut":
        netlab._ip("-n", net.ns["b"], "link", "set", net.dev["b"], "down")
        return ["a", "b"]
    victim = "b" if fault == "node rank 1 killed" else "a"
    os.kill(nodes[victim].proc.pid, signal.SIGKILL)  # ip netns exec execs dpwise itself
    return [side for side in "ab" if side != victim]


@dataclass
class Ended:
    """How one node's dpwise ended after the fault."""

    code: int
    seconds: float  # after the fault
    after: list[str]  # its stderr lines since the fault
    said: str  # all of its stderr


@dataclass
class Stopped:
    """A two-host search stopped by ``fault``: each node left's end, the nodes' --out; the hosts
    (their namespaces) are up until the resume test of the same fault has run."""

    fault: str
    net: netlab.NetPair
    out: dict[str, Path]
    ended: dict[str, Ended]


FAULTS = ["node rank 1 killed", "node rank 0 killed", "link cut"]
# the link cut leaves what "node rank 1 killed" leaves, whose resume proves it: node rank 0
# alive wrote the failed results.json, node b holds the journal its session wrote as it began
# (after the cut, also `stopped`, which a resume sets anew); a third resume from that state
# would prove nothing more
RESUMED = ["node rank 1 killed", "node rank 0 killed"]


@pytest.fixture(scope="module")
def stopped(request, tmp_path_factory) -> Iterator[Stopped]:
    """The search on two hosts, stopped by the fault ``request.param`` once round 1 is in the
    journal (one search for the fault's test and its resume's: each test pays its half)."""
    assert REASON is None, REASON
    root = tmp_path_factory.mktemp("two-hosts")
    out = {side: root / side for side in "ab"}
    with netlab.NetPair() as net:
        nodes = {side: Node(net, side, out[side]) for side in "ab"}
        _mid_search(nodes, out["a"])
        at = time.monotonic()
        ended = {}
        for side in _fault(net, nodes, request.param):
            code, when = nodes[side].finish(timeout=TIMEOUT + 120)
            ended[side] = Ended(code, when - at, nodes[side].said_since(at), nodes[side].said())
        for node in nodes.values():
            node.finish(timeout=30)
        yield Stopped(request.param, net, out, ended)
    assert netlab.leftovers(net.tag) == []


def _ended_in_one_line(side: str, end: Ended) -> None:
    assert end.seconds <= TIMEOUT + SLACK, f"host {side} ended {end.seconds:.0f} s after the fault"
    assert end.code == 1, end.said
    assert end.after and end.after[-1].startswith("dpwise: "), end.said
    assert not any("Traceback" in line or "frame #" in line for line in end.after), end.said
    if side == "b":  # node rank 1 says only what ended it
        assert len(end.after) == 1, end.said
    else:  # node rank 0 also says what it kept and how to continue
        assert len(end.after) == 2 and end.after[0].startswith("tune: stopped after "), end.said
        assert "--resume` continues" in end.after[0]


@needs_netns
@pytest.mark.slow
@pytest.mark.parametrize("stopped", FAULTS, indirect=True)
def test_a_lost_node_ends_the_search_in_one_line_keeping_what_was_measured(stopped):
    """Every node left ends within --timeout in one line (node rank 0 adds what it kept), no
    traceback; what was measured stays in node rank 0's --out."""
    for side, end in stopped.ended.items():
        _ended_in_one_line(side, end)
    out = stopped.out
    kept = _journal(out["a"])
    assert kept["rounds"] >= 1 and (out["a"] / ".search" / "default.pt").is_file()
    if stopped.fault != "node rank 0 killed":  # it lived to write the report of what was measured
        doc = json.loads((out["a"] / "results.json").read_text())
        assert doc["stopped"] == "failed" and doc["rounds"] == kept["rounds"]
        assert (out["a"] / "report.html").is_file()
    assert (out["b"] / ".search" / "journal.json").is_file()  # --resume on node b needs it


@needs_netns
@pytest.mark.slow
@pytest.mark.parametrize("stopped", RESUMED, indirect=True)
def test_resume_on_both_hosts_finishes_the_search_a_lost_node_stopped(stopped):
    """(After the fault's own test, on the same hosts and folders.)"""
    net, out = stopped.net, stopped.out
    kept = _journal(out["a"])
    netlab._ip("-n", net.ns["b"], "link", "set", net.dev["b"], "up")
    again = {side: Node(net, side, out[side], "--resume") for side in "ab"}
    for side, node in again.items():
        code, _ = node.finish(timeout=START_LIMIT_S)
        assert code == 0, f"host {side}:\n{node.said()}"
    doc = json.loads((out["a"] / "results.json").read_text())
    assert doc["stopped"] == "finished" and doc["rounds"] > kept["rounds"]
    assert doc["timing"]["sessions"] == 2


def test_the_launchers_connections_give_up_on_a_silent_peer_after_the_timeout():
    import socket

    from dpwise.launch import agentlink

    with (
        socket.create_server(("127.0.0.1", 0)) as server,
        socket.create_connection(server.getsockname()) as client,
    ):
        accepted, _ = server.accept()
        with accepted:
            assert agentlink.bound(7.5) >= 3  # the listener, the client, the accepted one
            for sock in (server, client, accepted):
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 7500


def test_c10ds_warnings_are_quiet_only_while_the_workers_run(monkeypatch):
    import torch  # noqa: F401  (the level lives in its library)

    from dpwise.launch import agentlink

    monkeypatch.delenv("TORCH_CPP_LOG_LEVEL", raising=False)
    flag = agentlink._level_flag()
    assert flag is not None
    before = flag.value
    with agentlink.AgentLink(5) as link:
        assert flag.value == before  # a node waiting for the others still hears why
        link.running(time.monotonic())
        assert flag.value == max(before, 2)
    assert flag.value == before
    monkeypatch.setenv("TORCH_CPP_LOG_LEVEL", "INFO")  # a user's own level is kept
    with agentlink.AgentLink(5) as link:
        link.running(time.monotonic())
        assert flag.value == before


def test_a_lost_rendezvous_is_one_line_naming_the_endpoint():
    from torch.distributed.elastic.rendezvous import RendezvousConnectionError

    from dpwise.launch.elastic import RendezvousLost, WorkerFailed

    try:
        try:
            raise RuntimeError("Connection timed out\nException raised from recvBytes at x.hpp:1")
        except RuntimeError as inner:
            raise RendezvousConnectionError(
                "The connection to the C10d store has failed"
            ) from inner
    except RendezvousConnectionError as exc:
        lost = RendezvousLost(exc, "10.0.0.1:29400", 60, 20, started=True)
        never = RendezvousLost(exc, "10.0.0.1:29400", 60, 20, started=False)
    assert isinstance(lost, WorkerFailed) and lost.details == ""  # the cli prints no traceback
    for error in (lost, never):
        said = str(error)
        assert len(said.splitlines()) == 1
        assert "10.0.0.1:29400" in said and "Connection timed out)" in said
    assert "while its workers ran" in str(lost) and "--timeout 20 s" in str(lost)
    assert "while its workers ran" not in str(never)
