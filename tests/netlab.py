"""Two hosts on one machine: two network namespaces joined by a veth pair, shaped with tc.

    with NetPair(rate="200mbit") as net:
        a = net.popen("a", [sys.executable, "-m", "dpwise", ...])   # runs on host A (10.77.0.1)

Each pair has names of its own (``dpwt<tag>a``/``b``) and the addresses it gives its veth ends
(10.77.0.1 and .2, visible only inside its namespaces). Deleting a namespace deletes its veth end
and its qdisc, so leaving the ``with`` block (normally, on an exception, on Ctrl-C) or the
interpreter (``atexit``) removes everything; SIGTERM is turned into SystemExit meanwhile so that
happens on a kill too. ``sweep()`` removes pairs an earlier, SIGKILLed run left behind.

Shaping uses tc's ``tbf`` (bandwidth); a delay needs ``netem``, which some kernels lack:
``NetPair.can_delay()`` says so, and a pair asked for a delay there raises Unavailable.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PREFIX = "dpwt"
_ETC_NETNS = Path("/etc/netns")  # a namespace's own /etc files (its hosts)
SUBNET = "10.77.0"
_live: set[str] = set()  # namespaces this process created and has not removed yet


class Unavailable(Exception):
    """Namespaces cannot be made here (not root, no `ip`, no veth): the reason."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def unavailable_reason() -> str | None:
    """Why two namespaces cannot be made on this machine, or None when they can."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "the `ip` and `tc` commands (iproute2) are not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    probe = f"{PREFIX}probe{os.getpid() % 10000}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _delete(ns: str) -> None:
    """Kill what still runs in ``ns`` and delete it (its veth end and qdisc go with it)."""
    pids = _ip("netns", "pids", ns, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    _ip("netns", "del", ns, check=False)
    shutil.rmtree(_ETC_NETNS / ns, ignore_errors=True)
    _live.discard(ns)


def _remove_live() -> None:
    for ns in sorted(_live):
        _delete(ns)


atexit.register(_remove_live)


def leftovers(tag: str = "") -> list[str]:
    """Namespaces and links of this harness that exist now (a test asserts none remain): those
    of the pair ``tag`` (NetPair.tag; other tests' pairs may live meanwhile), or of every pair."""
    mine = PREFIX + tag
    names = [line.split()[0] for line in _ip("netns", "list", check=False).stdout.splitlines()]
    links = _ip("-o", "link", "show", check=False).stdout
    found = [n for n in names if n.startswith(mine)]
    found += [part.split("@")[0].rstrip(":") for part in links.split() if part.startswith(mine)]
    return found


def tag_of(name: str) -> str:
    """The pair's tag in one of its namespace or link names."""
    return name[len(PREFIX) : len(PREFIX) + 6]


def sweep(tag: str = "") -> list[str]:
    """Remove the namespaces of the pair ``tag`` (or of every pair) that a SIGKILLed run of this
    harness left; a live pair of another test is left alone when a tag is given."""
    stale = [
        line.split()[0]
        for line in _ip("netns", "list", check=False).stdout.splitlines()
        if line.startswith(PREFIX + tag)
    ]
    for ns in stale:
        _delete(ns)
    return stale


def tbf_args(rate: str) -> list[str]:
    """tbf for ``rate`` (tc units: 50mbit, 1gbit): a bucket of 4 ms of traffic (at least 32 KiB,
    enough for the kernel's timer granularity), packets queued up to 100 ms."""
    bits = _rate_bits(rate)
    burst = max(32768, int(bits / 8 * 0.004))
    return ["tbf", "rate", rate, "burst", str(burst), "latency", "100ms"]


def _rate_bits(rate: str) -> float:
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1.0}
    for unit, scale in units.items():
        if rate.endswith(unit):
            return float(rate[: -len(unit)]) * scale
    raise ValueError(f"rate {rate!r}: give tc's units, e.g. 50mbit or 1gbit")


class NetPair:
    """Two namespaces ``a`` (SUBNET.1) and ``b`` (SUBNET.2) joined by a veth pair."""

    def __init__(
        self, rate: str | None = None, delay: str | None = None, named: bool = False
    ) -> None:
        self.tag = uuid.uuid4().hex[:6]
        # named: each side runs with a host name of its own (a UTS namespace) and resolves the
        # other's by name (ip netns exec bind-mounts /etc/netns/<ns>/hosts over /etc/hosts)
        self.named = named
        self.host = {"a": f"{PREFIX}{self.tag}n1", "b": f"{PREFIX}{self.tag}n2"}
        self.hostlist = f"{PREFIX}{self.tag}n[1-2]"  # the two names in SLURM's syntax
        self.ns = {side: f"{PREFIX}{self.tag}{side}" for side in "ab"}
        self.dev = {side: f"{PREFIX}{self.tag}v{side}" for side in "ab"}  # ≤ 15 characters
        self.addr = {"a": f"{SUBNET}.1", "b": f"{SUBNET}.2"}
        self.rate, self.delay = rate, delay
        self._procs: list[subprocess.Popen[Any]] = []
        self._old_term: Any = None

    @staticmethod
    def can_delay() -> bool:
        """Whether tc's netem (needed for an added delay) exists in this kernel."""
        with NetPair() as probe:
            qdisc = ["qdisc", "add", "dev", probe.dev["a"], "root", "netem", "delay", "1ms"]
            return probe.run("a", ["tc", *qdisc]).returncode == 0

    def __enter__(self) -> NetPair:
        if self.delay and not self.can_delay():
            raise Unavailable("an added delay needs tc's netem, which this kernel does not have")
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # a kill removes the pair too
            self._old_term = signal.signal(signal.SIGTERM, _term_to_exit)
        try:
            self._create()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _create(self) -> None:
        for side in "ab":
            _ip("netns", "add", self.ns[side])
            _live.add(self.ns[side])
        _ip("link", "add", self.dev["a"], "type", "veth", "peer", "name", self.dev["b"])
        for side in "ab":
            ns, dev = self.ns[side], self.dev[side]
            _ip("link", "set", dev, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{self.addr[side]}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            self.shape(side)
        if self.named:
            hosts = "127.0.0.1 localhost\n" + "".join(
                f"{self.addr[side]} {self.host[side]}\n" for side in "ab"
            )
            for side in "ab":
                folder = _ETC_NETNS / self.ns[side]
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "hosts").write_text(hosts)

    def shape(self, side: str) -> None:
        """Put this pair's rate (tbf) and delay (netem) on ``side``'s egress."""
        dev = self.dev[side]
        if self.delay:
            netem = ["netem", "delay", self.delay]
            if self.rate:
                netem += ["rate", self.rate]
            self._tc(side, ["qdisc", "replace", "dev", dev, "root", *netem, "limit", "100000"])
        elif self.rate:
            self._tc(side, ["qdisc", "replace", "dev", dev, "root", *tbf_args(self.rate)])

    def _tc(self, side: str, args: list[str]) -> None:
        done = self.run(side, ["tc", *args])
        if done.returncode != 0:
            raise Unavailable(f"tc {' '.join(args)}: {done.stderr.strip()}")

    def command(self, side: str, argv: Sequence[str]) -> list[str]:
        if self.named:  # its own host name, set inside a new UTS namespace
            named = 'hostname "$0" && exec "$@"'
            argv = ["unshare", "--uts", "sh", "-c", named, self.host[side], *argv]
        return ["ip", "netns", "exec", self.ns[side], *argv]

    def run(self, side: str, argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        kw.setdefault("timeout", 60)
        return subprocess.run(self.command(side, argv), capture_output=True, text=True, **kw)

    def popen(self, side: str, argv: Sequence[str], **kw: Any) -> subprocess.Popen[Any]:
        proc = subprocess.Popen(self.command(side, argv), **kw)
        self._procs.append(proc)
        return proc

    def __exit__(self, *exc: object) -> None:
        try:
            for proc in self._procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=10)
        finally:
            for ns in self.ns.values():
                _delete(ns)
            if self._old_term is not None:
                signal.signal(signal.SIGTERM, self._old_term)


def _term_to_exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)
