"""What a `DataLoader` call is for, and whether its data is already split across ranks.

A loader is for evaluation when the name it is bound to, the function that builds it or its data
set says so (`val_loader`, `def evaluate`, `test_ds`, `CIFAR10(train=False)`, `split="test"`,
`ImageFolder("data/val")`), unless the name also says `train`. Its data is split per rank when the
data set's expression (names followed through assignments) mentions a rank or a shard
(`Subset(ds, range(rank, n, world))`, `ds.shard(...)`, `split_dataset_by_node(...)`), and it
streams when it is an `IterableDataset` (a class defined so in the file, or a name like
`...IterableDataset`, `...Stream...`, `WebDataset`, or `streaming=True`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.guards import rank_like
from dpwise.lint.analysis.index import assign_targets

EVAL_TOKENS = frozenset(
    {
        "val",
        "valid",
        "validation",
        "test",
        "testing",
        "eval",
        "evaluation",
        "evaluate",
        "inference",
        "infer",
        "predict",
        "prediction",
        "calib",
        "calibration",
        "holdout",
        "dev",
    }
)
_SPLIT = re.compile(r"[^A-Za-z]+|(?<=[a-z])(?=[A-Z])")
_STREAM_WORDS = ("iterable", "stream", "webdataset", "datapipe", "wds")
_SHARD_WORDS = ("shard", "split_dataset_by_node", "num_replicas")
_RANK_AWARE = ("rank", "sampler", "shard", "world", "distributed", "replica")
_PLACEMENT = ("to", "cuda", "pin_memory")
_MAX_DEPTH = 3


_SUFFIXES = ("loader", "dataset", "data", "set", "ds", "dl", "iter", "split", "s")


def _canonical(word: str) -> str:
    """'testloader' -> 'test', 'trainset' -> 'train', 'valid' -> 'valid'."""
    if word in EVAL_TOKENS or word in ("train", "training"):
        return word
    for suffix in _SUFFIXES:
        base = word.removesuffix(suffix)
        if base != word and (base in EVAL_TOKENS or base in ("train", "training")):
            return base
    return word


def tokens(text: str) -> set[str]:
    return {_canonical(t.lower()) for t in _SPLIT.split(text) if t}


def purpose(*texts: str) -> str | None:
    """'train' when the words say training, 'eval' when they say evaluation only, else None."""
    words = set().union(*(tokens(t) for t in texts)) if texts else set()
    if "train" in words or "training" in words:
        return "train"
    return "eval" if words & EVAL_TOKENS else None


def says_eval(*texts: str) -> bool:
    return purpose(*texts) == "eval"


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def given(expr: ast.expr | None) -> bool:
    return expr is not None and not (isinstance(expr, ast.Constant) and expr.value is None)


def has_sampler(call: ast.Call) -> bool:
    """`sampler=` or `batch_sampler=` (by keyword or position), not None."""
    positional = call.args[3:5]
    return any(map(given, (keyword(call, "sampler"), keyword(call, "batch_sampler"), *positional)))


def dataset_arg(call: ast.Call) -> ast.expr | None:
    return call.args[0] if call.args else keyword(call, "dataset")


def bound_names(ctx: FileContext, node: ast.AST) -> list[str]:
    """Names a value is bound to: `x = ...`, `self.x = ...`, `{"val": ...}`, `fn(x=...)`."""
    found: list[str] = []
    child = node
    for parent in ctx.ancestors(node):
        if isinstance(parent, ast.Assign | ast.AnnAssign):
            targets = assign_targets(parent)
            found += [
                N.last_name(t) or N.str_value(getattr(t, "slice", None)) or "" for t in targets
            ]
        elif isinstance(parent, ast.Dict):
            keys = [
                N.str_value(k)
                for k, v in zip(parent.keys, parent.values, strict=True)
                if v is child
            ]
            found += [k for k in keys if k]
        elif isinstance(parent, ast.keyword) and parent.arg:
            found.append(parent.arg)
        if isinstance(parent, ast.stmt):
            break
        child = parent
    return found


def _walk(expr: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk`, minus device placement (`device=...`, `.to(...)`, `.cuda(...)` arguments):
    a tensor created on `cuda:{rank}` is not a per-rank shard of the data."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.keyword) and node.arg == "device":
            continue
        if isinstance(node, ast.Call) and N.last_name(node.func) in _PLACEMENT:
            stack.append(node.func)
            continue
        stack.extend(ast.iter_child_nodes(node))


def follow(ctx: FileContext, expr: ast.AST, scope: str, depth: int = 0) -> Iterator[ast.AST]:
    """Every node of `expr` and of the values its names were assigned in `scope` (bounded)."""
    for node in _walk(expr):
        yield node
        if isinstance(node, ast.Name) and depth < _MAX_DEPTH:
            for value in assigned_values(ctx, scope, node.id):
                yield from follow(ctx, value, scope, depth + 1)


def assigned_values(ctx: FileContext, scope: str, name: str) -> Iterator[ast.AST]:
    for stmt in ctx.idx.assigns.get(scope, ()):
        targets = assign_targets(stmt)
        value = stmt.value
        if value is not None and any(
            isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)
        ):
            yield value


def _streams(ctx: FileContext, node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    if any(k.arg == "streaming" and getattr(k.value, "value", None) is True for k in node.keywords):
        return True
    name = N.last_name(node.func)
    cls = ctx.idx.classes.get(name)
    if cls is not None and any("Iter" in N.last_name(b) for b in cls.bases):
        return True
    return any(word in name.lower() for word in _STREAM_WORDS)


def data_is_split(ctx: FileContext, expr: ast.AST, scope: str) -> bool:
    """The data set is sharded by rank or is a stream (sharding is the stream's business)."""
    for node in follow(ctx, expr, scope):
        if rank_like(node) or _streams(ctx, node):
            return True
        name = N.last_name(node).lower()
        if name and any(word in name for word in _SHARD_WORDS):
            return True
    return False


def data_says_eval(ctx: FileContext, expr: ast.AST, scope: str) -> bool:
    texts: list[str] = []
    for node in follow(ctx, expr, scope):
        if isinstance(node, ast.Name):
            texts.append(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            texts.append(node.value)
        elif (
            isinstance(node, ast.keyword)
            and node.arg == "train"
            and isinstance(node.value, ast.Constant)
            and node.value.value is False
        ):
            return True
    return says_eval(*texts) if texts else False


_DIST_WORDS = ("distributed", "ddp", "is_initialized", "multiprocessing", "multi_gpu", "multigpu")
_COUNTS = ("world_size", "num_gpus", "ngpus", "n_gpu", "nprocs", "num_processes")


def _distributed_if_true(test: ast.AST) -> bool | None:
    """True: the test holds when running distributed (`if args.distributed:`,
    `if world_size > 1:`); False: when not (`if not ddp:`); None: unrelated."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _distributed_if_true(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        if not any(word in N.last_name(test.left).lower() for word in _COUNTS):
            return None
        return isinstance(test.ops[0], ast.Gt | ast.NotEq | ast.GtE)
    name = N.last_name(test).lower()
    if name and any(word in name for word in _DIST_WORDS):
        return True
    return None


def single_process_branch(ctx: FileContext, node: ast.AST) -> bool:
    """Inside the non-distributed branch of `if args.distributed: ... else: ...`."""
    child = node
    for parent in ctx.ancestors(node):
        if isinstance(parent, ast.If | ast.IfExp):
            when = _distributed_if_true(parent.test)
            if when is not None and child is not parent.test:
                in_body = (
                    child in parent.body if isinstance(parent, ast.If) else child is parent.body
                )
                if in_body != when:
                    return True
        child = parent
    return False


def rank_aware(fn: ast.AST) -> bool:
    """Does a function mention ranks, samplers or shards anywhere (so it may split data)?"""
    for node in ast.walk(fn):
        name = node.arg if isinstance(node, ast.arg) else N.last_name(node)
        if name and any(word in name.lower() for word in _RANK_AWARE):
            return True
    return False


def _sampler_for_eval(ctx: FileContext, call: ast.Call) -> bool:
    said = purpose(*bound_names(ctx, call))
    if said is not None:
        return said == "eval"
    data = dataset_arg(call)
    return data is not None and data_says_eval(ctx, data, ctx.scope(call))


def shuffling_samplers(ctx: FileContext) -> list[ast.Call]:
    """`DistributedSampler(...)` calls that shuffle (not `shuffle=False`) training data."""
    found = []
    for call in ctx.calls_to(N.DISTRIBUTED_SAMPLER):
        shuffle = keyword(call, "shuffle")
        if isinstance(shuffle, ast.Constant) and shuffle.value is False:
            continue
        if not _sampler_for_eval(ctx, call):
            found.append(call)
    return found


def in_factory(ctx: FileContext, call: ast.Call) -> bool:
    """Built inside a function of a library module that hands it back (`return loader`), and
    that runs no epoch loop itself: the caller iterates, so the caller owns `set_epoch`."""
    if ctx.is_script:
        return False
    node = ctx.function_node(ctx.scope(call))
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    returns = any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(node))
    loops = any(isinstance(n, ast.For | ast.AsyncFor | ast.While) for n in ast.walk(node))
    return returns and not loops
