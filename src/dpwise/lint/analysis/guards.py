"""Which statements run on rank 0 only.

Recognised guards: `if rank == 0:`, `if dist.get_rank() == 0:`, `if local_rank in (-1, 0):`,
`if self.gpu_id == 0:` (a worker's own GPU index is its local rank; so is any name the file assigns
from a rank, such as `gpu_id = int(os.environ["LOCAL_RANK"])`),
`if int(os.environ["RANK"]) == 0:`, `if not rank:`, flags named like `is_main`, `is_master`,
`master_process`, `is_main_process()`, `accelerator.is_main_process`, `trainer.is_global_zero`,
a flag the file sets only from such tests (`args.save_logs = args.logs and is_master(args)`),
`rank == 0 and ...`, the `else:` of `if rank != 0:`, early exits (`if rank != 0: return` guards the
rest of the block; so does `assert not args.distributed` or `assert world_size == 1`, after which
only one process runs; so does an option the script asserts off in a distributed run,
such as `assert not opt.evolve` under `if LOCAL_RANK != -1:`, for the branches where it is on),
decorators such as `@rank_zero_only`, and the rank-0 side of a conditional expression
(`SummaryWriter() if rank == 0 else None`). A function is guarded when every same-file call site
of it is guarded. In a script that starts its workers with `mp.spawn`, the
`if __name__ == "__main__":` block runs in the parent process only, so it counts as guarded.
"""

from __future__ import annotations

import ast
import re

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.flow import holds_on_entry
from dpwise.lint.analysis.index import assign_targets, is_main_guard

RANK0, OTHER, NOT_RANK0 = 1, 0, -1
_MAIN_FLAGS = frozenset(
    {
        "main",
        "master",
        "chief",
        "leader",
        "primary",
        "main_process",
        "master_process",
        "main_proc",
        "master_proc",
        "main_rank",
        "master_rank",
        "rank0",
        "rank_0",
        "rank_zero",
        "zero",
    }
)
_NOT_RANK = re.compile(r"node_rank|group_rank|ranks$|nrank|num_rank|rank_size|rank_zero_only")
_DEVICE_INDEX = frozenset(
    {"gpu", "gpu_id", "gpu_idx", "gpu_index", "local_gpu", "device_id", "device_idx"}
    | {"device_index", "cuda_id", "process_index", "local_process_index"}
)
_EXITS = ("exit", "_exit", "quit")
_DECORATORS = ("rank_zero", "rank0", "main_process", "master_only", "on_main", "main_only")


def is_main_flag(expr: ast.AST) -> bool:
    """`is_main`, `args.is_master`, `master_process`, `is_main_process()`, `is_global_zero`."""
    name = N.last_name(expr).lower().lstrip("_")
    name = name.removeprefix("is_")
    name = name.removeprefix("global_").removeprefix("local_")
    return name in _MAIN_FLAGS


def is_rank_name(name: str) -> bool:
    """`rank`, `local_rank`, `args.rank`, `get_rank`, and the usual names of a worker's own GPU
    index (`gpu`, `gpu_id`, `device_id`): in a DDP script that index is the local rank."""
    name = name.lower()
    return name in _DEVICE_INDEX or ("rank" in name and not _NOT_RANK.search(name))


def rank_like(expr: ast.AST, aliases: frozenset[str] = frozenset()) -> bool:
    """An expression that evaluates to this process's rank (global or local). `aliases` are
    names the file assigned from such an expression (`gpu_id = int(os.environ["LOCAL_RANK"])`)."""
    if isinstance(expr, ast.Call):
        if isinstance(expr.func, ast.Name) and expr.func.id in ("int", "str") and expr.args:
            return rank_like(expr.args[0], aliases)
        first = N.str_value(expr.args[0]) if expr.args else None
        if first is not None and N.last_name(expr.func) in ("get", "getenv"):
            return first in ("RANK", "LOCAL_RANK")
        return is_rank_name(N.last_name(expr.func))
    if isinstance(expr, ast.Subscript):
        return N.str_value(expr.slice) in ("RANK", "LOCAL_RANK")
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod):
        return rank_like(expr.left, aliases) and not isinstance(expr.right, ast.Constant)
    if isinstance(expr, ast.Name | ast.Attribute):
        name = N.last_name(expr)
        return name in aliases or is_rank_name(name)
    return False


def mentions_rank(expr: ast.AST) -> bool:
    """Any rank in the expression: `f"ckpt_{rank}.pt"`, `print("rank", dist.get_rank())`."""
    return any(
        isinstance(n, ast.Name | ast.Attribute | ast.Call | ast.Subscript) and rank_like(n)
        for n in ast.walk(expr)
    )


def _is_zero(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Constant) and expr.value in (0, "0") and expr.value is not False


def _number(expr: ast.AST) -> object:
    """The value of a numeric literal, `-1` included (a UnaryOp in the tree)."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        inner = _number(expr.operand)
        return -inner if isinstance(inner, int) else None
    return expr.value if isinstance(expr, ast.Constant) else None


def _compare(test: ast.Compare, aliases: frozenset[str]) -> int:
    if len(test.ops) != 1:
        return OTHER
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if _is_zero(left):
        left, right = right, left
        op = {ast.Gt: ast.Lt(), ast.Lt: ast.Gt()}.get(type(op), op)
    if not rank_like(left, aliases):
        return OTHER
    if _is_zero(right):
        if isinstance(op, ast.Eq | ast.Is | ast.LtE):
            return RANK0
        if isinstance(op, ast.NotEq | ast.IsNot | ast.Gt):
            return NOT_RANK0
    if (
        isinstance(right, ast.Tuple | ast.List | ast.Set)
        and any(map(_is_zero, right.elts))
        and all(_number(e) in (0, -1) for e in right.elts)
    ):
        if isinstance(op, ast.In):
            return RANK0
        if isinstance(op, ast.NotIn):
            return NOT_RANK0
    return OTHER


def classify(test: ast.AST, aliases: frozenset[str] = frozenset()) -> int:
    """RANK0 when the test is true only on rank 0; NOT_RANK0 when true only elsewhere."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = classify(test.operand, aliases)
        return -inner if inner else (RANK0 if rank_like(test.operand, aliases) else OTHER)
    if isinstance(test, ast.BoolOp):
        parts = [classify(v, aliases) for v in test.values]
        if isinstance(test.op, ast.And):
            return RANK0 if RANK0 in parts else OTHER
        if NOT_RANK0 in parts:
            return NOT_RANK0 if RANK0 not in parts else OTHER
        return RANK0 if RANK0 in parts else OTHER
    if isinstance(test, ast.Compare):
        return _compare(test, aliases)
    if is_main_flag(test):
        return RANK0
    return NOT_RANK0 if rank_like(test, aliases) else OTHER


def rank_aliases(ctx: FileContext) -> frozenset[str]:
    """Names assigned a rank: `gpu_id = int(os.environ["LOCAL_RANK"])`, `self.r = get_rank()`."""
    found: set[str] = set()
    for stmts in ctx.idx.assigns.values():
        for stmt in stmts:
            value = getattr(stmt, "value", None)
            if value is None or not rank_like(value):
                continue
            targets = assign_targets(stmt)
            found |= {N.last_name(t) for t in targets if isinstance(t, ast.Name | ast.Attribute)}
    return frozenset(found)


def rank0_flags(ctx: FileContext, aliases: frozenset[str]) -> frozenset[str]:
    """Names assigned only rank-0 tests: `args.save_logs = args.logs and is_master(args)`."""
    kinds: dict[str, set[bool]] = {}
    for stmts in ctx.idx.assigns.values():
        for stmt in stmts:
            value = getattr(stmt, "value", None)
            if value is None:
                continue
            targets = assign_targets(stmt)
            for t in targets:
                if isinstance(t, ast.Name | ast.Attribute):
                    kinds.setdefault(N.last_name(t), set()).add(classify(value, aliases) == RANK0)
    return frozenset(name for name, seen in kinds.items() if seen == {True})


_DISTRIBUTED_FLAGS = ("distributed", "ddp", "is_initialized", "multiprocessing")


def single_process(test: ast.AST) -> bool:
    """An assertion that holds only in a one-process run: `not args.distributed`,
    `not dist.is_initialized()`, `world_size == 1`, `get_world_size() <= 1`."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(map(single_process, test.values))
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        operand = test.operand
        name = N.last_name(operand.func if isinstance(operand, ast.Call) else operand)
        return any(word in name.lower() for word in _DISTRIBUTED_FLAGS)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, op, right = test.left, test.ops[0], _number(test.comparators[0])
    left = left.func if isinstance(left, ast.Call) else left
    if "world_size" not in N.last_name(left).lower():
        return False
    return (isinstance(op, ast.Eq | ast.LtE) and right == 1) or (
        isinstance(op, ast.Lt) and right == 2
    )


def _runs_distributed(test: ast.AST) -> bool:
    """A test that holds only when there are several processes: `if LOCAL_RANK != -1:`,
    `if rank >= 0:`, `if args.distributed:`, `if world_size > 1:`, `if dist.is_initialized():`."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left = test.left.func if isinstance(test.left, ast.Call) else test.left
        op, right = test.ops[0], _number(test.comparators[0])
        if rank_like(test.left):
            return (isinstance(op, ast.NotEq | ast.Gt) and right == -1) or (
                isinstance(op, ast.GtE) and right == 0
            )
        if "world_size" in N.last_name(left).lower():
            return isinstance(op, ast.Gt) and right == 1
        return False
    name = N.last_name(test.func if isinstance(test, ast.Call) else test).lower()
    return bool(name) and any(word in name for word in _DISTRIBUTED_FLAGS)


def single_process_flags(ctx: FileContext) -> frozenset[str]:
    """Options the script forbids in a distributed run: `assert not opt.evolve` inside
    `if LOCAL_RANK != -1:`. Where such an option is on, only one process runs."""
    found: set[str] = set()
    for ifs in ctx.idx.ifs.values():
        for stmt in ifs:
            if not _runs_distributed(stmt.test):
                continue
            for inner in stmt.body:
                test = inner.test if isinstance(inner, ast.Assert) else None
                if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                    found.add(ast.dump(test.operand))
    return frozenset(found)


def _exits(body: list[ast.stmt]) -> bool:
    if not body:
        return False
    last = body[-1]
    if isinstance(last, ast.Return | ast.Raise | ast.Continue | ast.Break):
        return True
    return (
        isinstance(last, ast.Expr)
        and isinstance(last.value, ast.Call)
        and N.last_name(last.value.func) in _EXITS
    )


def _blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    blocks = [getattr(stmt, f) for f in ("body", "orelse", "finalbody") if hasattr(stmt, f)]
    blocks += [h.body for h in getattr(stmt, "handlers", ())]
    blocks += [c.body for c in getattr(stmt, "cases", ())]
    return blocks


class Guards:
    """Rank-0 guard status of statements, per scope, computed once per scope on demand."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._guarded: dict[str, set[ast.stmt]] = {}
        self.aliases = rank_aliases(ctx)
        # with mp.spawn, the `if __name__ == "__main__":` block runs in the parent process only
        self.parent_only = bool(ctx.spawned)
        self.single = single_process_flags(ctx)
        self.flags = rank0_flags(ctx, self.aliases)

    def _statements(self, scope: str) -> set[ast.stmt]:
        if scope not in self._guarded:
            out: set[ast.stmt] = set()
            node = self.ctx.function_node(scope)
            decorators = getattr(node, "decorator_list", ())
            start = any(
                any(word in N.last_name(d).lower() for word in _DECORATORS) for d in decorators
            )
            self._walk(self.ctx.body_of(scope), start, out)
            self._guarded[scope] = out
        return self._guarded[scope]

    def _walk(self, body: list[ast.stmt], guarded: bool, out: set[ast.stmt]) -> None:
        for stmt in body:
            if guarded:
                out.add(stmt)
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if isinstance(stmt, ast.Assert) and single_process(stmt.test):
                guarded = True  # the rest of this block runs only when there is one process
                continue
            if isinstance(stmt, ast.If):
                kind = classify(stmt.test, self.aliases)
                if self.parent_only and is_main_guard(stmt.test):
                    kind = RANK0
                if kind == OTHER and self.single:
                    kind = self._single_process(stmt.test)
                if kind == OTHER and self.flags:
                    kind = self._flag(stmt.test)
                self._walk(stmt.body, guarded or kind == RANK0, out)
                self._walk(stmt.orelse, guarded or kind == NOT_RANK0, out)
                if kind == NOT_RANK0 and _exits(stmt.body):
                    guarded = True
                continue
            for block in _blocks(stmt):
                self._walk(block, guarded, out)

    def _flag(self, test: ast.AST) -> int:
        """`if args.save_logs:` where the file set `save_logs` from a rank-0 test only."""
        if isinstance(test, ast.Name | ast.Attribute):
            return RANK0 if N.last_name(test) in self.flags else OTHER
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return -self._flag(test.operand)
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            parts = [self._flag(v) or classify(v, self.aliases) for v in test.values]
            return RANK0 if RANK0 in parts else OTHER
        return OTHER

    def _single_process(self, test: ast.AST) -> int:
        """`if opt.evolve:` (an option asserted off when distributed) runs in one process."""
        if ast.dump(test) in self.single:
            return RANK0
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        if negated and isinstance(test, ast.UnaryOp) and ast.dump(test.operand) in self.single:
            return NOT_RANK0
        return OTHER

    def local(self, scope: str, node: ast.AST) -> bool:
        """Is `node` under a rank-0 guard inside its own function?"""
        stmt = self.ctx.statement_of(node)
        return stmt is not None and stmt in self._statements(scope)

    def conditional(self, node: ast.AST) -> bool:
        """Is `node` the rank-0 side of a conditional expression
        (`SummaryWriter() if rank == 0 else None`)?"""
        child = node
        for parent in self.ctx.ancestors(node):
            if isinstance(parent, ast.IfExp) and child is not parent.test:
                kind = classify(parent.test, self.aliases)
                if kind == (RANK0 if child is parent.body else NOT_RANK0):
                    return True
            if isinstance(parent, ast.stmt):
                return False
            child = parent
        return False

    def status(self, node: ast.Call) -> bool | None:
        """True: rank 0 only; False: runs on every rank on some path; None: cannot tell
        (inside a function this file never calls)."""
        scope = self.ctx.scope(node)
        if self.local(scope, node) or self.conditional(node):
            return True
        return holds_on_entry(self.ctx, scope, self.local)
