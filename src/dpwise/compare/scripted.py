"""`dpwise compare --script`: the runs of the user's own scripts, unedited, each launched as its
user launches it (dpwise.userscript), in interleaved repeats, and what each rank measured turned
into compare's run records.

One run per script and world size: a torchrun script on W processes, a script that spawns its
own workers or wraps DataParallel with W devices (on the CPU the stand-in answers
`torch.cuda.device_count()` with W), a one-process script once. Every repeat is a fresh launch of
the script for the same optimizer steps: WARM_UP_STEPS untimed, then the timed ones. The order of
the runs rotates each round, as compare's turns do, so a change in the machine's speed hits every
run alike.
"""

from __future__ import annotations

import json
import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from dpwise.compare.runner import Event, rounds
from dpwise.compare.turns import RunFailed
from dpwise.errors import DpwiseError
from dpwise.measure.meter import MASK
from dpwise.measure.stats import summary
from dpwise.results.records import DevicePeak, Memory, Run, Spread
from dpwise.userscript.command import ScriptCommand
from dpwise.userscript.harness import LOG, MEASURED
from dpwise.userscript.kind import Kind, Launch, launch_of, unsharded_loader
from dpwise.userscript.run import ScriptFailed, ScriptRefused, launch_script

WARM_UP_STEPS = 2  # optimizer steps each launch takes before the timed ones
DEFAULT_STEPS = 10  # timed steps per repeat without --max-steps
PARAMS = "params.pt"  # rank 0's parameters before the first step and after the last
CAUSES = "causes.json"  # what rank 0 found in the model that makes parallel runs differ
# How a kind of script trains, in compare's words: the strategy whose traits describe it (one
# process per device, one process driving many, one process on one device).
STRATEGY_OF: dict[Kind, str] = {
    "torchrun": "ddp",
    "spawns": "ddp",
    "dataparallel": "dp",
    "single": "single",
}


@dataclass(frozen=True)
class ScriptRun:
    """One configuration: a script at a world size."""

    id: str
    command: ScriptCommand
    launch: Launch
    world_size: int

    @property
    def nproc(self) -> int:
        """The processes dpwise's launcher starts: W under torchrun, else the script's one."""
        return self.world_size if self.launch.kind == "torchrun" else 1

    @property
    def label(self) -> str:
        """The script's file name, × the world size where it has one (as compare's "ddp × 2")."""
        name = self.command.script.name
        return name if self.launch.kind == "single" else f"{name} × {self.world_size}"


def matrix(commands: list[ScriptCommand], sizes: tuple[int, ...]) -> list[ScriptRun]:
    """Every script at every world size (a one-process script once), the first script's first
    run first: the reference the others are held to. On GPUs a size is at most their count."""
    gpus = _gpus()
    if gpus and max(sizes) > gpus:
        raise DpwiseError(
            f"--world-sizes {max(sizes)}: this machine has {gpus} GPU(s), and a run of W uses W "
            f"of them; give sizes up to {gpus}"
        )
    runs: list[ScriptRun] = []
    for command in commands:
        launch = launch_of(command)
        base = _unique(command.name, {r.id.rsplit("-", 1)[0] for r in runs})
        for size in (1,) if launch.kind == "single" else sizes:
            runs.append(ScriptRun(f"{base}-{size}", command, launch, size))
    return runs


def _unique(name: str, taken: set[str]) -> str:
    n, candidate = 1, name
    while candidate in taken:
        n += 1
        candidate = f"{name}{n}"
    return candidate


def measure(
    runs: list[ScriptRun],
    stage: Path,
    repeats: int,
    steps: int,
    timeout: float,
    seed: int,
    profile_steps: int,
    on_event: Event = lambda event: None,
) -> list[Run]:
    """Launch every run ``repeats`` times, interleaved; the run records, with each run's final
    parameters saved under ``stage``. The first repeat also profiles: after WARM_UP_STEPS,
    ``profile_steps`` steps under the profiler (its collectives and, on the CPU, its live
    tensors), then its timed steps (one launch fewer per run than a launch of its own)."""
    for r, run in rounds(runs, repeats):
        on_event({"what": "start", "label": run.label})
        window = (WARM_UP_STEPS, profile_steps) if r == 0 else None
        total = _untimed(window) + steps
        _launch(run, stage / "runs" / run.id / f"repeat-{r}", total, timeout, seed, window)
        on_event({"what": "repeat"})
    return [record(run, stage, repeats, profile_steps) for run in runs]


def _untimed(window: tuple[int, int] | None) -> int:
    """The steps before the timed ones: the warm-up, and the profiled window where there is one."""
    return WARM_UP_STEPS if window is None else sum(window)


def _launch(
    run: ScriptRun,
    folder: Path,
    steps: int,
    timeout: float,
    seed: int,
    window: tuple[int, int] | None = None,
) -> None:
    folder.mkdir(parents=True)
    command = run.command
    try:
        launch_script(
            command.script,
            list(command.args),
            command.script.parent,
            folder / PARAMS,
            steps,
            run.nproc,
            timeout,
            measure=True,
            devices=run.world_size,
            seed=seed,
            cwd=command.cwd,
            profile=window,
            kind=run.launch.kind,
            visible=",".join(str(d) for d in range(run.world_size)) if _gpus() else "",
            fewer=f"{'--max-steps' if window is None else '--profile-steps'} {WARM_UP_STEPS}",
            read=_untimed(window),  # the steps it times only count their rows
        )
    except ScriptRefused as refused:  # its arguments: fixed in the command line (exit code 2)
        raise DpwiseError(
            f"{command.script.name} {refused}: give them in its command line, as in "
            f"--script '{command.script.name} ARGS'"
        ) from None
    except ScriptFailed as failed:
        raise RunFailed(run.label, "", str(failed)) from None


def _gpus() -> int:
    """The GPUs here: a run of W sees the first W (a torchrun worker takes its LOCAL_RANK's, a
    DataParallel or spawning script all W); none: the CPU and its stand-in."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def record(run: ScriptRun, stage: Path, repeats: int, profile_steps: int) -> Run:
    """The run record from what its ranks wrote in every repeat (the first one profiled)."""
    folder = stage / "runs" / run.id
    window = (WARM_UP_STEPS, profile_steps)
    timed = [
        _timing(_ranks(folder / f"repeat-{r}"), _untimed(window if r == 0 else None))
        for r in range(repeats)
    ]
    first = _ranks(folder / "repeat-0")
    probed = [m.get("profile") or {} for m in first]
    unprofiled = [_ranks(folder / f"repeat-{r}") for r in range(1, repeats)] or [first]
    trace = _keep_trace(probed[0], stage, run.id)
    params = torch.load(folder / "repeat-0" / PARAMS, weights_only=True)
    final = folder / "final.pt"
    torch.save({f"param.{i}": t for i, t in enumerate(params["final"])}, final)
    torch.save({f"param.{i}": t for i, t in enumerate(params["initial"])}, folder / "initial.pt")
    (folder / CAUSES).write_text(json.dumps(params.get("causes") or {}), encoding="utf-8")
    for log in (folder / "repeat-0").glob(f"{LOG}*.log"):  # each rank's output, the first time
        log.rename(folder / log.name.replace(LOG, "rank"))
    for r in range(repeats):  # what a launch left
        shutil.rmtree(folder / f"repeat-{r}", ignore_errors=True)
    rows = [sum(m["rows"]) for m in first]
    return Run(
        id=run.id,
        label=run.label,
        strategy=STRATEGY_OF[run.launch.kind],
        world_size=run.world_size,
        devices=tuple(_devices(first)),
        threads_per_process=first[0].get("threads"),
        notes=(f"{run.launch.kind}: {run.command.given}",),
        epoch_seconds=Spread.from_json(summary([t[0] for t in timed])),
        samples_per_s=Spread.from_json(summary([t[1] for t in timed])),
        samples_per_epoch=sum(rows) or None,
        training_seconds=sum(t[0] for t in timed),
        final_state=str(final.relative_to(stage)),
        memory=_memory(first, probed, unprofiled),
        communication=probed[0].get("communication"),
        sync_points_per_step=probed[0].get("sync_points_per_step"),
        trace=trace,
        script=_facts(run, first),
    )


def _facts(run: ScriptRun, ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """The script's command and kind, the rows each rank fed its model per optimizer step (the
    median over the steps) and in all, and whether every rank fed the same rows at every step
    (their digests equal), with where lint finds the loader that lacks a DistributedSampler."""
    per_rank = [int(statistics.median(m["rows"])) if m["rows"] else 0 for m in ranks]
    digests = [m["digests"] for m in ranks]
    same = len(ranks) > 1 and all(d == digests[0] for d in digests[1:]) and any(digests[0])
    return {
        "command": run.command.given,
        "kind": run.launch.kind,
        "rows_per_step": sum(per_rank),
        "rows_per_rank": per_rank,
        "same_rows_on_every_rank": same,
        "loader": unsharded_loader(run.command) if same else None,
        "row_sets": _row_sets(ranks),
    }


def _row_sets(ranks: list[dict[str, Any]]) -> list[str]:
    """The fingerprint of the global batch of each optimizer step (dpwise.measure.meter's
    row sets of every rank, added up), as hex: equal where two runs fed their models the same
    rows at that step, however they split them."""
    steps = zip(*(m.get("rowsets", []) for m in ranks), strict=False)
    return [f"{sum(step) & MASK:016x}" for step in steps]


def _keep_trace(probed: dict[str, Any], stage: Path, run_id: str) -> str | None:
    """Rank 0's trace of the profiled steps, moved to traces/ as compare keeps its own."""
    if not probed.get("trace"):
        return None
    kept = Path("traces") / f"{run_id}.rank0.json"
    (stage / kept).parent.mkdir(exist_ok=True)
    Path(probed["trace"]).rename(stage / kept)
    return str(kept)


def causes(out: Path, run: Run) -> dict[str, Any]:
    """What the run's rank 0 found in the model (dpwise.userscript.causes)."""
    assert run.final_state is not None
    found: dict[str, Any] = json.loads((out / run.final_state).with_name(CAUSES).read_text())
    return found


def _ranks(folder: Path) -> list[dict[str, Any]]:
    """What each rank of one launch measured, rank 0 first."""
    found = sorted(folder.glob(f"{MEASURED}*.json"))
    ranks = [json.loads(p.read_text(encoding="utf-8")) for p in found]
    return sorted(ranks, key=lambda m: m["rank"])


def _timing(ranks: list[dict[str, Any]], untimed: int) -> tuple[float, float]:
    """(seconds, rows per second) of the timed steps: from the end of the last untimed step to
    the end of the last step on rank 0's clock, the rows every rank fed its model meanwhile."""
    ends = ranks[0]["ends"]
    seconds = ends[-1] - ends[untimed - 1]
    rows = sum(sum(m["rows"][untimed:]) for m in ranks)
    return seconds, rows / seconds if seconds > 0 else 0.0


def _devices(ranks: list[dict[str, Any]]) -> list[str]:
    return [device for m in ranks for device in m["peak_memory"]["bytes"]]


def _memory(
    ranks: list[dict[str, Any]],
    probed: list[dict[str, Any]],
    unprofiled: list[list[dict[str, Any]]],
) -> Memory:
    """Each device's peak as compare measures it: the CUDA allocator's per device; on the CPU
    each process's live tensors in the profiled steps, with its peak RSS beside (the largest of
    the repeats without the profiler, whose own memory would count in it)."""
    kind = ranks[0]["peak_memory"]["kind"]
    if kind != "cpu_peak_rss":
        per_device = tuple(
            DevicePeak(rank=m["rank"], device=device, peak_bytes=int(peak))
            for m in ranks
            for device, peak in m["peak_memory"]["bytes"].items()
        )
        return Memory(kind=kind, per_device=per_device)
    live = tuple(
        DevicePeak(rank=rank, device="cpu", peak_bytes=p.get("live_tensor_bytes"))
        for rank, p in enumerate(probed)
    )
    rss = tuple(
        max(int(repeat[rank]["peak_memory"]["bytes"]["cpu"]) for repeat in unprofiled)
        for rank in range(len(ranks))
    )
    return Memory(kind="cpu_live_tensors", per_device=live, peak_rss_bytes=rss)
