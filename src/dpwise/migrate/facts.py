"""What a migration needs to know about a script, read from its LibCST module: the DataParallel
wrap, device placements, loaders, epoch loops, prints and saves, and the patterns it refuses."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from dpwise.lint.analysis.names import WRITING_METHODS

_SPAWNS = ("spawn", "start_processes", "Process", "Pool")
_MP_MODULES = ("mp", "multiprocessing", "torch.multiprocessing")
_DEVICE = re.compile(r"cuda:(\d+)")
_EVAL = ("val", "test", "eval")
_LOGGING = ("logging", "logger", "log")
_LOG_LEVELS = ("debug", "info", "warning", "warn", "error", "critical", "exception")
# a statement that writes output: one process does it (`.save_pretrained(...)` and the other
# methods `dpwise lint` reports are in WRITING_METHODS)
_WRITES: tuple[str, ...] = (
    "print",
    "torch.save",
    "np.save",
    "numpy.save",
    "json.dump",
    "pickle.dump",
)
_WRITES += ("shutil.copy", "shutil.copy2", "shutil.copyfile")


def dotted(node: cst.BaseExpression) -> str:
    """`torch.nn.DataParallel` for the expression `torch.nn.DataParallel`; "" for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""


def last(node: cst.BaseExpression) -> str:
    return dotted(node).rsplit(".", 1)[-1]


@dataclass
class Facts:
    """Nodes of the parsed module, by role (each the original node, for identity matching)."""

    data_parallel: list[tuple[cst.SimpleStatementLine, cst.Call, str]] = field(default_factory=list)
    placements: list[cst.Call] = field(default_factory=list)  # `.to(...)` / `.cuda(...)`
    # `model = Net().cuda()`: a module built and placed, outside any loop (no DataParallel)
    placed_models: list[tuple[cst.SimpleStatementLine, str]] = field(default_factory=list)
    loaders: list[tuple[cst.SimpleStatementLine, str]] = field(default_factory=list)
    # `DataLoader(...)` calls here, with their statement when one assigns the call to a name
    dataloader_calls: list[tuple[cst.Call, cst.SimpleStatementLine | None, str]] = field(
        default_factory=list
    )
    loops: list[cst.For] = field(default_factory=list)
    while_loops: list[cst.While] = field(default_factory=list)
    side_effects: list[cst.SimpleStatementLine] = field(default_factory=list)
    state_dicts: list[cst.Call] = field(default_factory=list)
    last_import: cst.CSTNode | None = None
    refusals: list[str] = field(default_factory=list)
    device_literals: dict[str, int] = field(default_factory=dict)  # device index -> first line
    defined: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)


class _Reader(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        self.facts = Facts()
        self._stack: list[cst.CSTNode] = []
        self._statement: cst.SimpleStatementLine | None = None
        self._loops = 0
        self._spawners: set[str] = set()

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def _refuse(self, node: cst.CSTNode, reason: str) -> None:
        self.facts.refusals.append(f"line {self._line(node)}: {reason}")

    def visit_Module(self, node: cst.Module) -> None:
        for stmt in node.body:
            if isinstance(stmt, cst.SimpleStatementLine) and all(
                isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body
            ):
                self.facts.last_import = stmt

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._statement = node

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        """`from torch.multiprocessing import spawn as launch`: `launch(...)` starts processes."""
        module = dotted(node.module) if node.module is not None else ""
        if module not in _MP_MODULES or isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            if dotted(alias.name) in _SPAWNS:
                bound = alias.asname.name if alias.asname is not None else alias.name
                self._spawners.add(dotted(bound))

    def leave_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._statement = None

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if any(last(base.value) == "IterableDataset" for base in node.bases):
            self._refuse(
                node,
                f"`{node.name.value}` is an IterableDataset: DistributedSampler "
                "needs a map-style dataset; shard the stream by rank yourself",
            )
        self.facts.defined.add(node.name.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.facts.defined.add(node.name.value)

    def visit_Name(self, node: cst.Name) -> None:
        self.facts.names.add(node.value)

    def visit_For(self, node: cst.For) -> None:
        self.facts.loops.append(node)
        self._loops += 1

    def leave_For(self, node: cst.For) -> None:
        self._loops -= 1

    def visit_While(self, node: cst.While) -> None:
        self.facts.while_loops.append(node)

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted(node.func)
        tail = node.func.attr.value if isinstance(node.func, cst.Attribute) else name
        for check in (
            self._refusal,
            self._wrap,
            self._placement,
            self._dataloader,
            self._state_dict,
            self._effect,
        ):
            check(node, name, tail)

    def _refusal(self, node: cst.Call, name: str, tail: str) -> None:
        keywords = {a.keyword.value for a in node.args if a.keyword}
        own = keywords & {"sampler", "batch_sampler"}
        if tail == "DataLoader" and own and ("batch_sampler" in own or not plain_sampler(node)):
            given = sorted(own)[0]
            self._refuse(
                node,
                f"the DataLoader is given its own `{given}=`: choose how it "
                "shards across processes (DistributedSampler) by hand",
            )
        if (tail in _SPAWNS and name.rsplit(".", 1)[0] in _MP_MODULES) or name in self._spawners:
            self._refuse(
                node,
                f"the script starts its own processes (`{name}`): torchrun "
                "starts them after migration; remove the spawning first",
            )
        if tail in ("init_process_group", "DistributedDataParallel", "DDP"):
            self._refuse(
                node,
                f"the script already uses `{tail}`: it is distributed already; "
                "`dpwise lint` checks it",
            )

    def _wrap(self, node: cst.Call, name: str, tail: str) -> None:
        if tail == "DataParallel" and self._statement is not None and node.args:
            target = _assigned_name(self._statement)
            self.facts.data_parallel.append((self._statement, node, target))

    def _placement(self, node: cst.Call, name: str, tail: str) -> None:
        if not isinstance(node.func, cst.Attribute) or tail not in ("to", "cuda"):
            return
        self.facts.placements.append(node)
        stmt = self._statement
        first = stmt.body[0] if stmt is not None else None
        built = isinstance(node.func.value, cst.Call) and not self._loops
        target = _assigned_name(stmt) if stmt is not None else ""
        assigned = stmt is not None and isinstance(first, cst.Assign) and first.value is node
        if built and assigned and stmt is not None and target:
            self.facts.placed_models.append((stmt, target))
        for arg in node.args:
            if isinstance(arg.value, cst.SimpleString):
                found = _DEVICE.fullmatch(str(arg.value.evaluated_value))
                if found:
                    self.facts.device_literals.setdefault(found.group(1), self._line(node))
            if tail == "cuda" and isinstance(arg.value, cst.Integer):
                self.facts.device_literals.setdefault(arg.value.value, self._line(node))

    def _dataloader(self, node: cst.Call, name: str, tail: str) -> None:
        stmt = self._statement
        target = _assigned_name(stmt) if stmt is not None else ""
        if tail != "DataLoader" or any(w in target for w in _EVAL):
            return
        first = stmt.body[0] if stmt is not None else None  # an Assign where there is a target
        assigns = target and isinstance(first, cst.Assign) and first.value is node
        self.facts.dataloader_calls.append((node, stmt if assigns else None, target))

    def _state_dict(self, node: cst.Call, name: str, tail: str) -> None:
        if tail in ("state_dict", "load_state_dict") and isinstance(node.func, cst.Attribute):
            self.facts.state_dicts.append(node)

    def _effect(self, node: cst.Call, name: str, tail: str) -> None:
        stmt = self._statement
        if stmt is None or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr):
            return
        if stmt.body[0].value is not node:
            return
        head = name.split(".", 1)[0]
        writes = name in _WRITES or (name != tail and tail in WRITING_METHODS)  # `.savefig(...)`
        if writes or (head in _LOGGING and tail in _LOG_LEVELS):
            self.facts.side_effects.append(stmt)


def plain_sampler(loader: cst.Call) -> str | None:
    """`DataLoader(ds, sampler=RandomSampler(ds))` says `shuffle=True` the long way (and
    `SequentialSampler(ds)` says `shuffle=False`): "True" / "False" for those, else None."""
    given = next((a for a in loader.args if a.keyword and a.keyword.value == "sampler"), None)
    value = given.value if given is not None else None
    if not isinstance(value, cst.Call) or len(value.args) != 1 or value.args[0].keyword:
        return None
    return {"RandomSampler": "True", "SequentialSampler": "False"}.get(last(value.func))


def _assigned_name(stmt: cst.SimpleStatementLine) -> str:
    first = stmt.body[0]
    if isinstance(first, cst.Assign) and len(first.targets) == 1:
        return dotted(first.targets[0].target)
    return ""


def read(module: cst.Module) -> Facts:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    reader = _Reader()
    wrapper.visit(reader)
    facts = reader.facts
    if len(facts.device_literals) > 1:
        devices = ", ".join(f"cuda:{d}" for d in sorted(facts.device_literals))
        line = sorted(facts.device_literals.values())[1]
        facts.refusals.append(
            f"line {line}: the model is placed on several devices ({devices}): model "
            "parallel across devices needs a device map per process"
        )
    facts.loaders = _loader_assignments(module)
    return facts


def _loader_assignments(module: cst.Module) -> list[tuple[cst.SimpleStatementLine, str]]:
    """`name = ...` statements whose value builds a loader (`DataLoader(...)`, or a call of a
    function named like `*loader*`), and the assigned name."""
    found = []

    class _Assigns(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
            first = node.body[0]
            if not isinstance(first, cst.Assign) or not isinstance(first.value, cst.Call):
                return
            target = _assigned_name(node)
            func = last(first.value.func).lower()
            if target and "loader" in func and not any(w in target for w in _EVAL):
                found.append((node, target))

    module.visit(_Assigns())
    return found
