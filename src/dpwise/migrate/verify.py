"""`dpwise migrate --verify`: the original and the migrated script trained for a few steps under
torchrun (2 processes, gloo on the CPU) through `dpwise.migrate.harness`, and their final
parameters compared; with what in the model makes them differ by design (BatchNorm, random
layers), as the migrated run's rank 0 found it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from dpwise.diagnosis.layers import Layer
from dpwise.errors import DpwiseError
from dpwise.migrate.harness import ENDED, MARK

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
    found_by: str = "running"  # how the random layers were found: "running" or "class"

    @property
    def same(self) -> bool:
        return self.max_abs_diff <= TOLERANCE

    @property
    def explained(self) -> bool:
        """A difference has a named cause that is no migration error."""
        return bool(self.batchnorm or self.stochastic)


def _layers(causes: dict, key: str) -> tuple[Layer, ...]:  # type: ignore[type-arg]
    return tuple(Layer(d["name"], d["kind"]) for d in causes.get(key, []))


def _launch(
    script: Path, args: list[str], home: Path, out: Path, steps: int, nproc: int, timeout: float
) -> None:
    """One torchrun launch of `script`, run in the folder of `out` (so that what the script
    writes stays out of the user's folder), importing its siblings from `home`."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(
        CUDA_VISIBLE_DEVICES="",  # the CPU and gloo, whatever GPUs this machine has
        DPWISE_VERIFY_AS=str(home / script.name),
        DPWISE_VERIFY_STEPS=str(steps),
        DPWISE_VERIFY_OUT=str(out),
        DPWISE_VERIFY_PATH=str(home),
        PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[2]), env.get("PYTHONPATH", "")]),
    )
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "-m",
        "dpwise.migrate.harness",
        str(script),
        *args,
    ]
    launcher = subprocess.Popen(
        command,
        env=env,
        cwd=out.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, stderr = launcher.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGTERM lets torchrun stop its workers (a SIGKILL would leave them running)
        launcher.terminate()
        try:
            launcher.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            launcher.kill()
            launcher.communicate()
        raise _Failed(
            f"did not end within {timeout:.0f} s under torchrun: a worker stopped, hung or "
            "waits for input; run it by hand to see why"
        ) from None
    if launcher.returncode != 0 or not out.exists():
        ended = sorted(out.parent.glob(f"{ENDED}*"))
        if ended:
            why = ended[0].read_text(encoding="utf-8")
            raise _Failed(f"did not reach {steps} steps under torchrun: {why}")
        raise _Failed(_cause(stderr, steps))


class _Failed(Exception):
    """A run that crashed or ended before its steps: what its output says, in one line."""


def _cause(stderr: str, steps: int) -> str:
    """The harness's own line when the script ended too early, else the exception line of a
    worker's traceback, else the last line that says something."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip().strip("=")]
    lines = [line for line in lines if not line.startswith("torch.distributed.elastic")]
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
    with tempfile.TemporaryDirectory(prefix="dpwise-verify-") as tmp:
        folder = Path(tmp)
        migrated = folder / original.name
        migrated.write_text(migrated_code, encoding="utf-8")
        scripts = {"original": original.resolve(), "migrated": migrated}
        procs = {"original": original_nproc or nproc, "migrated": nproc}
        for name in scripts:
            (folder / name).mkdir()

        def run(name: str) -> None:
            out = folder / name / "verify-params.pt"
            _launch(scripts[name], list(args or []), home, out, steps, procs[name], timeout)

        with ThreadPoolExecutor(max_workers=2) as pool:  # the two launches side by side
            launched = {name: pool.submit(run, name) for name in scripts}
        runs = {}
        for name, future in launched.items():
            failed = future.exception()
            if isinstance(failed, _Failed):
                raise DpwiseError(f"--verify: the {name} {original.name} {failed}")
            if failed is not None:
                raise failed
            runs[name] = torch.load(folder / name / "verify-params.pt", weights_only=True)
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
    causes = runs["migrated"].get("causes") or {}
    return Verdict(
        steps=steps,
        nproc=nproc,
        max_abs_diff=diff,
        moved=moved,
        batchnorm=_layers(causes, "batchnorm"),
        stochastic=_layers(causes, "stochastic"),
        found_by=causes.get("found_by", "running"),
    )
