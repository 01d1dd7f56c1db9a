"""results.json of a search, from its journal: the default, every candidate with its figures
and why it won or lost, and the winner (or the default) with the flags and code to apply it."""

from __future__ import annotations

import statistics
from typing import Any

from dpwise import __version__
from dpwise.compare.checks.thresholds import CONFIDENCE, SPEED_MARGIN
from dpwise.tune import answer, decide
from dpwise.tune.journal import Journal
from dpwise.tune.settings import TuneConfig
from dpwise.tune.space import Candidate

SCHEMA = 1


def _seconds_per_step(c: Candidate, timed: int) -> float | None:
    times = [s for _, s in c.pairs]
    return statistics.median(times) / timed if times and timed else None


def entry(c: Candidate, cfg: TuneConfig, timed: int, limit: int | None) -> dict[str, Any]:
    v = decide.verdict(c)
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
        "recommendable": decide.eligible(c, cfg.allow_lossy, limit),
        "reason": _reason(c, v, cfg, limit),
    }


def _drift(c: Candidate) -> dict[str, Any] | None:
    if not c.drift or "max_param_diff" not in c.drift:
        return None
    return {k: c.drift[k] for k in ("max_param_diff", "largest_in", "loss_distance", "steps")}


def _reason(c: Candidate, v: decide.Verdict, cfg: TuneConfig, limit: int | None) -> str:
    """Why it won or lost, in one sentence."""
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
    steps = j.steps or {"warm": 0, "timed": 0}
    limit = None if cfg.device_memory is None else int(cfg.device_memory * 2**30)
    timed = steps["timed"]
    candidates = [entry(c, cfg, timed, limit) for c in j.candidates]
    ranked = decide.ranked(j.candidates, cfg.allow_lossy, limit)
    default = {
        "name": "default",
        "config": {},
        "seconds_per_step": _seconds_per_step(j.default, timed),
        "peak_memory": j.default.peak_memory,
        "rounds": len(j.default.pairs),
        "train_flags": answer.train_flags(cfg, {}),
        "snippet": answer.snippet(cfg, {}, j.facts),
    }
    if ranked:
        best = ranked[0]
        winner = {**entry(best, cfg, timed, limit), "is_default": False}
    else:
        winner = {
            **default,
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
    winner["train_flags"] = answer.train_flags(cfg, winner["config"])
    winner["snippet"] = answer.snippet(cfg, winner["config"], j.facts)
    runner_up = entry(ranked[1], cfg, timed, limit) if len(ranked) > 1 else None
    training = j.training
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
        "rule": decide.RULE,
        "thresholds": {
            "speed_margin": SPEED_MARGIN,
            "confidence": CONFIDENCE,
            "tolerance": cfg.tolerance,
        },
        "timing": {
            "budget_seconds": cfg.budget,
            "elapsed_seconds": j.elapsed,
            "training_seconds": training,
            "overhead_seconds": max(0.0, j.elapsed - training),
            "overhead_share_of_budget": max(0.0, j.elapsed - training) / cfg.budget,
            "sessions": j.sessions,
        },
        "notes": j.notes,
        "default": default,
        "candidates": candidates,
        "winner": winner,
        "runner_up": runner_up,
    }


def _no_winner(j: Journal, cfg: TuneConfig) -> str:
    faster = [c for c in j.candidates if decide.verdict(c).outcome == "faster"]
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
