"""What a user applies: the `dpwise train` flags that reproduce a configuration, and the code
that sets its knobs in their own script (DDP's arguments, the hook's registration, FSDP2's)."""

from __future__ import annotations

from typing import Any

from dpwise.strategies.ddp import one_bucket_mb
from dpwise.tune.settings import TuneConfig

# what `dpwise train` needs for the search's own setting, when it is not train's default
_SHARED = ("model", "nproc", "nnodes", "device", "backend", "lr", "optimizer", "momentum",
           "weight_decay", "precision", "seed")  # fmt: skip
_DEFAULTS = {"model": "simple", "nproc": None, "nnodes": 1, "device": "auto", "backend": "auto",
             "lr": 0.01, "optimizer": "sgd", "momentum": 0.0, "weight_decay": 0.0,
             "precision": "fp32", "seed": 0}  # fmt: skip


def train_flags(cfg: TuneConfig, config: dict[str, Any]) -> str:
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


def snippet(cfg: TuneConfig, config: dict[str, Any], facts: dict[str, Any] | None = None) -> str:
    """The configuration in PyTorch's own calls, for the user's training script. ``facts``: the
    search's (the backend and the gradients' size: PowerSGD on gloo keeps one bucket)."""
    lines: list[str] = []
    if config.get("compile"):
        lines.append("model.compile()  # before wrapping; the state dict's names stay the same")
    if cfg.strategy == "fsdp":
        lines += _fsdp(config)
    else:
        lines += _ddp(cfg, _one_bucket(config, facts or {}), (facts or {}).get("device_type"))
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


def _one_bucket(config: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """PowerSGD on gloo with every gradient in one bucket, as dpwise ran it (strategies.ddp)."""
    if config.get("comm_hook") != "powersgd" or facts.get("backend") != "gloo":
        return config
    need = one_bucket_mb(int(facts.get("gradient_bytes") or 0))
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
