"""The launcher's own connections while its workers run: c10d's rendezvous store, which one
node's launcher hosts and the other nodes' launchers reach over TCP.

torch bounds none of them: a store request to a node that went silent (switched off, its network
cut) waits until the kernel stops retransmitting, about 15 minutes (``tcp_retries2``), whatever
the store's own timeout says (a `get` times out, then waits without a limit for the cancel's
answer; a `compare_set` has no limit at all). The launcher asks the store every second, so a
launcher stuck there never sees that its workers ended, and prints nothing meanwhile.

So once the workers run, every TCP connection of this process gives up after --timeout seconds
without an acknowledgement from the other end (``TCP_USER_TIMEOUT``, set again every second for
the connections made since; accepted connections inherit it from the listening socket): the
request fails, the launcher ends, and dpwise says what was lost in one line. c10d's own warnings
about the failed requests (a C++ stack each) are not printed meanwhile; a user's own
``TORCH_CPP_LOG_LEVEL`` is kept. Nothing changes before the workers start: a node that waits for
the others still hears why it cannot reach them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

EVERY_S = 1.0  # how often the connections made since are bounded
_LEVEL_ENV = "TORCH_CPP_LOG_LEVEL"  # c10's log level, read once when torch is imported
_LEVEL_FLAG = "FLAGS_caffe2_log_level"  # c10's level itself: 0 info, 1 warning, 2 error
_ERROR = 2
_FDS = Path("/proc/self/fd")


def tcp_sockets() -> Iterator[socket.socket]:
    """This process's TCP sockets, each as a socket object over a duplicate of its descriptor
    (closed after use: the connection itself stays as it is). None without /proc."""
    try:
        names = os.listdir(_FDS)
    except OSError:
        return
    for name in names:
        try:
            if not os.readlink(_FDS / name).startswith("socket:"):
                continue
            sock = socket.socket(fileno=os.dup(int(name)))
        except (OSError, ValueError):
            continue  # closed meanwhile, or not a socket Python can wrap
        with sock:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
                yield sock


def bound(timeout_s: float) -> int:
    """Every TCP connection of this process gives up after ``timeout_s`` seconds with data
    unacknowledged; the number of sockets bounded (0 where the kernel has no such option)."""
    option = getattr(socket, "TCP_USER_TIMEOUT", None)
    if option is None:
        return 0
    done = 0
    for sock in tcp_sockets():
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, option, max(1, int(timeout_s * 1000)))
            done += 1
    return done


def _level_flag() -> ctypes.c_int32 | None:
    """c10's log level in the loaded library (None: torch not loaded, or built without it)."""
    torch = sys.modules.get("torch")
    file = getattr(torch, "__file__", None) if torch is not None else None
    if not file:
        return None
    folder = Path(file).parent / "lib"
    for name in ("libc10.so", "libc10.dylib"):
        with contextlib.suppress(OSError, ValueError):
            return ctypes.c_int32.in_dll(ctypes.CDLL(str(folder / name)), _LEVEL_FLAG)
    return None


class AgentLink:
    """For one launch: from the workers' start (``running``, called by the peer watch) to its
    end, this process's connections give up after ``timeout_s`` and c10d's warnings are quiet."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._next = 0.0
        self._flag: ctypes.c_int32 | None = None
        self._level: int | None = None  # the level before the workers ran, restored after

    def __enter__(self) -> AgentLink:
        return self

    def running(self, now: float) -> None:
        if now < self._next:
            return
        self._next = now + EVERY_S
        if self._level is None and _LEVEL_ENV not in os.environ:
            self._flag = _level_flag()
            if self._flag is not None:
                self._level = self._flag.value
                self._flag.value = max(self._level, _ERROR)
        bound(self.timeout_s)

    def __exit__(self, *exc: object) -> None:
        if self._flag is not None and self._level is not None:
            self._flag.value = self._level
        self._flag = self._level = None
