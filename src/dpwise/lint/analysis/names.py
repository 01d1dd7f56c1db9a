"""Resolve what a name in a script refers to, through its imports and aliases.

`import torch.distributed as dist` makes `dist.init_process_group` resolve to
`torch.distributed.init_process_group`; `from torch.nn.parallel import DistributedDataParallel as
DDP` makes `DDP` resolve to the class. Names a script never imports resolve to nothing, except a few
conventional aliases (`nn`, `dist`, `mp`, `DDP`) when the script binds them nowhere: snippets
copied from tutorials often omit the import (the guide's `ddp_train.py` uses `nn` unimported).
"""

from __future__ import annotations

import ast

CONVENTIONAL = {
    "torch": "torch",
    "nn": "torch.nn",
    "dist": "torch.distributed",
    "mp": "torch.multiprocessing",
    "DDP": "torch.nn.parallel.DistributedDataParallel",
}

# Top-level packages never read as the project's own modules.
NOT_PROJECT = frozenset({"torch", "os", "sys", "numpy", "np"})

DDP = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
    }
)
DATA_PARALLEL = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
    }
)
DATA_PARALLEL_FUNCTIONAL = frozenset(
    {"torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.data_parallel"}
)
INIT = frozenset(
    {
        "torch.distributed.init_process_group",
        "torch.distributed.distributed_c10d.init_process_group",
    }
)
DESTROY = frozenset(
    {
        "torch.distributed.destroy_process_group",
        "torch.distributed.distributed_c10d.destroy_process_group",
    }
)
SET_DEVICE = frozenset(
    {
        "torch.cuda.set_device",
        "torch.cuda.device",
        "torch.accelerator.set_device_index",
        "torch.accelerator.set_device_idx",
    }
)
# launchers of well-known libraries whose workers create the process group (the script's main
# function runs in them and owns the group)
GROUP_LAUNCHERS = frozenset({"detectron2.engine.launch", "detectron2.engine.launch.launch"})
SPAWN = frozenset(
    {
        "torch.multiprocessing.spawn",
        "torch.multiprocessing.spawn.spawn",
        "torch.multiprocessing.start_processes",
    }
)
DATALOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
DISTRIBUTED_SAMPLER = frozenset(
    {"torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler"}
)
GRAD_SCALER = frozenset(
    {
        "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch.cuda.amp.GradScaler",
        "torch.cuda.amp.grad_scaler.GradScaler",
        "torch.cpu.amp.GradScaler",
    }
)
# deprecated name -> what to write instead
DEPRECATED_AMP = {
    "torch.cuda.amp.autocast": 'torch.amp.autocast("cuda", ...)',
    "torch.cuda.amp.autocast_mode.autocast": 'torch.amp.autocast("cuda", ...)',
    "torch.cuda.amp.GradScaler": 'torch.amp.GradScaler("cuda", ...)',
    "torch.cuda.amp.grad_scaler.GradScaler": 'torch.amp.GradScaler("cuda", ...)',
    "torch.cuda.amp.custom_fwd": 'torch.amp.custom_fwd(device_type="cuda")',
    "torch.cuda.amp.custom_bwd": 'torch.amp.custom_bwd(device_type="cuda")',
    "torch.cpu.amp.autocast": 'torch.amp.autocast("cpu", ...)',
    "torch.cpu.amp.GradScaler": 'torch.amp.GradScaler("cpu", ...)',
}
BATCHNORM = frozenset(
    f"torch.nn.{prefix}{kind}"
    for prefix in ("", "modules.batchnorm.")
    for kind in (
        "BatchNorm1d",
        "BatchNorm2d",
        "BatchNorm3d",
        "LazyBatchNorm1d",
        "LazyBatchNorm2d",
        "LazyBatchNorm3d",
    )
)
SAVE = frozenset(
    {
        "torch.save",
        "torch.jit.save",
        "torch.onnx.export",
        "numpy.save",
        "numpy.savez",
        "numpy.savez_compressed",
        "numpy.savetxt",
        "safetensors.torch.save_file",
        "safetensors.torch.save_model",
        "matplotlib.pyplot.savefig",
        "shutil.copy",
        "shutil.copy2",
        "shutil.copyfile",
    }
)
DUMP = frozenset({"json.dump", "pickle.dump", "yaml.dump", "yaml.safe_dump"})
SUMMARY_WRITER = frozenset(
    {
        "torch.utils.tensorboard.SummaryWriter",
        "torch.utils.tensorboard.writer.SummaryWriter",
        "tensorboardX.SummaryWriter",
    }
)
TORCHRUN_ENV = frozenset(
    {"LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RUN_ID"}
)


def import_aliases(imports: list[ast.Import | ast.ImportFrom]) -> dict[str, str]:
    """Local name -> dotted name it stands for. Relative imports keep their leading dots."""
    aliases: dict[str, str] = {}
    for node in imports:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    aliases[top] = top
            continue
        base = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                continue
            joiner = "" if base.endswith(".") or not base else "."
            aliases[alias.asname or alias.name] = f"{base}{joiner}{alias.name}"
    return aliases


class Names:
    """Dotted-name resolution for one file, memoised per node."""

    def __init__(self, aliases: dict[str, str], bound: set[str]) -> None:
        self.aliases = aliases
        self.bound = bound
        self._memo: dict[ast.AST, str | None] = {}

    def qual(self, expr: ast.AST) -> str | None:
        """`dist.init_process_group` -> 'torch.distributed.init_process_group', else None."""
        try:
            return self._memo[expr]
        except KeyError:
            pass
        parts: list[str] = []
        node = expr
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        result = None
        if isinstance(node, ast.Name):
            base = self.base(node.id)
            if base is not None:
                result = ".".join([base, *reversed(parts)])
        self._memo[expr] = result
        return result

    def add_aliases(self, extra: dict[str, str]) -> None:
        """More names that stand for a dotted name (values bound in the file); answers given
        before are forgotten."""
        self.aliases.update(extra)
        self._memo.clear()

    def base(self, name: str) -> str | None:
        if name in self.aliases:
            return self.aliases[name]
        if name in self.bound:
            return None
        return CONVENTIONAL.get(name)


def last_name(expr: ast.AST) -> str:
    """The identifier an expression ends with: `args.local_rank` -> 'local_rank', `f()` -> 'f'."""
    if isinstance(expr, ast.Call):
        expr = expr.func
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Name):
        return expr.id
    return ""


def str_value(expr: ast.AST | None) -> str | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    return None


# Methods that write a file whatever their receiver (a DataFrame, a figure, a model, a Path):
# unguarded-rank-side-effect reports them outside rank 0, and migrate guards them.
WRITING_METHODS = (
    "to_csv",
    "to_parquet",
    "savefig",
    "save_pretrained",
    "write_text",
    "write_bytes",
)
