"""One `dpwise watch`: the user's job launched as its command line says (torchrun's processes on
dpwise's launcher, torch's elastic agent; a one-process script as one process), each rank with
its watcher (userscript.watcher), and a monitor in this process that reads the ranks' states,
prints their status lines, and names a hang when no rank moved on for --hang-after seconds.

The job's output, and its exit code, are its own. A hang is said once, written to the folder
(diagnosis.txt and .json), and with --on-hang stop the job is ended (exit code 1).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from dpwise.errors import DpwiseError
from dpwise.launch.elastic import launch
from dpwise.launch.failures import WorkerFailed
from dpwise.launch.settings import LaunchSettings
from dpwise.userscript import watcher
from dpwise.userscript.command import ScriptCommand
from dpwise.watch import folder, text
from dpwise.watch.match import Diagnosis, diagnose, straggler, stuck, unequal_batches
from dpwise.watch.state import RankState

POLL_S = 0.5  # how often the monitor reads the ranks' states
RECORDED = "64"  # the Flight Recorder's entries per process (TORCH_FR_BUFFER_SIZE) unless set
HUNG_EXIT = 1  # the exit code of a job dpwise ended after a hang
OWN_ENDS = ("exited", "returned")  # a rank's own end (userscript.watcher), not a fault
# The lint rules whose pitfalls make ranks part ways: named where they match a culprit's files.
HANG_RULES = ("collective-under-rank-guard", "missing-distributed-sampler")


@dataclass(frozen=True)
class Watch:
    command: ScriptCommand | None  # the user's job (None: dpwise's own train, ``own``)
    nproc: int
    out: Path
    hang_after: float
    on_hang: str  # "stop" | "keep"
    status_every: float  # seconds between status lines (0: none)
    spawns: bool = False  # the script starts its own processes: they are the ranks
    own: tuple[str, ...] = ()  # `dpwise train …`'s arguments after `dpwise`


class Monitor:
    """Reads the ranks' states every POLL_S seconds in a thread of its own."""

    def __init__(self, cfg: Watch, say: Callable[[str], None]) -> None:
        self.cfg, self.say = cfg, say
        self.history: dict[int, list[tuple[float, tuple[int, int, int]]]] = {}
        self.rows: dict[int, tuple[float, int]] = {}
        self.found: Diagnosis | None = None
        self.early: dict[str, Any] = {}  # what was said before a hang (folder.BEFORE)
        self.stopped = False
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dpwise-monitor", daemon=True)
        self._said = 0.0

    def __enter__(self) -> Monitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        start = time.monotonic()
        while not self._halt.wait(POLL_S):
            states = folder.states(self.cfg.out)
            now = time.monotonic()
            for s in states:
                self.history.setdefault(s.rank, []).append((now, s.progress))
                del self.history[s.rank][:-400]
            self._before(states)
            if self.cfg.status_every and now - self._said >= self.cfg.status_every:
                self._said = now
                for s in states:
                    self.say(text.status(s, self._rate(s)))
            if len(states) < max(self.cfg.nproc, 2) or now - start < self.cfg.hang_after:
                continue  # one rank alone waits for no other: a long phase is not a hang
            if self.found is None and stuck(self.history, now, self.cfg.hang_after):
                self._hung(states)
            elif self.found is not None and not stuck(self.history, now, self.cfg.hang_after):
                self.found = None  # it moved on (--on-hang keep): a later hang is said again

    def _before(self, states: list[RankState]) -> None:
        """What shows before a hang, said once each: unequal batch counts at the ranks' first
        pass over a loader, and a straggler."""
        if "unequal" not in self.early:
            found = unequal_batches(states, max(self.cfg.nproc, len(states)))
            if found is not None:
                self._early("unequal", text.unequal(found), asdict(found))
        if "straggler" not in self.early:
            slow = straggler(states)
            if slow is not None:
                self._early("straggler", text.straggler(slow), asdict(slow))

    def _early(self, what: str, said: str, doc: dict[str, Any]) -> None:
        self.early[what] = doc
        folder.write_before(self.cfg.out, self.early)
        self.say(said)

    def _rate(self, s: RankState) -> float | None:
        before = self.rows.get(s.rank)
        self.rows[s.rank] = (s.time, s.rows)
        if before is None or s.time <= before[0]:
            return None
        return (s.rows - before[1]) / (s.time - before[0])

    def _hung(self, states: list[RankState]) -> None:
        found = with_rules(diagnose(states))
        self.found = found
        said = text.diagnosis(found, self.cfg.hang_after)
        folder.write_diagnosis(self.cfg.out, text.to_json(found, self.cfg.hang_after), said)
        self.say(said)
        if self.cfg.on_hang == "stop":
            self.stopped = True
            self.say("dpwise watch: ending the job (--on-hang stop)")
            for s in states:
                _kill(s.pid)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # it ended meanwhile
        os.kill(pid, signal.SIGKILL)


def with_rules(d: Diagnosis) -> Diagnosis:
    """The diagnosis with lint's findings of HANG_RULES in the user's files where the ranks
    are (the culprits' first)."""
    from dpwise.lint.checker import lint_paths

    ordered = sorted(d.places, key=lambda p: p.rank not in d.culprits)
    files = list(dict.fromkeys(
        p.line.file for p in ordered if p.line is not None and p.line.theirs
        and os.path.isfile(p.line.file)))  # fmt: skip
    if not files:
        return d
    found = lint_paths(files, select=HANG_RULES)
    rules = tuple(
        f"{f.name} at {os.path.basename(f.path)} line {f.line}: {f.message}"
        for f in found
        if f.name in HANG_RULES
    )
    return replace(d, rules=rules)


def run(cfg: Watch, say: Callable[[str], None]) -> int:
    """Launch the job with its watchers and watch it; its exit code (HUNG_EXIT when dpwise ended
    it after a hang)."""
    try:
        cfg.out.mkdir(parents=True, exist_ok=True)
        folder.clear(cfg.out)
    except OSError as exc:
        raise DpwiseError(
            f"--out {cfg.out}: cannot write the ranks' states there ({exc.strerror or exc}): give "
            "a folder you can write"
        ) from None
    env = {
        watcher.FOLDER: str(cfg.out.resolve()),
        "TORCH_FR_BUFFER_SIZE": os.environ.get("TORCH_FR_BUFFER_SIZE", RECORDED),
    }
    if cfg.command is None:
        return _own(cfg, env, say)
    env.update({
        watcher.CWD: str(cfg.command.cwd or Path.cwd()),
        **cfg.command.env,  # `A=1 torchrun …`: the variables the user set before the command
        **({watcher.SPAWNS: "1"} if cfg.spawns else {}),
    })  # fmt: skip
    settings = LaunchSettings(nproc_per_node=cfg.nproc)
    args = [str(cfg.command.script), *cfg.command.args]
    with Monitor(cfg, say) as monitor:
        try:
            launch(settings, watcher.worker, args, env=env)
            return 0
        except WorkerFailed as failed:
            if monitor.stopped:
                return HUNG_EXIT
            _ended(cfg, failed, say)
            return failed.exitcode if failed.exitcode > 0 else 1


def _own(cfg: Watch, env: dict[str, str], say: Callable[[str], None]) -> int:
    """dpwise's own train, as its own command (its launcher, its timeout, its lines); each of
    its workers writes its state (measure.rankwatch)."""
    import subprocess
    import sys

    with Monitor(cfg, say) as monitor:
        proc = subprocess.Popen([sys.executable, "-m", "dpwise", *cfg.own],
                                env={**os.environ, **env})  # fmt: skip
        try:
            code = proc.wait()
        except BaseException:
            proc.terminate()
            proc.wait()
            raise
    return HUNG_EXIT if monitor.stopped else code


def _ended(cfg: Watch, failed: WorkerFailed, say: Callable[[str], None]) -> None:
    """A rank ended the job: where every rank was when it did, from their last states, unless
    every rank ended by its own exit (a job that returned its code is not a fault)."""
    how = f"ended with exit code {failed.exitcode}" if failed.exitcode >= 0 else (
        f"was killed by signal {-failed.exitcode}")  # fmt: skip
    ended = {failed.rank: how}
    folder.write_ended(cfg.out, ended)
    states = folder.states(cfg.out)
    if len(states) < 2 or all((s.ended or "").startswith(OWN_ENDS) for s in states):
        return
    found = with_rules(diagnose(states, ended))
    said = text.diagnosis(found, 0)
    folder.write_diagnosis(cfg.out, text.to_json(found, 0), said)
    say(said)
