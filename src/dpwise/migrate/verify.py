"""`dpwise migrate --verify`: the original and the migrated script trained for a few steps under
torchrun (2 processes, gloo on the CPU) through `dpwise.userscript.run`, and their final
parameters compared; with what in the model makes them differ by design (BatchNorm, random
layers), as the migrated run's rank 0 found it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from dpwise.diagnosis.layers import Layer
from dpwise.errors import DpwiseError
from dpwise.infra import scratch
from dpwise.userscript.run import ScriptFailed, launch_script

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
                launch_script(
                    scripts[name], list(args or []), home, out, steps, procs[name], timeout
                )
            except ScriptFailed as failed:
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
