"""What a launch's failure says: a worker that failed (its rank, exit code and error), one
stopped for --timeout, the rendezvous lost under this node's launcher, and a collective that
failed because a peer or its node went away; each one line for the command to print."""

from __future__ import annotations

import os
import re

from dpwise.launch import peers

TIMED_OUT_MARKS = ("timed out", "timing out")  # gloo's and NCCL's collective timeouts


class WorkerFailed(Exception):
    """A worker died; carries the worker's own error text (traceback where recorded)."""

    def __init__(self, rank: int, exitcode: int, message: str, details: str) -> None:
        super().__init__(f"worker rank {rank} failed (exit code {exitcode}): {message}")
        self.rank, self.exitcode, self.details = rank, exitcode, details


class PeerStopped(WorkerFailed):
    """A worker's process stayed stopped for --timeout seconds; dpwise killed it."""

    def __init__(self, stopped: peers.Stopped, timeout: float) -> None:
        Exception.__init__(
            self,
            f"worker rank {stopped.rank} (pid {stopped.pid}) hung: its process was stopped "
            f"(SIGSTOP, Ctrl-Z, a debugger) for {stopped.seconds:.0f} s while the other workers "
            f"waited for it (--timeout {timeout:g}); dpwise killed it and ended the run: find "
            "what stops it, or raise --timeout if such pauses are expected",
        )
        self.rank, self.exitcode, self.details = stopped.rank, 1, ""


class RendezvousLost(WorkerFailed):
    """This node's launcher lost the rendezvous (its c10d store), or the nodes never met there:
    torch raises from the launcher's own store calls, not from a worker. One line, exit 1."""

    def __init__(self, exc: BaseException, endpoint: str | None, waited: float,
                 timeout: float | None = None, started: bool = False) -> None:  # fmt: skip
        said = (
            _lost_while_running(exc, endpoint, timeout)
            if started
            else _rendezvous_lost(exc, endpoint, waited)
        )
        Exception.__init__(self, said)
        self.rank, self.exitcode, self.details = -1, 1, ""


def _lost_while_running(exc: BaseException, endpoint: str | None, timeout: float | None) -> str:
    """The store's node went away (killed, down, its network cut) after the workers started."""
    where = f"the rendezvous at {endpoint}" if endpoint else "the rendezvous"
    cause = first_line(str(exc.__cause__ or exc)).rstrip(".") or type(exc).__name__
    bound = (
        ""
        if timeout is None
        else f" (a silent connection is given up after --timeout {timeout:g} s)"
    )
    return (
        f"this node lost {where} while its workers ran ({cause}): the node that hosts it went "
        f"down, its dpwise ended, or the network to it was cut{bound}; this node's workers "
        "were stopped: check that node, then start the command again on every node"
    )


_UNREACHED_MARKS = ("trying to connect", "failed to connect")  # never met, not lost


def _rendezvous_lost(exc: BaseException, endpoint: str | None, waited: float) -> str:
    where = f"the rendezvous at {endpoint}" if endpoint else "the rendezvous"
    root = exc
    while root.__cause__ is not None:  # "See inner exception for details": the inner one
        root = root.__cause__
    said = ": ".join(filter(None, (type(root).__name__, first_line(str(root)))))
    kind = type(exc).__name__
    if kind == "RendezvousTimeoutError":
        return (
            f"the other nodes did not join {where} within {waited:g} s ({said}): start dpwise on "
            "every node of the job, and check that each reaches the endpoint"
        )
    if kind == "RendezvousClosedError":
        return f"{where} was closed ({said}): another node ended the job; check its log"
    if any(mark in said.lower() for mark in _UNREACHED_MARKS):
        return (
            f"this node could not reach {where} ({said}): the node that hosts its c10d store "
            "(the endpoint's host) did not start dpwise, died, or cannot be reached from here: "
            "start dpwise on every node of the job, and check that each reaches the endpoint"
        )
    return (
        f"this node lost {where} ({said}): the node that hosts its c10d store (the endpoint's "
        "host) died or left the network, and the job cannot go on without it: check that "
        "node's log"
    )


# A peer's process or node went away: its sockets closed under the collective, or the store
# a worker reads went with its node (the error file's message begins with the error's type).
LOST_MARKS = ("connection reset", "connection closed", "connection refused", "broken pipe",
               "socket closed")  # fmt: skip
NETWORK_ERRORS = ("DistNetworkError", "DistStoreError", "RendezvousConnectionError")


def first_line(text: str) -> str:
    """The error's first line, less gloo's source location and its boilerplate."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = re.sub(r"^\[[^\]]*\.(?:cc|cpp):\d+\]\s*", "", first)
    return first.split(". This is typically")[0][:160]


def lost_message(first: str, by: str) -> str:
    return (
        f"it lost its connection to the other workers ({first}); another worker died or its "
        f"node went down: check the other workers' logs ({by})"
    )


def lost_peers(exc: BaseException, rank: int, timeout: float, by: str) -> WorkerFailed | None:
    """A worker the scheduler started (no launcher of dpwise's watches it): its collective
    failed because a peer died, hung or lost its node. One line naming what happened (None:
    not a communication failure, which keeps its traceback)."""
    import torch.distributed as dist

    text = str(exc).strip()
    first = first_line(text) or type(exc).__name__
    lowered = text.lower()
    if any(mark in lowered for mark in TIMED_OUT_MARKS):
        message = (
            f"it waited longer than --timeout {timeout:g} s for the other workers in a "
            f"collective ({first}); another worker hung or its node stopped: check the other "
            f"tasks' logs ({by}), or raise --timeout"
        )
    elif isinstance(exc, dist.DistError) or any(mark in lowered for mark in LOST_MARKS):
        message = lost_message(first, by)
    else:
        return None
    return WorkerFailed(rank, 1, message, "")


def record_before_teardown(exc: BaseException) -> None:
    """A launched worker's error, in its error file before it lets go of the process group.

    Its peers fail as the group goes (a lost connection): recorded first, its error is on disk
    before theirs, and the launcher names it as the cause (elastic._root_failure), however fast
    the peers exit. torch's own record at the worker's end writes the same error again. Ctrl-C
    is not an error (the worker ends with its code); outside a launched worker, nothing."""
    if isinstance(exc, KeyboardInterrupt | SystemExit) or not os.environ.get(ERROR_FILE):
        return
    from torch.distributed.elastic.multiprocessing.errors import get_error_handler

    get_error_handler().record_exception(exc)


def seen_of_a_peer(message: str) -> bool:
    """Whether a worker's error is what a peer's failure looks like from here: a lost
    connection or a collective's timeout (not a cause of its own)."""
    lowered = message.lower()
    return message.startswith(NETWORK_ERRORS) or any(
        mark in lowered for mark in (*TIMED_OUT_MARKS, *LOST_MARKS)
    )


ERROR_FILE = "TORCHELASTIC_ERROR_FILE"  # where torch's launcher asks a worker for its error
# torch's launcher reports one failed worker: the first, in rank order, of those it finds ended
# when it looks (every elastic.MONITOR_S). A worker that failed because a peer ended (a signal
# leaves no error file) waits this long before it ends (elastic.run_guarded), so that the peer's
# end is the one found.
PEER_LOST_WAIT_S = 1.0
