"""Per-device memory estimate for single, dp, ddp and fsdp, with its breakdown.

Model states (parameters, gradients, optimizer state, AMP weight casts, DDP buckets, FSDP shards)
follow from the parameters, counted on the meta device. What depends on the batch (activations,
inputs, temporaries) is measured, not guessed: small models run a real training step on the CPU at
two small batches under torch.profiler's memory tracking (the same measurement `dpwise compare`
makes) and the result is scaled linearly in the batch; models too large for that are traced on the
meta device, where the tensors autograd saves for backward are summed per sample.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from dpwise.advise.footprint import footprint
from dpwise.workload import Workload

STRATEGIES = ("single", "dp", "ddp", "fsdp")


@dataclass(frozen=True)
class ModelFacts:
    parameters: int
    param_bytes: int
    trainable_bytes: int
    largest_block_bytes: int  # the largest unit FSDP gathers at once (a repeated block or the rest)
    blocks: int  # units FSDP would wrap: the repeated blocks plus the root
    per_sample_bytes: float  # batch-dependent memory per sample
    fixed_bytes: float  # what the measured step adds beyond model states at batch 0
    input_bytes_per_sample: int
    output_bytes_per_sample: int
    method: str  # "measured-cpu", "meta-trace" or "parameter-count" (see dpwise.advise.footprint)
    reason: str = ""  # which path was taken and why
    floor_bytes: float = 0.0  # the batch-dependent part never falls below this


def _bytes(module: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


def fsdp_units(model: nn.Module) -> tuple[int, int]:
    """Bytes of the largest unit FSDP would gather at once, wrapping each repeated block.

    Repeated blocks are the elements of a ModuleList / Sequential with two or more children that
    hold parameters (transformer layers); what is outside them forms the root unit.
    """
    blocks: list[nn.Module] = []
    for module in model.modules():
        if isinstance(module, (nn.ModuleList, nn.Sequential)):
            children = [c for c in module.children() if _bytes(c) > 0]
            if len(children) >= 2 and not any(c in blocks for c in children):
                blocks += [c for c in children if not any(c is b for b in blocks)]
    inner = {id(p) for b in blocks for p in b.parameters()}
    root = sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in inner)
    return max([root, *(_bytes(b) for b in blocks)]), len(blocks) + (1 if root else 0)


def _states(model: nn.Module) -> tuple[int, int, int, int, int]:
    params = list(model.parameters())
    count = sum(p.numel() for p in params)
    total = sum(p.numel() * p.element_size() for p in params)
    trainable = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
    return count, total, trainable, *fsdp_units(model)


def optimizer_bytes(trainable: int, optimizer: str, momentum: float) -> int:
    """AdamW keeps two moments per parameter; SGD one momentum buffer, or none."""
    if optimizer == "adamw":
        return 2 * trainable
    return trainable if momentum > 0 else 0


def amp_cast_bytes(param_count: int, precision: str) -> int:
    """Autocast keeps a half-precision copy of each weight it casts during the forward."""
    return 2 * param_count if precision in ("bf16", "fp16") else 0


def model_facts(workload: Workload, cfg: dict[str, Any]) -> ModelFacts:
    """cfg: precision, optimizer, momentum, seed. Never allocates a large model's memory."""
    with torch.device("meta"):
        meta_model = workload.build_model()
    count, total, trainable, block, blocks = _states(meta_model)
    states = total + trainable + optimizer_bytes(trainable, cfg["optimizer"], cfg["momentum"])
    states += amp_cast_bytes(count, cfg["precision"])
    data = workload.load_data(cfg["seed"])
    fp = footprint(workload, meta_model, data, cfg, states, total)
    return ModelFacts(
        count,
        total,
        trainable,
        block,
        blocks,
        fp.per_sample_bytes,
        fp.fixed_bytes,
        fp.input_bytes_per_sample,
        fp.output_bytes_per_sample,
        fp.method,
        fp.reason,
        fp.floor_bytes,
    )


@dataclass(frozen=True)
class Settings:
    batch_size: int
    precision: str
    optimizer: str
    momentum: float


def _activations(facts: ModelFacts, rows: float) -> int:
    return int(max(facts.fixed_bytes + facts.per_sample_bytes * rows, facts.floor_bytes, 0.0))


def _base(facts: ModelFacts, s: Settings, shard: int = 1) -> dict[str, int]:
    opt = optimizer_bytes(facts.trainable_bytes, s.optimizer, s.momentum)
    return {
        "parameters": facts.param_bytes // shard,
        "gradients": facts.trainable_bytes // shard,
        "optimizer_state": opt // shard,
        "amp_weight_casts": amp_cast_bytes(facts.parameters, s.precision) // shard,
    }


def per_device(facts: ModelFacts, strategy: str, world: int, s: Settings) -> list[dict[str, int]]:
    """Breakdown of each device's peak, in bytes (GiB = 1024³ when shown)."""
    local = s.batch_size / world
    if strategy == "single":
        return [{**_base(facts, s), "activations": _activations(facts, s.batch_size)}]
    if strategy == "ddp":
        one = {**_base(facts, s), "ddp_buckets": facts.trainable_bytes}
        return [{**one, "activations": _activations(facts, local)} for _ in range(world)]
    if strategy == "fsdp":
        units = 0 if world == 1 else min(2, facts.blocks) * facts.largest_block_bytes
        one = {**_base(facts, s, shard=world), "fsdp_gathered_units": units}
        return [{**one, "activations": _activations(facts, local)} for _ in range(world)]
    replica = {
        "parameters": facts.param_bytes,
        "gradients": facts.trainable_bytes,
        "amp_weight_casts": amp_cast_bytes(facts.parameters, s.precision),
        "activations": _activations(facts, local),
    }
    device0 = {
        **_base(facts, s),
        "activations": _activations(facts, local),
        # the local chunk's rows are already in the measured activations
        "dp_full_batch_inputs": int(facts.input_bytes_per_sample * (s.batch_size - local)),
        "dp_gathered_outputs": facts.output_bytes_per_sample * s.batch_size,
    }
    return [device0] + [dict(replica) for _ in range(world - 1)]


def estimate_all(
    facts: ModelFacts, world: int, s: Settings, dp_world: int | None = None
) -> dict[str, dict[str, Any]]:
    """Every strategy's per-device estimate; dp spans ``dp_world`` GPUs of one node."""
    out = {}
    for strategy in STRATEGIES:
        size = {"single": 1, "dp": dp_world or world}.get(strategy, world)
        devices = per_device(facts, strategy, size, s)
        out[strategy] = {
            "world_size": size,
            "per_device": [
                {"device": i, "bytes": sum(d.values()), "breakdown": d}
                for i, d in enumerate(devices)
            ],
            "peak_bytes": max(sum(d.values()) for d in devices),
        }
    return out


def facts_dict(facts: ModelFacts) -> dict[str, Any]:
    return asdict(facts)


def facts_from_count(parameters: int) -> ModelFacts:
    """--params N without a model: fp32 weights; activations unknown (not included); FSDP units
    assumed to be 32 equal blocks (a typical transformer depth)."""
    size = 4 * parameters
    return ModelFacts(
        parameters,
        size,
        size,
        size // 32,
        32,
        0.0,
        0.0,
        0,
        0,
        "parameter-count",
        "--params gives the parameter count only: fp32 weights, activations NOT included, FSDP "
        "units assumed to be 32 equal blocks",
    )
