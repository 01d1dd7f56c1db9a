"""Hosts on one machine: network namespaces joined by veth pairs, shaped with tc.

    with NetPair(rate="200mbit") as net:
        a = net.popen("a", [sys.executable, "-m", "dpwise", ...])   # runs on host A (10.77.0.1)

    with NetHosts(4, rate="200mbit") as net:   # hosts a, b, c, d (10.77.0.1 to .4) on a bridge
        ...

A NetPair is two namespaces joined by one veth pair; NetHosts is n of them, each joined by a veth
pair of its own to a bridge that lives in one more namespace (the switch). Each net has names of
its own (``dpwt<tag>a``, ``b``, …) and the addresses it gives its hosts' veth ends (10.77.0.1,
.2, …, visible only inside its namespaces). Deleting a namespace deletes the veth ends and the
qdiscs in it (and a veth pair goes with either end), so leaving the ``with`` block (normally, on
an exception, on Ctrl-C) or the interpreter (``atexit``) removes everything; SIGTERM is turned
into SystemExit meanwhile so that happens on a kill too. ``sweep()`` removes nets an earlier,
SIGKILLed run left behind.

Shaping uses tc's ``tbf`` (bandwidth) on the egress of both ends of every veth pair; a delay needs
``netem``, which some kernels lack: ``NetPair.can_delay()`` says so, and a net asked for a delay
there raises Unavailable.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import string
import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

PREFIX = "dpwt"
_ETC_NETNS = Path("/etc/netns")  # a namespace's own /etc files (its hosts)
SUBNET = "10.77.0"
_live: set[str] = set()  # namespaces this process created and has not removed yet
_N = TypeVar("_N", bound="_Net")


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
    of the net ``tag`` (its .tag; other tests' nets may live meanwhile), or of every net."""
    mine = PREFIX + tag
    names = [line.split()[0] for line in _ip("netns", "list", check=False).stdout.splitlines()]
    links = _ip("-o", "link", "show", check=False).stdout
    found = [n for n in names if n.startswith(mine)]
    found += [part.split("@")[0].rstrip(":") for part in links.split() if part.startswith(mine)]
    return found


def tag_of(name: str) -> str:
    """The net's tag in one of its namespace or link names."""
    return name[len(PREFIX) : len(PREFIX) + 6]


def sweep(tag: str = "") -> list[str]:
    """Remove the namespaces of the net ``tag`` (or of every net) that a SIGKILLed run of this
    harness left; a live net of another test is left alone when a tag is given."""
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


class _Net:
    """What every net of this harness shares: one namespace per host (``a``, ``b``, …: address
    SUBNET.1, .2, …, interface ``dev[side]``), each host's egress shaped, processes started in
    them, and everything removed on leaving (see the module's docstring)."""

    def __init__(self, sides: str, rate: str | None, delay: str | None, named: bool) -> None:
        self.tag = uuid.uuid4().hex[:6]
        # named: each host runs with a host name of its own (a UTS namespace) and resolves the
        # others' by name (ip netns exec bind-mounts /etc/netns/<ns>/hosts over /etc/hosts)
        self.named = named
        self.sides = sides
        self.host = {side: f"{PREFIX}{self.tag}n{i}" for i, side in enumerate(sides, 1)}
        self.hostlist = f"{PREFIX}{self.tag}n[1-{len(sides)}]"  # the names in SLURM's syntax
        self.ns = {side: f"{PREFIX}{self.tag}{side}" for side in sides}
        self.dev = {side: f"{PREFIX}{self.tag}v{side}" for side in sides}  # ≤ 15 characters
        self.addr = {side: f"{SUBNET}.{i}" for i, side in enumerate(sides, 1)}
        self.rate, self.delay = rate, delay
        self._procs: list[subprocess.Popen[Any]] = []
        self._old_term: Any = None

    @property
    def namespaces(self) -> list[str]:
        """Every namespace this net makes (the hosts', and any other it needs)."""
        return list(self.ns.values())

    def __enter__(self: _N) -> _N:
        if self.delay and not NetPair.can_delay():
            raise Unavailable("an added delay needs tc's netem, which this kernel does not have")
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # a kill removes the net too
            self._old_term = signal.signal(signal.SIGTERM, _term_to_exit)
        try:
            for ns in self.namespaces:
                _ip("netns", "add", ns)
                _live.add(ns)
            self._create()
            if self.named:
                self._write_hosts()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _create(self) -> None:
        raise NotImplementedError

    def _attach(self, side: str) -> None:
        """Move the host's end ``dev[side]`` into its namespace, address it, bring it up and
        shape it."""
        ns, dev = self.ns[side], self.dev[side]
        _ip("link", "set", dev, "netns", ns)
        _ip("-n", ns, "addr", "add", f"{self.addr[side]}/24", "dev", dev)
        _ip("-n", ns, "link", "set", dev, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        self.shape(side)

    def _write_hosts(self) -> None:
        hosts = "127.0.0.1 localhost\n" + "".join(
            f"{self.addr[side]} {self.host[side]}\n" for side in self.sides
        )
        for ns in self.ns.values():
            folder = _ETC_NETNS / ns
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "hosts").write_text(hosts)

    def shape(self, side: str) -> None:
        """Put this net's rate (tbf) and delay (netem) on ``side``'s egress."""
        self._shape(self.ns[side], self.dev[side])

    def _shape(self, ns: str, dev: str) -> None:
        if self.delay:
            netem = ["netem", "delay", self.delay]
            if self.rate:
                netem += ["rate", self.rate]
            self._tc(ns, ["qdisc", "replace", "dev", dev, "root", *netem, "limit", "100000"])
        elif self.rate:
            self._tc(ns, ["qdisc", "replace", "dev", dev, "root", *tbf_args(self.rate)])

    @staticmethod
    def _tc(ns: str, args: list[str]) -> None:
        done = subprocess.run(["ip", "netns", "exec", ns, "tc", *args], capture_output=True,
                              text=True, timeout=60)  # fmt: skip
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
            for ns in self.namespaces:
                _delete(ns)
            if self._old_term is not None:
                signal.signal(signal.SIGTERM, self._old_term)


class NetPair(_Net):
    """Two namespaces ``a`` (SUBNET.1) and ``b`` (SUBNET.2) joined by a veth pair, each end's
    egress shaped."""

    def __init__(
        self, rate: str | None = None, delay: str | None = None, named: bool = False
    ) -> None:
        super().__init__("ab", rate, delay, named)

    @staticmethod
    def can_delay() -> bool:
        """Whether tc's netem (needed for an added delay) exists in this kernel."""
        with NetPair() as probe:
            qdisc = ["qdisc", "add", "dev", probe.dev["a"], "root", "netem", "delay", "1ms"]
            return probe.run("a", ["tc", *qdisc]).returncode == 0

    def _create(self) -> None:
        _ip("link", "add", self.dev["a"], "type", "veth", "peer", "name", self.dev["b"])
        for side in self.sides:
            self._attach(side)


class NetHosts(_Net):
    """``n`` namespaces ``a``, ``b``, … (SUBNET.1, .2, …) on one bridge, as hosts on one switch.

    The bridge lives in a namespace of its own (``switch``); each host joins it by a veth pair
    whose two ends are both shaped (the host's egress, and the bridge port's egress towards the
    host), so that each host's link to the switch has the rate in each direction.
    """

    def __init__(
        self, n: int = 4, rate: str | None = None, delay: str | None = None, named: bool = False
    ) -> None:
        if not 2 <= n <= 26:
            raise ValueError(f"NetHosts makes 2 to 26 hosts, not {n}")
        super().__init__(string.ascii_lowercase[:n], rate, delay, named)
        self.switch = f"{PREFIX}{self.tag}sw"
        self.bridge = f"{PREFIX}{self.tag}br"
        self.port = {side: f"{PREFIX}{self.tag}w{side}" for side in self.sides}  # bridge's ends

    @property
    def namespaces(self) -> list[str]:
        return [*self.ns.values(), self.switch]

    def _create(self) -> None:
        sw = self.switch
        _ip("-n", sw, "link", "add", self.bridge, "type", "bridge")
        _ip("-n", sw, "link", "set", self.bridge, "up")
        for side in self.sides:
            port = self.port[side]
            _ip("link", "add", self.dev[side], "type", "veth", "peer", "name", port)
            _ip("link", "set", port, "netns", sw)
            _ip("-n", sw, "link", "set", port, "master", self.bridge)
            _ip("-n", sw, "link", "set", port, "up")
            self._shape(sw, port)
            self._attach(side)


def _term_to_exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)
