"""A dpwise command running in the background, for tests that send it real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from conftest import child_env, descendants

LEFT_BY_TORCH = "torchinductor_"  # torch's per-user compile cache: any torch program makes it
TAG = "DPWISE_TEST_RUN"


class LiveRun:
    """``python -m dpwise ARGS`` in a session of its own (so a test can signal its group), with
    TMPDIR pointing at ``tmp`` (where its launches keep their folders, and must leave nothing)."""

    def __init__(self, tmp: Path, *args: str) -> None:
        self.tmp = tmp
        self.tag = uuid.uuid4().hex  # in the environment of every process the command starts
        tmp.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dpwise", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env({"TMPDIR": str(tmp), TAG: self.tag}),
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.stderr = ""
        # One reader per pipe, for the whole run: nothing else reads them (a `communicate()` in
        # `finish` would race the stdout reader for the same file and close it under it).
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._err_reader = threading.Thread(target=self._read_err, daemon=True)
        self._err_reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def _read_err(self) -> None:
        self.stderr = self.proc.stderr.read()

    def _stderr_after_exit(self) -> str:
        self._err_reader.join(timeout=10)
        return self.stderr

    def wait_for(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert self.proc.poll() is None, f"ended before {what}: {self._stderr_after_exit()}"
            assert time.monotonic() < deadline, f"no {what} within {timeout} s"
            time.sleep(0.1)

    def wait_for_line(self, prefix: str, timeout: float = 180) -> None:
        self.wait_for(lambda: any(x.startswith(prefix) for x in self.lines), timeout, prefix)

    def worker_pids(self) -> dict[int, int]:
        """{rank: pid} from the pid files of the command's launch folder (present while it runs)."""
        found = {}
        for path in self.tmp.glob("dpwise-launch-*/worker.*.pid"):
            text = path.read_text()
            if text:
                found[int(path.name.split(".")[1])] = int(text)
        return found

    def finish(self, timeout: float) -> int:
        """Wait for the command to end; then none of its processes may be left (counted by the
        tag, before the test's own clean-up kills the group)."""
        try:
            self.proc.wait(timeout=timeout)
            assert self.outlived() == [], "processes of the command outlived it"
        finally:
            self.kill()
        self._reader.join(timeout=10)
        self._stderr_after_exit()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()

    def tagged(self) -> list[int]:
        """Every live process that carries this run's tag: the command and what it started."""
        return tagged(self.tag)

    def outlived(self, grace: float = 15.0) -> list[int]:
        """The command's processes still alive ``grace`` seconds after it ended."""
        deadline = time.monotonic() + grace
        while self.tagged() and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.tagged()

    def temp_left(self) -> list[str]:
        return sorted(p.name for p in self.tmp.iterdir() if not p.name.startswith(LEFT_BY_TORCH))


def ctrl_c_ends_it_all(run: LiveRun) -> None:
    """Ctrl-C to the running command's group (what a terminal sends): it ends with code 130 and
    one line, and every process it had started is gone, with its launches' folders."""
    started = descendants(run.proc.pid)
    try:
        os.killpg(run.proc.pid, signal.SIGINT)
        assert run.finish(timeout=60) == 130
    finally:
        run.kill()
    assert run.stderr.strip().splitlines() == ["dpwise: interrupted"]
    assert survivors(started) == []
    assert run.temp_left() == []


def alive(pid: int) -> bool:
    """Running, sleeping or stopped; a zombie (dead, not yet reaped) is not alive."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def survivors(pids, grace: float = 10.0) -> list[int]:
    """The pids still alive after ``grace`` seconds."""
    deadline = time.monotonic() + grace
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def tagged(tag: str) -> list[int]:
    """Live processes whose environment holds ``TAG=tag`` (a forked process keeps the block of
    the program it was forked from)."""
    needle = f"{TAG}={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and alive(int(entry)):
            try:
                with open(f"/proc/{entry}/environ", "rb") as fh:
                    if needle in fh.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                continue
    return found


def children(parent: int) -> list[int]:
    """The live children of ``parent``, oldest first."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == parent and fields[0] not in ("Z", "X"):
            found.append((int(fields[19]), int(entry)))  # field 22: the start time
    return [pid for _, pid in sorted(found)]
