"""Per-device memory estimate of every strategy, with its breakdown, by the memory model its
traits call for (one device, one process driving several, a replica or a shard per process).

Model states (parameters, gradients, optimizer state, AMP weight casts, DDP buckets, FSDP shards
and the units FSDP holds whole) follow from the parameters, counted on the meta device. What
depends on the batch (activations, inputs, temporaries) is measured, not guessed: small models run
a real training step on the CPU at two small batches under torch.profiler's memory tracking (the
same measurement `dpwise compare` makes) and the result is scaled linearly in the batch; models
too large for that are traced on the meta device, where the tensors autograd saves for backward
are summed per sample.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, TypedDict

import torch
from torch import nn

from dpwise.advise import kinds
from dpwise.advise.footprint import footprint
from dpwise.strategies.fsdp import shard_units
from dpwise.workload.spec import Workload


@dataclass(frozen=True)
class ModelFacts:
    parameters: int
    param_bytes: int
    trainable_bytes: int
    largest_block_bytes: int  # the largest FSDP unit (a sharded unit or the root)
    blocks: int  # units FSDP shards (dpwise.strategies.fsdp.shard_units), plus the root
    per_sample_bytes: float  # batch-dependent memory per sample
    fixed_bytes: float  # what the measured step adds beyond model states at batch 0
    input_bytes_per_sample: int
    output_bytes_per_sample: int
    method: str  # "measured-cpu", "meta-trace" or "parameter-count" (see dpwise.advise.footprint)
    reason: str = ""  # which path was taken and why
    floor_bytes: float = 0.0  # the batch-dependent part never falls below this
    root_bytes: int = 0  # what FSDP's root unit holds: the parameters no other unit holds
    backward_unit_bytes: int = 0  # the unit held whole with its gradient at FSDP's backward peak
    prefetched_unit_bytes: int = 0  # the unit gathered ahead of it (the one before it in forward)
    # each trainable tensor's bytes, in the model's order: how ZeRO-1 shares them out
    tensor_bytes: tuple[int, ...] = ()


def _bytes(params: Iterable[torch.Tensor]) -> int:
    return sum(p.numel() * p.element_size() for p in params)


@dataclass(frozen=True)
class Units:
    """FSDP's units as the fsdp strategy shards them: each unit's bytes and the root's."""

    sizes: tuple[int, ...]
    root: int

    @property
    def largest(self) -> int:
        return max((*self.sizes, self.root), default=0)

    @property
    def count(self) -> int:
        return len(self.sizes) + (1 if self.root else 0)

    @property
    def backward_peak(self) -> tuple[int, int]:
        """(unit, prefetched): in backward FSDP2 holds a unit's parameters and its unsharded
        gradient while it gathers the unit before it (forward order) ahead of time; the pair
        that holds the most. Without units the root alone: (0, 0)."""
        pairs = [(s, self.sizes[i - 1] if i else 0) for i, s in enumerate(self.sizes)]
        return max(pairs, key=lambda p: 2 * p[0] + p[1], default=(0, 0))


def fsdp_units(model: nn.Module) -> Units:
    """The units the fsdp strategy shards (its own rule, ``shard_units``), in bytes."""
    units = shard_units(model)
    inner = {id(p) for _, unit in units for p in unit.parameters()}
    root = _bytes(p for p in model.parameters() if id(p) not in inner)
    return Units(tuple(_bytes(unit.parameters()) for _, unit in units), root)


def _states(model: nn.Module) -> tuple[int, int, int, Units]:
    params = list(model.parameters())
    count = sum(p.numel() for p in params)
    trainable = _bytes(p for p in params if p.requires_grad)
    return count, _bytes(params), trainable, fsdp_units(model)


def _tensor_bytes(model: nn.Module) -> tuple[int, ...]:
    return tuple(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


def zero1_shares(tensor_bytes: Iterable[int], world: int) -> list[int]:
    """Each rank's bytes of the trainable tensors as torch's ZeroRedundancyOptimizer assigns
    them: whole tensors, largest first, each to the rank that holds the least so far (the
    first such rank). At a world larger than the model's tensors most ranks own nothing, and
    the busiest owns far more than 1/W."""
    shares = [0] * world
    heap = [(0, rank) for rank in range(world)]  # (bytes so far, rank): the least, then first
    for size in sorted(tensor_bytes, reverse=True):
        held, rank = heapq.heappop(heap)
        shares[rank] = held + size
        heapq.heappush(heap, (held + size, rank))
    return shares


def optimizer_bytes(trainable: int, optimizer: str, momentum: float) -> int:
    """AdamW keeps two moments per parameter; SGD one momentum buffer, or none."""
    if optimizer == "adamw":
        return 2 * trainable
    return trainable if momentum > 0 else 0


def amp_cast_bytes(param_count: int, precision: str) -> int:
    """Autocast keeps a half-precision copy of each weight it casts during the forward."""
    return 2 * param_count if precision in ("bf16", "fp16") else 0


def model_facts(
    workload: Workload, cfg: dict[str, Any], meta_model: nn.Module | None = None
) -> ModelFacts:
    """cfg: precision, optimizer, momentum, seed. Never allocates a large model's memory.
    ``meta_model``: the workload's model on the meta device, where the command built it already
    (dpwise.train.inspection); built here if not."""
    if meta_model is None:
        with torch.device("meta"):
            meta_model = workload.build_model()
    count, total, trainable, units = _states(meta_model)
    states = total + trainable + optimizer_bytes(trainable, cfg["optimizer"], cfg["momentum"])
    states += amp_cast_bytes(count, cfg["precision"])
    data = workload.load_data(cfg["seed"])
    fp = footprint(workload, meta_model, data, cfg, states, total)
    return ModelFacts(
        count,
        total,
        trainable,
        units.largest,
        units.count,
        fp.per_sample_bytes,
        fp.fixed_bytes,
        fp.input_bytes_per_sample,
        fp.output_bytes_per_sample,
        fp.method,
        fp.reason,
        fp.floor_bytes,
        units.root,
        *units.backward_peak,
        _tensor_bytes(meta_model),
    )


@dataclass(frozen=True)
class Settings:
    batch_size: int
    precision: str
    optimizer: str
    momentum: float
    backend: str = "nccl"  # "gloo" on the CPU: its reduce-scatter works on a copy (below)


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


def _one_device(facts: ModelFacts, s: Settings, world: int) -> list[dict[str, int]]:
    """The whole batch on one device (single)."""
    return [{**_base(facts, s), "activations": _activations(facts, s.batch_size)}]


def _replica_per_process(facts: ModelFacts, s: Settings, world: int) -> list[dict[str, int]]:
    """A whole replica per process plus DDP's gradient buckets (a second copy of the gradients)."""
    one = {**_base(facts, s), "ddp_buckets": facts.trainable_bytes}
    return [{**one, "activations": _activations(facts, s.batch_size / world)} for _ in range(world)]


def _backward(facts: ModelFacts, s: Settings, world: int, rows: float) -> dict[str, int]:
    """What FSDP2 holds whole at its backward peak besides the shards (found in profiles of
    FSDP2 on the CPU, see bench/estimate_accuracy.py), the larger of two moments:

    - a unit in backward: the root unit (gathered from forward to the end of backward), the
      unit's parameters and unsharded gradient, the unit before it prefetched, and the local
      batch's activations (gloo's reduce-scatter all-reduces a copy of the gradient once the
      unit's parameters are freed: the same total);
    - the root's own reduce-scatter, last, when the activations are gone: its parameters and
      unsharded gradient, and on gloo the copy it all-reduces (the root's parameters are still
      gathered then: measured on a BERT and a GPT-2 whose embeddings the root holds).

    One process holds it all."""
    if world == 1:
        return {"fsdp_gathered_units": 0, "fsdp_unsharded_gradient": 0, "activations": int(rows)}
    root, unit, prefetched = (
        facts.root_bytes,
        facts.backward_unit_bytes,
        facts.prefetched_unit_bytes,
    )
    in_unit = {
        "fsdp_gathered_units": root + unit + prefetched,
        "fsdp_unsharded_gradient": unit,
        "activations": int(rows),
    }
    copies = 2 if s.backend == "gloo" else 1
    at_root = {"fsdp_gathered_units": root, "fsdp_unsharded_gradient": copies * root}
    if sum(at_root.values()) > sum(in_unit.values()):
        return {**at_root, "activations": 0}
    return in_unit


def _shard_per_process(facts: ModelFacts, s: Settings, world: int) -> list[dict[str, int]]:
    """1/W of the model states per process, then the larger of two moments: backward (the units
    held whole and the local batch's activations, see _backward) or the optimizer step, whose
    temporaries (what the measured step adds beyond the batch: AdamW's, chiefly) are of the
    shards, 1/W. Autocast casts the gathered, whole weights (profiled: the bf16 copy of the
    SimpleModel's first layer is the whole layer's size, not its shard's): the casts are not
    sharded."""
    rows = max(facts.per_sample_bytes * s.batch_size / world + min(facts.fixed_bytes, 0.0), 0.0)
    backward = _backward(facts, s, world, rows)
    step = max(facts.fixed_bytes, facts.floor_bytes, 0.0) / world
    if step > sum(backward.values()):  # every unit is sharded again when the step runs
        backward = {**{k: 0 for k in backward}, "activations": int(step)}
    one = {
        **_base(facts, s, shard=world),
        "amp_weight_casts": amp_cast_bytes(facts.parameters, s.precision),
        **backward,
    }
    return [dict(one) for _ in range(world)]


def _one_process_many_devices(facts: ModelFacts, s: Settings, world: int) -> list[dict[str, int]]:
    """DataParallel: device 0 holds the optimizer, the whole batch's inputs and the gathered
    outputs; every other device a replica and its chunk's activations."""
    local = s.batch_size / world
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


MEMORY_MODELS = {
    kinds.ONE_DEVICE: _one_device,
    kinds.ONE_PROCESS_MANY_DEVICES: _one_process_many_devices,
    kinds.REPLICA_PER_PROCESS: _replica_per_process,
    kinds.SHARD_PER_PROCESS: _shard_per_process,
}


def per_device(facts: ModelFacts, strategy: str, world: int, s: Settings) -> list[dict[str, int]]:
    """Breakdown of each device's peak, in bytes (GiB = 1024³ when shown), by the memory model
    the strategy's traits call for (dpwise.advise.kinds)."""
    return MEMORY_MODELS[kinds.kind_of(strategy)](facts, s, world)


class DeviceEstimate(TypedDict):
    device: int
    bytes: int  # the sum of the breakdown
    breakdown: dict[str, int]  # what holds the bytes: parameters, gradients, …


class StrategyEstimate(TypedDict):
    """One strategy's estimate (advise's answer, its `memory`)."""

    world_size: int
    per_device: list[DeviceEstimate]
    peak_bytes: int


def _optimizer_sharded(
    facts: ModelFacts, devices: list[dict[str, int]], s: Settings
) -> list[dict[str, int]]:
    """``devices`` with the optimizer state shared out as ZeRO-1 does (``zero1_shares``); a
    count without a model is taken as ``blocks`` equal tensors."""
    sizes = facts.tensor_bytes or (facts.trainable_bytes // facts.blocks,) * facts.blocks
    shares = zero1_shares(sizes, len(devices))
    return [
        {**d, "optimizer_state": optimizer_bytes(share, s.optimizer, s.momentum)}
        for d, share in zip(devices, shares, strict=True)
    ]


def estimate_all(
    facts: ModelFacts, world: int, s: Settings, dp_world: int | None = None
) -> dict[str, StrategyEstimate]:
    """Every registered strategy's per-device estimate (and ddp+zero1's: kinds.memory_rows): a
    process per device spans ``world`` devices, one process driving several GPUs spans
    ``dp_world`` of one node."""
    out: dict[str, StrategyEstimate] = {}
    for row, strategy, sharded in kinds.memory_rows():
        size = kinds.devices(strategy, world, dp_world or world)
        devices = per_device(facts, strategy, size, s)
        if sharded:
            devices = _optimizer_sharded(facts, devices, s)
        out[row] = {
            "world_size": size,
            "per_device": [
                {"device": i, "bytes": sum(d.values()), "breakdown": d}
                for i, d in enumerate(devices)
            ],
            "peak_bytes": max(sum(d.values()) for d in devices),
        }
    return out


def facts_dict(facts: ModelFacts) -> dict[str, Any]:
    """The facts for the answer; each tensor's size is left out (hundreds of numbers)."""
    return {k: v for k, v in asdict(facts).items() if k != "tensor_bytes"}


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
        0.0,
        0,
        size // 32,
        size // 32,
    )
