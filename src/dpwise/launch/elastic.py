"""Start DDP workers through torch.distributed's own elastic launcher (what torchrun runs)."""

from __future__ import annotations

import faulthandler
import logging
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from dpwise.errors import DpwiseError
from dpwise.infra import interrupts, scratch
from dpwise.launch import agentlink, forking, netaddr, peers
from dpwise.launch.failures import (
    LOST_MARKS,
    NETWORK_ERRORS,
    PEER_LOST_WAIT_S,
    TIMED_OUT_MARKS,
    RendezvousLost,
    first_line,
    lost_message,
    seen_of_a_peer,
)
from dpwise.launch.failures import PeerStopped as PeerStopped
from dpwise.launch.failures import WorkerFailed as WorkerFailed
from dpwise.launch.failures import lost_peers as lost_peers
from dpwise.launch.settings import LaunchSettings

_USAGE_PREFIX = "DpwiseError: "
MONITOR_S = 0.1  # how often the launcher looks at its workers
TEARDOWN_LIMIT_S = 120.0  # a healthy teardown takes well under a second
_WATCHDOG_DIR = "DPWISE_TEARDOWN_WATCHDOG_DIR"  # where launched workers write a stuck teardown
_TIMEOUT_MARK = "Timeout ("  # how faulthandler's timed dump begins
# The nodes of a job meet within --timeout, and never in less than torch's own wait for the
# store host (60 s): nodes that a scheduler starts a few seconds apart still meet.
MEETING_FLOOR_S = 60.0
# How long stopped workers get to exit after SIGTERM/SIGINT before SIGKILL (torch's default: 30 s).
SHUTDOWN_GRACE_S = 3
# torch's c10d rendezvous hands every restart of the workers the same agent-hosted TCPStore,
# keys of the dead attempt included (a gloo peer's address, an NCCL id), while the workers
# read those keys unprefixed: a restarted worker can connect to its dead peer's port
# ("Gloo connectFullMesh failed ... Connection refused"; pytorch#135712). torch's own
# opt-out makes worker rank 0 host a new store, on a new port, for every attempt.
_FRESH_STORE_PER_ATTEMPT = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
_GLOO_IFNAME = "GLOO_SOCKET_IFNAME"


def node_network(cfg: LaunchSettings) -> netaddr.NodeNetwork | None:
    """This node's address, interface and store role in a multi-node job (None: one node)."""
    endpoint = cfg.rdzv_endpoint
    return netaddr.node_network(endpoint) if endpoint else None


def meeting_s(cfg: LaunchSettings) -> int:
    """How long the nodes wait for each other to meet: --timeout, at least MEETING_FLOOR_S."""
    return int(max(cfg.timeout, MEETING_FLOOR_S))


def launch_config(cfg: LaunchSettings, net: netaddr.NodeNetwork | None = None) -> Any:
    from torch.distributed.launcher.api import LaunchConfig

    net = net if net is not None else node_network(cfg)
    meeting = meeting_s(cfg)
    rdzv_configs: dict[str, Any] = {}
    if cfg.rdzv_backend == "static":
        rdzv_configs.update(rank=cfg.node_rank, timeout=meeting)
    else:
        # the node that hosts the store waits join_timeout for the others, the others wait
        # read_timeout for its store: torch's 600 s and 60 s, here both --timeout
        rdzv_configs.update(join_timeout=meeting, read_timeout=meeting)
        if net is not None and net.is_host is not None:
            rdzv_configs["is_host"] = net.is_host  # see netaddr: the host name may say loopback
    return LaunchConfig(
        min_nodes=cfg.min_nodes or cfg.nnodes,
        max_nodes=cfg.nnodes,
        nproc_per_node=cfg.nproc_per_node,
        # Nodes of one job meet under one id; a single-node run gets a fresh one, as --standalone.
        run_id=cfg.rdzv_id if cfg.rdzv_endpoint else str(uuid.uuid4()),
        role="dpwise",
        rdzv_backend=cfg.rdzv_backend,
        rdzv_endpoint=cfg.rdzv_endpoint or "localhost:0",  # port 0: a free loopback port
        rdzv_configs=rdzv_configs,
        max_restarts=cfg.max_restarts,
        monitor_interval=MONITOR_S,
        start_method=forking.start_method(),
        # the address the workers are told to meet at (MASTER_ADDR): the host name's otherwise
        local_addr=net.address if net is not None else None,
    )


def launch(
    cfg: LaunchSettings,
    entrypoint: Any,
    *args: Any,
    net: netaddr.NodeNetwork | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[int, Any]:
    """Run ``entrypoint(*args)`` in every worker; return {global rank: return value}.

    The workers start from a fork server that has imported torch (dpwise.launch.forking), with
    this process's environment at launch time and ``env`` on top.

    The launch has a folder of its own, removed at the end whatever happens: the agent's logs
    and error files, torch's ``pytorch-errorfile-*`` files, the workers' pid files (for the
    peer watch) and their teardown dumps. A signal (Ctrl-C, SIGTERM) stops the workers and
    becomes ``Interrupted``; a worker stopped for --timeout seconds is killed and named.
    """
    from torch.distributed import DistError
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous import RendezvousError
    from torch.distributed.launcher.api import elastic_launch

    interrupts.check()
    _quiet_launcher()
    forking.ensure_running()  # before the launch folder: its socket outlives the folder
    timeout = cfg.timeout
    fresh_store = "1" if cfg.max_restarts > 0 else os.environ.get(_FRESH_STORE_PER_ATTEMPT)
    net = net if net is not None else node_network(cfg)  # the caller may have found it
    with (
        _environ(netaddr.NODE_ADDRESS_ENV, net.address if net else None),
        _environ(_GLOO_IFNAME, _gloo_interface(net)),
        _launch_folder() as folder,
        _environ(peers.LAUNCH_DIR_ENV, str(folder)),
        _environ(_WATCHDOG_DIR, str(folder)),
        _environ(_FRESH_STORE_PER_ATTEMPT, fresh_store),
        interrupts.handlers_kept(),
        agentlink.AgentLink(timeout) as link,  # the store's connections: bounded, quiet
        peers.PeerWatch(folder, timeout, running=link.running) as watch,  # takes the signals
        interrupts.children_held(),  # workers start with Ctrl-C held until run_guarded
    ):
        config = launch_config(cfg, net)  # inside the folder: the agent's log_dir is made here
        config.shutdown_timeout = SHUTDOWN_GRACE_S
        try:
            # a worker forked from the server takes this environment, as a spawned one would
            return elastic_launch(config, forking.AsParent(entrypoint, env))(*args)
        except SignalException as exc:
            raise interrupts.Interrupted(exc.sigval) from None
        except ChildFailedError as exc:
            raise _failure(exc, folder, watch.suspect(), timeout) from None
        except (RendezvousError, DistError) as exc:  # the agent's own store calls
            started = bool(peers.registered(folder))  # its workers ran: lost, not unmet
            raise RendezvousLost(exc, cfg.rdzv_endpoint, meeting_s(cfg), timeout, started
                                 ) from None  # fmt: skip


def _gloo_interface(net: netaddr.NodeNetwork | None) -> str | None:
    """The interface gloo binds to on a multi-node job: the one that reaches the endpoint
    (gloo takes the host name's address otherwise); a user's own choice stays."""
    if net is None or net.interface is None or os.environ.get(_GLOO_IFNAME):
        return None
    return net.interface


def _failure(exc: Any, folder: Path, stopped: peers.Stopped | None, timeout: float) -> Exception:
    """What the command reports when the agent says a worker failed: the root cause's rank."""
    if stopped is not None:
        return PeerStopped(stopped, timeout)
    rank, failure = _root_failure(exc)
    stuck = stuck_teardown(folder)
    if stuck is not None:
        return WorkerFailed(*stuck)
    message, details = _failure_text(failure.message)
    if message.startswith(_USAGE_PREFIX):
        return DpwiseError(message[len(_USAGE_PREFIX) :])
    if any(mark in message.lower() for mark in TIMED_OUT_MARKS):  # a fault: no traceback
        message = (
            f"it waited longer than --timeout {timeout:g} s for the other workers in a collective "
            f"({first_line(message)}); another worker hung, runs far slower or lost its "
            "connection: check the other workers (and nodes), or raise --timeout"
        )
        return WorkerFailed(rank, failure.exitcode, message, "")
    if any(mark in message.lower() for mark in LOST_MARKS) or message.startswith(NETWORK_ERRORS):
        return WorkerFailed(
            rank, failure.exitcode, lost_message(first_line(message), "all nodes"), ""
        )
    return WorkerFailed(rank, failure.exitcode, message, details)


def _root_failure(exc: Any) -> tuple[int, Any]:
    """The failed worker that caused the others to fail, and its failure.

    torch takes the earliest error file, but their times are whole seconds, and the launcher
    stops the workers still running at the first exit it sees: the worker that raised may still
    be letting go of its group when a peer that lost its connection to it has exited. So every
    error file of the attempt counts (a worker records its error before its teardown:
    failures.record_before_teardown), and among those of the earliest second and the next, a
    worker's own error comes before what its peers saw of it (a lost connection, a collective's
    timeout); then the time, then the rank.
    """
    failures = {**_recorded(getattr(exc, "failures", None) or {}), **exc.failures}
    first = min(failure.timestamp for failure in failures.values())

    def order(item: tuple[int, Any]) -> tuple[bool, bool, int, int]:
        rank, failure = item
        peer = seen_of_a_peer(_failure_text(failure.message)[0])
        return (failure.timestamp > first + 1, peer, failure.timestamp, rank)

    return min(failures.items(), key=order)


def _recorded(failures: Mapping[int, Any]) -> dict[int, Any]:
    """The error files of this node's other workers in the same attempt (torch's layout:
    ATTEMPT/LOCAL_RANK/error.json), as failures under their global ranks."""
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    known = [(rank, f) for rank, f in failures.items() if os.path.isfile(f.error_file)]
    if not known:
        return {}
    rank, failure = known[0]
    offset = rank - failure.local_rank  # this node's first global rank
    found = {}
    for path in Path(failure.error_file).parent.parent.glob("*/error.json"):
        if path.parent.name.isdigit():
            local = int(path.parent.name)
            try:
                found[offset + local] = ProcessFailure(local, 0, 1, str(path))
            except (OSError, ValueError, KeyError):  # being written as the launcher looks
                continue
    return found


@contextmanager
def _launch_folder() -> Iterator[Path]:
    """A temporary folder for one launch, also the temporary folder of this process meanwhile.

    torch's launcher puts its log folder (``torchelastic_*``) and its workers' error files
    (``pytorch-errorfile-*.pickle``) in the temporary folder and never removes them.
    """
    folder = scratch.make("launch")
    before = tempfile.tempdir
    tempfile.tempdir = str(folder)
    try:
        yield folder
    finally:
        tempfile.tempdir = before
        shutil.rmtree(folder, ignore_errors=True)


def _quiet_launcher() -> None:
    """The launcher's loggers set their own levels: dpwise reports failures and signals itself
    (no "death signal" warnings, no "Closing process" lines)."""
    import torch.distributed.launcher.api  # noqa: F401  (creates the agent's loggers)

    for name in ("torch.distributed.elastic", "torch.multiprocessing"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(("torch.distributed.elastic", "torch.multiprocessing")):
            logging.getLogger(name).setLevel(logging.CRITICAL)


@contextmanager
def _environ(name: str, value: str | None) -> Iterator[None]:
    """Set a variable the workers inherit, for the duration of one launch (None: leave it)."""
    before = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


# -- the teardown watchdog --------------------------------------------------------------------
_watchdog_file: IO[str] | None = None


def arm_teardown_watchdog(rank: int) -> None:
    """If this process has not disarmed within TEARDOWN_LIMIT_S, dump every stack and exit 1.

    Armed once the outputs are written, around the process group's teardown, so a teardown
    that hangs (the gloo/DDP destructor deadlock of pytorch#56297) is reported instead of
    hanging forever. faulthandler's timer is a C thread: it fires even while the main thread
    is stuck in a destructor holding the GIL, where no Python thread could run.
    """
    global _watchdog_file
    folder = os.environ.get(_WATCHDOG_DIR)
    target: IO[str] = _stderr()
    if folder and Path(folder).is_dir():
        _watchdog_file = open(Path(folder) / f"teardown.{rank}.txt", "w")  # noqa: SIM115
        target = _watchdog_file
    faulthandler.dump_traceback_later(TEARDOWN_LIMIT_S, exit=True, file=target)


def _stderr() -> IO[str]:
    """sys.stderr when it has a file descriptor (faulthandler needs one), else the process's."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__ or sys.stderr  # (None only in a process started without one)
    return sys.stderr


def disarm_teardown_watchdog() -> None:
    global _watchdog_file
    faulthandler.cancel_dump_traceback_later()
    if _watchdog_file is not None:
        _watchdog_file.close()
        _watchdog_file = None


def stuck_teardown(folder: Path) -> tuple[int, int, str, str] | None:
    """WorkerFailed's arguments when a worker's watchdog fired, else None."""
    for dump in sorted(folder.glob("teardown.*.txt")):
        text = dump.read_text(errors="replace")
        if _TIMEOUT_MARK in text:
            message = (
                f"teardown did not finish within {TEARDOWN_LIMIT_S:.0f} s after training "
                "finished and rank 0 wrote its outputs; the stuck worker's stacks are above"
            )
            return int(dump.stem.split(".")[1]), 1, message, text
    return None


def run_guarded(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a launched worker's function (registered for the peer watch); end it cleanly.

    A DpwiseError becomes one line for the parent (the launcher's error file, no traceback on
    the console) and exit code 2; the non-zero exit makes the launcher stop the other workers
    instead of leaving them waiting in a collective. Ctrl-C ends the worker with code 130, not
    torch's 0. SIGTERM keeps its default (the process ends at once, even inside a collective
    or a store wait, where no Python handler would run); the parent removes what it left.
    """
    try:
        interrupts.release()
        peers.register()
        return fn(*args)
    except DpwiseError as exc:
        from torch.distributed.elastic.multiprocessing.errors import get_error_handler

        get_error_handler().record_exception(exc)
        sys.stderr.flush()
        os._exit(2)
    except KeyboardInterrupt as exc:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(interrupts.exit_code(exc))
    except BaseException as exc:
        if seen_of_a_peer(f"{type(exc).__name__}: {exc}"):
            time.sleep(PEER_LOST_WAIT_S)  # the peer that ended is the one the launcher finds
        raise


def _failure_text(message: Any) -> tuple[str, str]:
    """(one-line message, traceback) from what the worker's error file recorded."""
    if isinstance(message, dict):
        extra = message.get("extraInfo") or {}
        return str(message.get("message", "")), str(extra.get("py_callstack", ""))
    if not message or "enable traceback" in str(message):
        return "it left no Python error (killed by a signal, os._exit or a native crash)", ""
    return str(message), ""
