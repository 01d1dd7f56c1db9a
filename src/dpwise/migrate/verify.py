"""`dpwise migrate --verify`: the original and the migrated script trained for a few steps under
torchrun (2 processes, gloo on the CPU) through `dpwise.userscript.harness`, and their final
parameters compared; with what in the model makes them differ by design (BatchNorm, random
layers), as the migrated run's rank 0 found it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from dpwise.diagnosis.layers import Layer
from dpwise.errors import DpwiseError
from dpwise.infra import scratch
from dpwise.launch.elastic import PeerStopped, WorkerFailed, launch
from dpwise.launch.settings import LaunchSettings
from dpwise.userscript.harness import ENDED, LIMIT_MARK, LOG, MARK, worker

if TYPE_CHECKING:
    from dpwise.userscript.causes import Causes, FoundBy

TOLERANCE = 1e-5


@dataclass(frozen=True)
class Verdict:
    steps: int
    nproc: int
    max_abs_diff: float  # between the two runs' final parameters
    moved: float  # the largest change of a parameter in the original run: training happened
    # what in the model makes the runs differ by design (found in the migrated run, rank 0)
    batchnorm: tuple[Layer, ...] = ()
    stochastic: tuple[Layer, ...] = ()
    found_by: FoundBy = "running"  # how the random layers were found

    @property
    def same(self) -> bool:
        return self.max_abs_diff <= TOLERANCE

    @property
    def explained(self) -> bool:
        """A difference has a named cause that is no migration error."""
        return bool(self.batchnorm or self.stochastic)


def _layers(causes: Causes | None, key: Literal["batchnorm", "stochastic"]) -> tuple[Layer, ...]:
    if causes is None:
        return ()
    return tuple(Layer(d["name"], d["kind"]) for d in causes.get(key, []))


def _launch(
    script: Path, args: list[str], home: Path, out: Path, steps: int, nproc: int, timeout: float
) -> None:
    """One launch of `script` on ``nproc`` workers through dpwise's launcher (torch's elastic
    agent, as torchrun runs it), in the folder of `out` (so that what the script writes stays
    out of the user's folder), importing its siblings from `home`."""
    env = {
        "CUDA_VISIBLE_DEVICES": "",  # the CPU and gloo, whatever GPUs this machine has
        "DPWISE_SCRIPT_AS": str(home / script.name),
        "DPWISE_SCRIPT_STEPS": str(steps),
        "DPWISE_SCRIPT_OUT": str(out),
        "DPWISE_SCRIPT_PATH": str(home),
    }
    if nproc > 1 and "OMP_NUM_THREADS" not in os.environ:
        env["OMP_NUM_THREADS"] = "1"  # what torchrun gives each of several workers
    settings = LaunchSettings(nproc_per_node=nproc, timeout=timeout)
    try:
        launch(settings, worker, [str(script), *args], timeout, env=env)
    except PeerStopped:
        raise _Failed(_late(timeout)) from None
    except WorkerFailed as failed:
        raise _Failed(_why(out.parent, steps, timeout, failed)) from None
    if not out.exists():
        raise _Failed(_why(out.parent, steps, timeout, None))


def _late(timeout: float) -> str:
    return (
        f"did not end within {timeout:.0f} s under torchrun: a worker stopped, hung or waits for "
        "input; run it by hand to see why"
    )


def _why(folder: Path, steps: int, timeout: float, failed: WorkerFailed | None) -> str:
    """Why a launch ended without its parameters: what the harness wrote when the script ended
    too early, the time limit, else the error the first failed worker raised (its traceback, as
    the launcher recorded it), else the last lines the workers printed."""
    ended = sorted(folder.glob(f"{ENDED}*"))
    if ended:
        why = ended[0].read_text(encoding="utf-8")
        rank = ended[0].name[len(ENDED) :]
        last = _last_words(folder / f"{LOG}{rank}.log")
        said = f" (its last line: {last})" if last and why.startswith("it exited") else ""
        return f"did not reach {steps} steps under torchrun: {why}{said}"
    logs = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(folder.glob(f"{LOG}*"))]
    if any(LIMIT_MARK in text for text in logs):
        return _late(timeout)
    if failed is not None and failed.details:
        return _cause(failed.details, steps)
    words = [w for w in (_last_words(p) for p in sorted(folder.glob(f"{LOG}*"))) if w]
    if failed is not None and words:  # os._exit, a signal: no Python error, but its own words
        return (
            f"failed under torchrun (worker rank {failed.rank} exited with code "
            f"{failed.exitcode}; its last line: {words[0]}); run it by hand to see why"
        )
    return _cause("\n".join(logs) + (f"\n{failed}" if failed else ""), steps)


def _last_words(log: Path) -> str:
    """The last line a worker printed that says something (no banner of asterisks or equals
    signs, no launcher log line), shortened."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if _says_something(line)]
    return lines[-1][:200] if lines else ""


def _says_something(line: str) -> bool:
    bare = line.strip()
    return bool(bare.strip("=*-_#~ ")) and not bare.startswith("torch.distributed.elastic")


class _Failed(Exception):
    """A run that crashed or ended before its steps: what its output says, in one line."""


def _cause(stderr: str, steps: int) -> str:
    """The harness's own line when the script ended too early, else the exception line of a
    worker's traceback, else the last line that says something."""
    lines = [line.strip() for line in stderr.splitlines() if _says_something(line)]
    short = [part.strip() for line in lines if MARK in line for part in line.split(MARK)[1:]]
    if short:
        return f"did not reach {steps} steps under torchrun: {short[-1]}"
    errors = [line for line in lines if re.match(r"^[\w.]*(Error|Exception|Exit)\b", line)]
    why = (errors or lines or ["no output"])[-1]
    return f"failed under torchrun ({why}); run it by hand to see why"


def verify(
    original: Path,
    migrated_code: str,
    args: list[str] | None = None,
    steps: int = 4,
    nproc: int = 2,
    timeout: float = 600,
    original_nproc: int | None = None,
) -> Verdict:
    """Train both scripts for ``steps`` optimizer steps under torchrun and compare them: the
    migrated script on ``nproc`` processes, the original on ``original_nproc`` (default: as
    many; each trains alone, so one gives the same parameters for less work)."""
    import torch

    home = original.resolve().parent
    with scratch.folder("verify") as folder:
        migrated = folder / original.name
        migrated.write_text(migrated_code, encoding="utf-8")
        scripts = {"original": original.resolve(), "migrated": migrated}
        procs = {"original": original_nproc or nproc, "migrated": nproc}
        for name in scripts:
            (folder / name).mkdir()

        runs = {}
        for name in scripts:  # one after the other: each launch forks from the same server
            out = folder / name / "verify-params.pt"
            try:
                _launch(scripts[name], list(args or []), home, out, steps, procs[name], timeout)
            except _Failed as failed:
                raise DpwiseError(f"--verify: the {name} {original.name} {failed}") from None
            runs[name] = torch.load(out, weights_only=True)
    if runs["migrated"].get("world_size", nproc) != nproc or not runs["migrated"].get(
        "ddp_models", 1
    ):
        raise DpwiseError(
            f"the migrated script trained without DDP across {nproc} processes (process group "
            f"of {runs['migrated'].get('world_size')}, {runs['migrated'].get('ddp_models')} DDP "
            "models): its wrap or set-up did not run; run it under torchrun to see why"
        )
    a, b = runs["original"]["final"], runs["migrated"]["final"]
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b, strict=False)):
        raise DpwiseError("the two scripts train different parameters; nothing to compare")
    diff = max((x - y).abs().max().item() for x, y in zip(a, b, strict=True))
    moved = max(
        (x - y).abs().max().item() for x, y in zip(a, runs["original"]["initial"], strict=True)
    )
    causes: Causes | None = runs["migrated"].get("causes")
    return Verdict(
        steps=steps,
        nproc=nproc,
        max_abs_diff=diff,
        moved=moved,
        batchnorm=_layers(causes, "batchnorm"),
        stochastic=_layers(causes, "stochastic"),
        found_by=causes.get("found_by", "running") if causes else "running",
    )
