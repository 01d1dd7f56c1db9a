"""compare's records, typed: one measured run (Run), one check's outcome (CheckResult, its
status a CheckStatus) and the verdict (Recommendation). JSON only at the boundary (to_json /
from_json).

``from_json`` reads every results.json of schema 1, older files included: a key an older file
lacks takes its default. ``to_json`` writes every key results.json has always had.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, TypedDict, get_args

Json = dict[str, Any]


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _seq(value: Any) -> tuple[Any, ...]:
    """A JSON list as a tuple; anything else (absent, None, a stray value) as empty."""
    return tuple(value) if isinstance(value, list | tuple) else ()


def _measured(value: float | None, run: str, key: str) -> float:
    if value is None:
        raise ValueError(f"run {run} has no {key}: it was not measured or not yet derived")
    return value


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True, kw_only=True)
class Spread:
    """Median, min and max of one figure over the repeats, and the per-round values."""

    median: float | None = None
    min: float | None = None
    max: float | None = None
    values: tuple[float, ...] = ()

    def to_json(self) -> Json:
        return {"median": self.median, "min": self.min, "max": self.max, "values": [*self.values]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> Spread:
        d = _map(d)
        values = _seq(d.get("values"))
        return cls(median=d.get("median"), min=d.get("min"), max=d.get("max"), values=values)


@dataclass(frozen=True, kw_only=True)
class DevicePeak:
    rank: int
    device: str
    peak_bytes: int | None

    def to_json(self) -> Json:
        return {"rank": self.rank, "device": self.device, "peak_bytes": self.peak_bytes}


@dataclass(frozen=True, kw_only=True)
class Memory:
    """Peak memory of a run: per device (``kind`` says what was measured) and RSS per process."""

    kind: str = "cpu_live_tensors"  # or cuda_max_memory_allocated
    per_device: tuple[DevicePeak, ...] = ()
    peak_rss_bytes: tuple[int, ...] = ()

    @property
    def busiest(self) -> int:
        """The largest per-device peak in bytes (0 when none was recorded)."""
        return max((d.peak_bytes or 0 for d in self.per_device), default=0)

    def to_json(self) -> Json:
        return {
            "kind": self.kind,
            "per_device": [d.to_json() for d in self.per_device],
            "peak_rss_bytes": [*self.peak_rss_bytes],
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> Memory:
        d = _map(d)
        devices = tuple(
            DevicePeak(
                rank=_int(p.get("rank"), i),
                device=str(p.get("device") or "cpu"),
                peak_bytes=p.get("peak_bytes"),
            )
            for i, p in enumerate(_seq(d.get("per_device")))
            if isinstance(p, Mapping)
        )
        return cls(
            kind=str(d.get("kind") or "cpu_live_tensors"),
            per_device=devices,
            peak_rss_bytes=_seq(d.get("peak_rss_bytes")),
        )


@dataclass(frozen=True, kw_only=True)
class Run:
    """One measured configuration of a comparison (results.json's ``runs[i]``).

    The figures derived against single (speed-up, parameter difference) and the turn time are
    None until compare adds them; ``ddp_options`` is set on ddp runs only.
    """

    id: str
    label: str
    strategy: str
    world_size: int
    backend: str | None = None
    devices: tuple[str, ...] = ()
    threads_per_process: int | None = None
    notes: tuple[str, ...] = ()
    epoch_seconds: Spread = field(default_factory=Spread)
    samples_per_s: Spread = field(default_factory=Spread)
    # other processes' share of the machine's cores per repeat (dpwise.measure.load)
    other_cpu_share: Spread = field(default_factory=Spread)
    samples_per_epoch: int | None = None
    training_seconds: float | None = None
    losses: tuple[float | None, ...] = ()
    final_state: str | None = None
    memory: Memory = field(default_factory=Memory)
    communication: Json | None = None  # the profiler's collectives and exposed time
    sync_points_per_step: float | None = None
    trace: str | None = None
    pids: tuple[int, ...] = ()
    diverged: Json | None = (
        None  # dpwise.train.finite.Divergence.to_dict() of the first non-finite loss
    )
    wall_seconds: float | None = None
    speedup_vs_single: float | None = None
    max_param_diff_vs_single: float | None = None  # parameters only
    max_buffer_diff_vs_single: float | None = None  # buffers (and other state) only
    diff_vs_single: Json | None = None  # parameters and buffers apart: where, which dtypes
    ddp_options: Json | None = None
    link_probe: Json | None = None  # dpwise.link.probe's result, measured in the run's processes
    # compare --script: the command line, its kind, the rows per optimizer step (all ranks, and
    # each rank's) and whether every rank trained the same rows; set on a script's run only
    script: Json | None = None

    @property
    def median_rate(self) -> float:
        """The median throughput in samples/s: every measured run has one."""
        return _measured(self.samples_per_s.median, self.id, "samples_per_s")

    @property
    def speedup(self) -> float:
        """The median throughput against single's, once compare derived it."""
        return _measured(self.speedup_vs_single, self.id, "speedup_vs_single")

    @property
    def param_diff(self) -> float:
        """The largest parameter difference from single's, once compare derived it."""
        return _measured(self.max_param_diff_vs_single, self.id, "max_param_diff_vs_single")

    def to_json(self) -> Json:
        out = {
            "id": self.id,
            "label": self.label,
            "strategy": self.strategy,
            "world_size": self.world_size,
            "backend": self.backend,
            "devices": [*self.devices],
            "threads_per_process": self.threads_per_process,
            "notes": [*self.notes],
            "epoch_seconds": self.epoch_seconds.to_json(),
            "samples_per_s": self.samples_per_s.to_json(),
            "other_cpu_share": self.other_cpu_share.to_json(),
            "samples_per_epoch": self.samples_per_epoch,
            "training_seconds": self.training_seconds,
            "losses": [*self.losses],
            "final_state": self.final_state,
            "memory": self.memory.to_json(),
            "communication": self.communication,
            "sync_points_per_step": self.sync_points_per_step,
            "trace": self.trace,
            "pids": [*self.pids],
            "diverged": self.diverged,
            "wall_seconds": self.wall_seconds,
            "speedup_vs_single": self.speedup_vs_single,
            "max_param_diff_vs_single": self.max_param_diff_vs_single,
            "max_buffer_diff_vs_single": self.max_buffer_diff_vs_single,
            "diff_vs_single": self.diff_vs_single,
            "link_probe": self.link_probe,
        }
        if self.ddp_options is not None:
            out["ddp_options"] = dict(self.ddp_options)
        if self.script is not None:
            out["script"] = dict(self.script)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Run:
        """A run of any results.json of schema 1; keys an older file lacks take their default."""
        plain = {
            k: d[k]
            for k in (
                "backend",
                "threads_per_process",
                "samples_per_epoch",
                "training_seconds",
                "final_state",
                "communication",
                "sync_points_per_step",
                "trace",
                "diverged",
                "wall_seconds",
                "speedup_vs_single",
                "max_param_diff_vs_single",
                "max_buffer_diff_vs_single",
                "diff_vs_single",
                "ddp_options",
                "link_probe",
                "script",
            )
            if k in d
        }
        run_id = str(d.get("id") or "")
        return cls(
            id=run_id,
            label=str(d.get("label") or run_id),
            strategy=str(d.get("strategy") or ""),
            world_size=_int(d.get("world_size"), 1),
            devices=_seq(d.get("devices")),
            notes=_seq(d.get("notes")),
            epoch_seconds=Spread.from_json(d.get("epoch_seconds")),
            samples_per_s=Spread.from_json(d.get("samples_per_s")),
            other_cpu_share=Spread.from_json(d.get("other_cpu_share")),
            losses=_seq(d.get("losses")),
            memory=Memory.from_json(d.get("memory")),
            pids=_seq(d.get("pids")),
            **plain,
        )


CheckStatus = Literal["pass", "fail", "warn", "skip"]
CHECK_STATUSES: tuple[CheckStatus, ...] = get_args(CheckStatus)


class Table(TypedDict):
    """A check's table: its header and its rows, every cell a string."""

    columns: list[str]
    rows: list[list[str]]


def empty_table() -> Table:
    return {"columns": [], "rows": []}


@dataclass(kw_only=True)
class CheckResult:
    """One check's outcome (results.json's ``checks[i]``): its status, its sentences, the figures
    behind them, its table and its plot."""

    name: str
    status: CheckStatus
    summary: str
    explanation: str
    figures: Json = field(default_factory=dict)
    table: Table = field(default_factory=empty_table)
    plot: str | None = None

    def to_dict(self) -> Json:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CheckResult:
        """A check of a results.json; keys it lacks take their defaults ("" for text). A status
        the file spells otherwise is kept as written: the report shows it as it is."""
        known = {f.name for f in fields(cls)}
        text = {"name": "", "status": "", "summary": "", "explanation": ""}
        return cls(**{**text, **{k: v for k, v in d.items() if k in known}})


RecommendationStatus = Literal["recommended", "inconclusive"]


@dataclass(frozen=True, kw_only=True)
class Recommendation:
    """compare's verdict (results.json's ``recommendation``): the run to use, the runner-up, the
    headline and reasons, and whether the evidence could decide ("inconclusive" with its reason:
    the safe default, single, is named)."""

    strategy: str
    world_size: int | None
    run: str
    runner_up: str | None
    headline: str
    reasons: tuple[str, ...]
    status: RecommendationStatus = "recommended"
    inconclusive_reason: str | None = None
    diverged: tuple[str, ...] = ()  # the runs whose loss went non-finite: never recommended
    vs_single: dict[str, Json] = field(default_factory=dict)  # Comparison.to_dict() by run

    def to_json(self) -> Json:
        return {
            "strategy": self.strategy,
            "world_size": self.world_size,
            "run": self.run,
            "runner_up": self.runner_up,
            "headline": self.headline,
            "reasons": [*self.reasons],
            "status": self.status,
            "inconclusive_reason": self.inconclusive_reason,
            "diverged": [*self.diverged],
            "vs_single": dict(self.vs_single),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> Recommendation:
        """The recommendation of any results.json of schema 1: a key an older file lacks takes
        its default (no status: it was conclusive; no text: empty)."""
        d = _map(d)
        size, runner = d.get("world_size"), d.get("runner_up")
        reason = d.get("inconclusive_reason")
        return cls(
            strategy=str(d.get("strategy") or ""),
            world_size=size if isinstance(size, int) and not isinstance(size, bool) else None,
            run=str(d.get("run") or ""),
            runner_up=None if runner is None else str(runner),
            headline=str(d.get("headline") or ""),
            reasons=tuple(str(r) for r in _seq(d.get("reasons"))),
            status="inconclusive" if d.get("status") == "inconclusive" else "recommended",
            inconclusive_reason=None if reason is None else str(reason),
            diverged=tuple(str(r) for r in _seq(d.get("diverged"))),
            vs_single=dict(_map(d.get("vs_single"))),
        )


ClaimVerdict = Literal["held", "did not hold", "cannot be tested", "not measurable here"]


@dataclass(frozen=True)
class Claim:
    """One of the guide's claims (or a documented one) answered from the runs (results.json's
    ``claims``): the claim, its source, what was measured, the verdict and why."""

    claim: str
    source: str
    measured: str
    verdict: ClaimVerdict
    why: str = ""

    def to_json(self) -> Json:
        return asdict(self)
