"""Check 1, convergence: every run's parameters against the single-process reference."""

from __future__ import annotations

from dpwise.checks.base import CheckResult, Diagnosis, Run
from dpwise.units import sci


def convergence(runs: list[Run], tolerance: float, why: Diagnosis) -> CheckResult:
    others = [r for r in runs if r["id"] != "single"]
    diffs = {r["id"]: r["max_param_diff_vs_single"] for r in others}
    worst = max(diffs.values(), default=0.0)
    rows = [
        [r["label"], sci(r["max_param_diff_vs_single"]), f"{r['losses'][-1]:.4f}"]
        for r in runs
        if r["losses"]
    ]
    table = {"columns": ["run", "max |Δparam| vs single", "final loss"], "rows": rows}
    figures = {"tolerance": tolerance, "max_diff": diffs}
    if worst <= tolerance:
        return CheckResult(
            "convergence",
            "pass",
            f"every run ends within {sci(worst)} of the single-process parameters "
            f"(tolerance {sci(tolerance)})",
            "All runs trained on the same global batches in the same order from the same initial "
            "weights with a mean-reduced loss, so their parameters agree to floating-point "
            "rounding: the strategies are interchangeable for this model.",
            figures,
            table,
            "loss.png",
        )
    failing = [r["label"] for r in others if r["max_param_diff_vs_single"] > tolerance]
    return CheckResult(
        "convergence",
        "fail",
        f"{', '.join(failing)} differ from single by up to {sci(worst)} "
        f"(tolerance {sci(tolerance)})",
        explain_divergence(why, failing),
        figures,
        table,
        "loss.png",
    )


def explain_divergence(why: Diagnosis, failing: list[str]) -> str:
    causes = []
    if why.batchnorm:
        causes.append(
            f"BatchNorm layers ({', '.join(why.batchnorm)}) normalise with the statistics of each "
            "device's share of the batch, not of the global batch. Fix: for ddp convert them with "
            "torch.nn.SyncBatchNorm.convert_sync_batchnorm(model) (DataParallel cannot sync them), "
            "or compare with the BatchNorm layers in eval mode."
        )
    if why.dropout:
        causes.append(
            f"Dropout ({', '.join(why.dropout)}) draws different masks per device. Fix: compare "
            "with dropout disabled (p=0 or eval mode)."
        )
    if why.loss_reduction != "mean":
        causes.append(
            f"the loss is {why.loss_reduction}-reduced, so DDP's gradient average does not equal "
            "the global gradient. Fix: use reduction='mean'."
        )
    if why.precision != "fp32":
        causes.append(
            f"--precision {why.precision} rounds each device's share of the batch separately; "
            "differences around 1e-3 are expected. Fix: compare in fp32."
        )
    if not causes:
        causes.append(
            "no known cause was found in the model (no BatchNorm, Dropout or sum-reduced loss, "
            "fp32): look for other per-process randomness or non-deterministic kernels."
        )
    return f"{', '.join(failing)} did not reproduce the single-process run. " + " ".join(causes)
