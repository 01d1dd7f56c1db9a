"""What the search's figures decide and what the user gets from them: each candidate against the
default, round by round, with compare's rule and thresholds (no torch); when to stop measuring
one; the verdicts and the winner; results.json; and how to apply a configuration (the
`dpwise train` flags, the code that sets its knobs in the user's own script)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Literal, cast

from dpwise import __version__, strategies
from dpwise.compare.checks.base import Comparison, judge
from dpwise.compare.checks.thresholds import CONFIDENCE, SPEED_MARGIN
from dpwise.strategies.hooks import one_bucket_mb
from dpwise.tune.journal import Candidate, Journal, SearchFacts, Steps
from dpwise.tune.space import TuneConfig

SCHEMA = 1
MIN_ROUNDS = 6  # the fewest paired rounds whose order-statistic interval covers 95 %
MAX_ROUNDS = 12  # an interval that still crosses the margin gets rounds up to this many
PRUNE_AFTER = 2  # after this many rounds, a candidate none of whose rounds gained 5 % stops

RULE = (
    f"Every configuration trains from the same initial state on the same batches as the default, "
    f"in interleaved rounds (each round trains the default and every configuration still "
    f"measured once, in a rotating order); the speed-up of a round is the default's time over "
    f"the configuration's. A configuration counts as faster only when the whole {CONFIDENCE:.0%} "
    f"interval of its per-round speed-ups (the sign-test interval of the median) lies at or "
    f"above {SPEED_MARGIN:.2f}×, compare's rule and threshold. One that gained less than "
    f"{SPEED_MARGIN - 1:.0%} in each of its first {PRUNE_AFTER} rounds is no longer measured "
    f"(pruned)."
)

Outcome = Literal[
    "faster", "same", "slower", "inconclusive", "rejected", "failed", "pruned", "skipped"
]


# -- the decisions -------------------------------------------------------------------------------
def comparison(c: Candidate) -> Comparison | None:
    """The candidate against the default over the rounds measured (None: none yet)."""
    if not c.pairs:
        return None
    default = [d for d, _ in c.pairs]
    mine = [s for _, s in c.pairs]
    # times, not rates: the default's time over the candidate's is the candidate's speed-up
    found = judge(default, mine, "the default's time", f"{c.name}'s")
    if found.coverage < CONFIDENCE:
        return Comparison(
            outcome="inconclusive",
            ratio=found.ratio,
            low=found.low,
            high=found.high,
            coverage=found.coverage,
            rounds=found.rounds,
            reason=f"measured in {found.rounds} round(s); a {CONFIDENCE:.0%} interval needs "
            f"{MIN_ROUNDS}",
        )
    return found


def after_round(c: Candidate) -> None:
    """Whether the candidate goes on being measured: pruned after its first rounds when no round
    gained the margin, done at MIN_ROUNDS unless its interval still crosses the margin with a
    median beyond it (then up to MAX_ROUNDS)."""
    if c.state != "active":
        return
    rounds = len(c.pairs)
    ratios = [d / s for d, s in c.pairs if s > 0]
    if rounds >= PRUNE_AFTER and rounds < MIN_ROUNDS and max(ratios) < SPEED_MARGIN:
        c.state = "pruned"
        c.reason = (
            f"no gain in its first {rounds} rounds (best {max(ratios):.3f}×, below "
            f"{SPEED_MARGIN:.2f}×): no longer measured"
        )
        return
    if rounds < MIN_ROUNDS:
        return
    found = comparison(c)
    unsure = found is not None and found.outcome == "inconclusive" and found.ratio >= SPEED_MARGIN
    if unsure and rounds < MAX_ROUNDS:
        return
    c.state = "done"


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    ratio: float | None
    low: float | None
    high: float | None
    rounds: int
    reason: str


def verdict(c: Candidate) -> Verdict:
    found = comparison(c)
    if found is None:
        figures: dict[str, Any] = dict(ratio=None, low=None, high=None, rounds=0)
    else:
        figures = dict(ratio=found.ratio, low=found.low, high=found.high, rounds=found.rounds)
    if c.state in ("rejected", "failed", "skipped", "pruned"):
        return Verdict(outcome=c.state, reason=c.reason, **figures)
    if found is None:
        why = c.reason or "not measured: the budget ran out"
        return Verdict(outcome="inconclusive", reason=why, **figures)
    # compare's judge says faster, same, slower or inconclusive
    return Verdict(outcome=cast(Outcome, found.outcome), reason=found.reason, **figures)


def eligible(c: Candidate, allow_lossy: bool, limit: int | None) -> bool:
    """May the candidate be recommended: faster, equivalent (or lossy and allowed), within
    --device-memory."""
    if verdict(c).outcome != "faster":
        return False
    if c.lossy and not allow_lossy:
        return False
    if not c.lossy and c.equivalent is False:
        return False
    return limit is None or c.peak_memory is None or c.peak_memory <= limit


def ranked(candidates: list[Candidate], allow_lossy: bool, limit: int | None) -> list[Candidate]:
    """The recommendable candidates, best first: the highest lower end of the interval (the
    speed-up the user can count on), then the median."""
    ok = [c for c in candidates if eligible(c, allow_lossy, limit)]
    return sorted(ok, key=lambda c: (verdict(c).low or 0.0, verdict(c).ratio or 0.0), reverse=True)


# -- results.json ---------------------------------------------------------------------------------
def _seconds_per_step(c: Candidate, timed: int) -> float | None:
    times = [s for _, s in c.pairs]
    return statistics.median(times) / timed if times and timed else None


def entry(c: Candidate, cfg: TuneConfig, timed: int) -> dict[str, Any]:
    v = verdict(c)
    return {
        "name": c.name,
        "config": c.config,
        "outcome": v.outcome,
        "ratio": v.ratio,
        "low": v.low,
        "high": v.high,
        "rounds": v.rounds,
        "seconds_per_step": _seconds_per_step(c, timed),
        "peak_memory": c.peak_memory,
        "drift": _drift(c),
        "equivalent": c.equivalent,
        "lossy": c.lossy,
        "stage": c.stage,
        "recommendable": eligible(c, cfg.allow_lossy, cfg.memory_limit),
        "reason": _reason(c, v, cfg),
    }


def _drift(c: Candidate) -> dict[str, Any] | None:
    if not c.drift or "max_param_diff" not in c.drift:
        return None
    keys = ("max_param_diff", "largest_in", "loss_distance", "steps")
    return {k: v for k, v in c.drift.items() if k in keys}


def _reason(c: Candidate, v: Verdict, cfg: TuneConfig) -> str:
    """Why it won or lost, in one sentence."""
    limit = cfg.memory_limit
    if v.outcome == "faster":
        if c.lossy and not cfg.allow_lossy:
            return "faster, but lossy: recommended only with --allow-lossy"
        if limit is not None and c.peak_memory is not None and c.peak_memory > limit:
            return "faster, but above --device-memory"
        return f"faster: the whole {CONFIDENCE:.0%} interval clears {SPEED_MARGIN:.2f}×" + (
            f"; lossy, drift {c.drift['max_param_diff']:.2g}" if c.lossy and c.drift else ""
        )
    if v.outcome == "same":
        return f"no practical difference: the interval lies within ±{SPEED_MARGIN - 1:.0%}"
    if v.outcome == "slower":
        return "slower than the default"
    return v.reason


def assemble(cfg: TuneConfig, j: Journal, command: str) -> dict[str, Any]:
    steps: Steps = j.steps or {"warm": 0, "timed": 0}
    timed = steps["timed"]
    ranks = ranked(j.candidates, cfg.allow_lossy, cfg.memory_limit)
    return {
        "schema": SCHEMA,
        "dpwise_version": __version__,
        "command": command,
        "strategy": cfg.strategy,
        "facts": j.facts,
        "settings": cfg.to_dict(),
        "steps": steps,
        "rounds": j.rounds,
        "stopped": j.stopped,
        "rule": RULE,
        "thresholds": {
            "speed_margin": SPEED_MARGIN,
            "confidence": CONFIDENCE,
            "tolerance": cfg.tolerance,
        },
        "timing": _timing(cfg, j),
        "notes": j.notes,
        "default": _default(cfg, j, timed),
        "candidates": [entry(c, cfg, timed) for c in j.candidates],
        "winner": _winner(cfg, j, ranks, timed),
        "runner_up": entry(ranks[1], cfg, timed) if len(ranks) > 1 else None,
    }


def _default(cfg: TuneConfig, j: Journal, timed: int) -> dict[str, Any]:
    return {
        "name": "default",
        "config": {},
        "seconds_per_step": _seconds_per_step(j.default, timed),
        "peak_memory": j.default.peak_memory,
        "rounds": len(j.default.pairs),
        "train_flags": train_flags(cfg, {}),
        "snippet": snippet(cfg, {}, j.facts),
    }


def _winner(cfg: TuneConfig, j: Journal, ranks: list[Candidate], timed: int) -> dict[str, Any]:
    """The best candidate, or the default with why nothing beat it; with how to apply it."""
    if ranks:
        winner = {**entry(ranks[0], cfg, timed), "is_default": False}
    else:
        winner = {
            **_default(cfg, j, timed),
            "outcome": "default",
            "ratio": 1.0,
            "low": None,
            "high": None,
            "drift": None,
            "equivalent": True,
            "lossy": False,
            "is_default": True,
            "reason": _no_winner(j, cfg),
        }
    winner["train_flags"] = train_flags(cfg, winner["config"])
    winner["snippet"] = snippet(cfg, winner["config"], j.facts)
    return winner


def _timing(cfg: TuneConfig, j: Journal) -> dict[str, Any]:
    overhead = max(0.0, j.elapsed - j.training)
    return {
        "budget_seconds": cfg.budget,
        "elapsed_seconds": j.elapsed,
        "training_seconds": j.training,
        "overhead_seconds": overhead,
        "overhead_share_of_budget": overhead / cfg.budget,
        "sessions": j.sessions,
    }


def _no_winner(j: Journal, cfg: TuneConfig) -> str:
    faster = [c for c in j.candidates if verdict(c).outcome == "faster"]
    lossy = [c for c in faster if c.lossy and not cfg.allow_lossy]
    if lossy:
        return (
            f"no lossless configuration beats the default by {SPEED_MARGIN - 1:.0%}; "
            f"{lossy[0].name} is faster but lossy (--allow-lossy recommends it with its drift)"
        )
    if j.stopped == "budget":
        return (
            f"nothing beat the default by {SPEED_MARGIN - 1:.0%} before the budget ran out; "
            "a larger --budget (or --resume) measures the rest"
        )
    return f"nothing beats the default by {SPEED_MARGIN - 1:.0%} on this hardware: keep it"


# -- how to apply it -------------------------------------------------------------------------------
# what `dpwise train` needs for the search's own setting, when it is not train's default
_SHARED = ("model", "nproc", "nnodes", "device", "backend", "lr", "optimizer", "momentum",
           "weight_decay", "precision", "seed")  # fmt: skip
_DEFAULTS = {"model": "simple", "nproc": None, "nnodes": 1, "device": "auto", "backend": "auto",
             "lr": 0.01, "optimizer": "sgd", "momentum": 0.0, "weight_decay": 0.0,
             "precision": "fp32", "seed": 0}  # fmt: skip


def train_flags(cfg: TuneConfig, config: dict[str, Any]) -> str:
    """The `dpwise train` command line that trains ``config`` as the search did."""
    flags = ["dpwise", "train", "--strategy", cfg.strategy]
    for name in _SHARED:
        value = getattr(cfg, name)
        if value != _DEFAULTS[name]:
            flags += [f"--{name.replace('_', '-')}", str(value)]
    for key, value in sorted(cfg.model_args.items()):
        flags += ["--model-arg", f"{key}={value}"]
    if cfg.data:
        flags += ["--data", cfg.data]
    steps = int(config.get("accum_steps", 1))
    flags += ["--batch-size", str(cfg.batch_size // steps)]
    if steps > 1:
        flags += ["--accum-steps", str(steps)]
    if cfg.find_unused_parameters:
        flags.append("--find-unused-parameters")
    for key, value in sorted(config.items()):
        if key == "accum_steps":
            continue
        if key == "reshard_after_forward":
            flags.append("--no-reshard-after-forward")
        elif value is True:
            flags.append(f"--{key.replace('_', '-')}")
        else:
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            flags += [f"--{key.replace('_', '-')}", shown]
    return " ".join(flags)


_HOOKS = {
    "fp16": ("from torch.distributed.algorithms.ddp_comm_hooks import default_hooks",
             "model.register_comm_hook(None, default_hooks.fp16_compress_hook)"),
    "bf16": ("from torch.distributed.algorithms.ddp_comm_hooks import default_hooks",
             "model.register_comm_hook(None, default_hooks.bf16_compress_hook)"),
    "powersgd": (
        "from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook",
        "state = powerSGD_hook.PowerSGDState(\n"
        "    process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2\n)\n"
        "model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)",
    ),
}  # fmt: skip


def snippet(cfg: TuneConfig, config: dict[str, Any], facts: SearchFacts | None = None) -> str:
    """The configuration in PyTorch's own calls, for the user's training script. ``facts``: the
    search's (the backend and the gradients' size: PowerSGD on gloo keeps one bucket)."""
    lines: list[str] = []
    if config.get("compile"):
        lines.append("model.compile()  # before wrapping; the state dict's names stay the same")
    if strategies.traits(cfg.strategy).shards_model:
        lines += _fsdp(config)
    else:
        device_type = None if facts is None else facts["device_type"]
        lines += _ddp(cfg, _one_bucket(config, facts), device_type)
    steps = int(config.get("accum_steps", 1))
    if steps > 1:
        lines += [
            f"# the global batch of {cfg.batch_size} as {steps} micro-batches of "
            f"{cfg.batch_size // steps} (each process: its share of each): divide each "
            f"micro-batch's loss by {steps}, run",
            f"# the first {steps - 1} backward passes inside `with model.no_sync():` and step "
            "the optimizer after the last",
        ]
    return "\n".join(lines)


def _one_bucket(config: dict[str, Any], facts: SearchFacts | None) -> dict[str, Any]:
    """PowerSGD on gloo with every gradient in one bucket, as dpwise ran it (strategies.ddp)."""
    if config.get("comm_hook") != "powersgd" or facts is None or facts["backend"] != "gloo":
        return config
    need = one_bucket_mb(int(facts["gradient_bytes"] or 0))
    return {**config, "bucket_cap_mb": max(need, float(config.get("bucket_cap_mb") or 0))}


def _ddp(cfg: TuneConfig, config: dict[str, Any], device_type: str | None) -> list[str]:
    args = ["device_ids=None" if device_type == "cpu" else "device_ids=[local_rank]"]
    if cfg.find_unused_parameters:
        args.append("find_unused_parameters=True")
    for key in ("bucket_cap_mb", "gradient_as_bucket_view", "static_graph"):
        if key in config:
            value = config[key]
            args.append(f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}")
    lines = ["from torch.nn.parallel import DistributedDataParallel as DDP", ""]
    lines.append(f"model = DDP(model, {', '.join(args)})")
    hook = config.get("comm_hook")
    if hook in _HOOKS:
        imports, call = _HOOKS[hook]
        lines[:0] = [imports]
        lines.append(call)
    if config.get("zero1"):
        kind = "AdamW" if cfg.optimizer == "adamw" else "SGD"
        lines[:0] = ["from torch.distributed.optim import ZeroRedundancyOptimizer"]
        lines.append(
            f"optimizer = ZeroRedundancyOptimizer(model.parameters(), "
            f"optimizer_class=torch.optim.{kind}, lr={cfg.lr:g})"
        )
    return lines


def _fsdp(config: dict[str, Any]) -> list[str]:
    reshard = config.get("reshard_after_forward", True)
    lines = ["from torch.distributed.fsdp import fully_shard", ""]
    if config.get("shard_units") == "model":
        lines.append("fully_shard(model)  # the whole model as one unit")
        return lines
    lines += [
        "for block in model.layers:  # each repeated block (transformer layers, ResNet blocks)",
        f"    fully_shard(block, reshard_after_forward={reshard})",
        "fully_shard(model)",
    ]
    return lines
