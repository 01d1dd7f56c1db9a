"""DPW002 missing-set-device: NCCL / per-rank CUDA without `torch.cuda.set_device`."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.flow import Flow, is_set_device
from dpwise.lint.analysis.guards import rank_like
from dpwise.lint.analysis.index import MODULE
from dpwise.lint.analysis.loaders import assigned_values, given, keyword
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Checks DDP scripts that use CUDA per rank (an NCCL process group, `DistributedDataParallel(...,
device_ids=...)`, `.cuda(rank)`, `.to(f"cuda:{rank}")`, `torch.device("cuda", rank)`) for a
`torch.cuda.set_device(...)` (or `torch.accelerator.set_device_index(...)`, or `with
torch.cuda.device(...)`) that runs before the `DistributedDataParallel` is built. Calls into
same-file functions are followed (`setup()` that calls `set_device` counts where `setup()` is
called); a call into another module named like a set-up (`init_distributed_mode(args)`) is trusted.
Scripts that give each process a single visible GPU (`os.environ["CUDA_VISIBLE_DEVICES"] = ...`)
are not reported: there `cuda:0` is the right device.

A module that starts a process group without building the DDP wrapper itself is checked when it
is a program: an `if __name__ == "__main__":` block, or another entry point (`fire.Fire(main)`,
`typer.run`, `@hydra.main`, `@click.command`, a Typer app's command, or a console script of the
project's `pyproject.toml` / `setup.cfg` / `setup.py`). A library function that calls
`init_process_group` for its caller is left to the caller.

## Why is this bad?
Every process starts on `cuda:0`. NCCL and anything created without an explicit index
(`.cuda()`, `torch.empty(..., device="cuda")`, barriers) land on GPU 0 from every rank: GPU 0
runs out of memory, NCCL reports duplicate GPUs, or collectives hang. PyTorch's documentation says
that with NCCL "users must set the current GPU device with `torch.cuda.set_device`, otherwise it
will lead to unexpected hang issues".

## Example
```python
dist.init_process_group("nccl")
model = DDP(Net().cuda(local_rank), device_ids=[local_rank])
```

## Use instead
```python
dist.init_process_group("nccl")
torch.cuda.set_device(local_rank)
model = DDP(Net().cuda(local_rank), device_ids=[local_rank])
```

## References
- https://pytorch.org/docs/stable/distributed.html (notes on `torch.cuda.set_device` with NCCL)
- https://pytorch.org/tutorials/intermediate/ddp_tutorial.html
"""

RULE = Rule(
    code="DPW002",
    name="missing-set-device",
    severity="warning",
    summary="CUDA per rank, but no `torch.cuda.set_device` before the model is wrapped",
    message="this DDP script uses CUDA per rank but never calls `torch.cuda.set_device`",
    help="call `torch.cuda.set_device(local_rank)` right after `init_process_group`, before "
    "building the model",
    docs=DOCS,
)


def _nccl(ctx: FileContext, call: ast.Call) -> bool:
    backend = keyword(call, "backend") or (call.args[0] if call.args else None)
    if isinstance(backend, ast.Name):  # backend = "nccl" earlier (nanoGPT)
        values = [*assigned_values(ctx, ctx.scope(call), backend.id)]
        values += assigned_values(ctx, MODULE, backend.id)
        return any(_nccl_text(v) for v in values)
    return _nccl_text(backend)


def _nccl_text(expr: ast.AST | None) -> bool:
    text = N.str_value(expr) if expr is not None else None
    return text is not None and "nccl" in text.lower()


def _cuda_index(node: ast.AST) -> bool:
    """`f"cuda:{rank}"` or a rank variable used as a device."""
    if isinstance(node, ast.JoinedStr):
        return bool(node.values) and (N.str_value(node.values[0]) or "").startswith("cuda:")
    return rank_like(node)


def uses_cuda_per_rank(ctx: FileContext) -> bool:
    if any(_nccl(ctx, c) for c in ctx.init_calls):
        return True
    if any(given(keyword(c, "device_ids")) for c in ctx.ddp_calls):
        return True
    if any(c.args and not isinstance(c.args[0], ast.Constant) for c in ctx.calls_named("cuda")):
        return True
    if any(_cuda_index(a) for c in ctx.calls_named("to") for a in c.args):
        return True
    for call in ctx.calls_to({"torch.device"}):
        first = call.args[0] if call.args else None
        if (N.str_value(first) == "cuda" and len(call.args) > 1) or (
            first is not None and _cuda_index(first)
        ):
            return True
    return False


def _one_gpu_per_process(ctx: FileContext) -> bool:
    """`os.environ["CUDA_VISIBLE_DEVICES"] = ...`: each process sees one GPU, `cuda:0` is right."""
    return any(
        isinstance(n, ast.Subscript)
        and isinstance(n.ctx, ast.Store)
        and N.str_value(n.slice) == "CUDA_VISIBLE_DEVICES"
        for n in ctx.idx.environ
    )


def check(ctx: FileContext) -> Iterator[Hit]:
    if not ctx.is_ddp_script or not uses_cuda_per_rank(ctx) or _one_gpu_per_process(ctx):
        return
    anywhere = any(is_set_device(ctx, c) for c in ctx.idx.all_calls())
    if not ctx.ddp_calls:
        if not anywhere:
            yield Hit(ctx.init_calls[0])
        return
    flow = Flow(ctx, is_set_device)
    for call in ctx.ddp_calls:
        if flow.established(ctx.scope(call), call) is False:
            message = None
            if anywhere:
                message = (
                    "`torch.cuda.set_device` does not run before this `DistributedDataParallel` "
                    "is built"
                )
            yield Hit(call, message=message)
