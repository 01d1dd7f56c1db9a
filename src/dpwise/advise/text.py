"""Terminal text for `dpwise advise`: recommendation first, then reasons, memory, launch, facts."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpwise.advise.record import Answer

from typing import Any

from dpwise.infra.units import size

PARTS = (
    ("parameters", "params"),
    ("gradients", "grads"),
    ("optimizer_state", "optimizer"),
    ("amp_weight_casts", "amp casts"),
    ("ddp_buckets", "ddp buckets"),
    ("fsdp_gathered_units", "fsdp units"),
    ("fsdp_unsharded_gradient", "fsdp grad"),
    ("dp_full_batch_inputs", "dp inputs"),
    ("dp_gathered_outputs", "dp outputs"),
    ("activations", "activations"),
)


def _memory_table(memory: dict[str, Any]) -> list[str]:
    header = f"  {'strategy':<10}{'devices':>8}{'peak/device':>13}  " + "  ".join(
        f"{short:>11}" for _, short in PARTS
    )
    lines = [header]
    for name, est in memory.items():
        busiest = max(est["per_device"], key=lambda d: d["bytes"])["breakdown"]
        cells = "  ".join(f"{size(busiest[k]) if k in busiest else '–':>11}" for k, _ in PARTS)
        lines.append(f"  {name:<10}{est['world_size']:>8}{size(est['peak_bytes']):>13}  {cells}")
    return lines


def _source(answer: Answer) -> str:
    status = answer.get("measurement_status")
    if status == "inconclusive":
        return "; measurements inconclusive, so the rules answer"
    return "; from measurements" if answer["measured"] else ""


def render(answer: Answer) -> str:
    runner = answer["runner_up"] or "none"
    lines = [
        f"Recommendation: {answer['strategy']} (world size {answer['world_size']})",
        f"  rule: {answer['rule']}; runner-up: {runner}{_source(answer)}",
    ]
    if answer.get("warnings"):
        lines += ["", "Caution:", *(f"  ! {w}" for w in answer["warnings"])]
    lines += [
        "",
        "Why:",
        *(f"  • {r}" for r in answer["reasons"]),
        "",
        "Launch:",
        *(f"  {c}" for c in answer["launch"]),
    ]
    job = answer.get("job")
    if job is not None:
        lines += [f"  {job['summary']}", f"  submit: {job['submit']}"]
    model = answer["model"]
    if answer["memory"] is not None and model is not None:  # an estimate is of a model
        lines += ["", f"Memory per device (estimate, {model['method']}; the busiest device):"]
        if model.get("reason"):
            lines.append(f"  how: {model['reason']}")
        lines += _memory_table(answer["memory"])
    simulated = answer.get("simulated")
    if simulated:
        heading = "Simulated (PyTorch's own DDP, ZeRO-1 and FSDP2 on a fake process group):"
        lines += ["", heading]
        lines += [f"  {_simulated(name, sim)}" for name, sim in simulated.items()]
    lines += ["", "What would change the answer:", *(f"  • {c}" for c in answer["changes"])]
    lines += ["", "Facts:"]
    for name, fact in answer["facts"].items():
        note = f" — {fact['note']}" if fact["note"] else ""
        value = "unknown" if fact["value"] is None else fact["value"]
        lines.append(f"  {name:<18} {value!s:<10} ({fact['source']}){note}")
    return "\n".join(lines)


def _simulated(name: str, sim: dict) -> str:
    """One simulated strategy: its busiest rank by category beside the formula's figure, the
    difference said where it exceeds 10 %; or why it was not simulated."""
    world = sim["world_size"]
    if sim.get("peak_bytes") is None:
        return f"{name} × {world}: not simulated: {sim['why_not']}; the formula's figure stands"
    parts = {k: v for k, v in sim["by_category"].items() if k != "Total" and v}
    ordered = sorted(parts.items(), key=lambda kv: -kv[1])
    split = ", ".join(f"{k.lower()} {_mib(v)}" for k, v in ordered)
    peak = _mib(sim["peak_bytes"])
    took = sim["seconds"]
    how = f"{sim.get('tensors', 'fake')} tensors, {took:.{1 if took < 10 else 0}f} s"
    rank = sim.get("rank") or 0
    who = f"rank {rank}, which owns the most optimizer state," if rank else "busiest rank"
    said = f"{name} × {world}: {who} {peak} ({split}; {how})"
    off = sim.get("formula_off_by")
    if sim.get("formula_bytes") is None:
        said += "; the formula does not model these settings"
    elif off is not None:
        said += f"; the formula says {_mib(sim['formula_bytes'])}"
        if abs(off) > 0.10:
            said += f", {abs(off):.0%} {'over' if off > 0 else 'under'} the simulation"
    return said


def _mib(n: int) -> str:
    return f"{n / 2**20:,.2f} MiB"
