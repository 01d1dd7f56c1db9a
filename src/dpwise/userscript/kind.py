"""How a script trains, read from its text with lint's analysis (never imported): one process per
rank under torchrun, processes it starts itself (`mp.spawn`), or one process, with or without
`nn.DataParallel`. A command line that names torchrun is run under torchrun whatever the script
looks like, and one that names python runs one process (a script that starts its process group
only when torchrun set RANK, as nanoGPT's, trains without DDP there): the user's launch is
theirs. Only a bare path is launched as the script's text says."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Literal

from dpwise.errors import DpwiseError
from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.project import Project
from dpwise.userscript.command import ScriptCommand

Kind = Literal["torchrun", "spawns", "dataparallel", "single"]


@dataclass(frozen=True)
class Launch:
    """A script's launch: its kind, and the line of the script that decided it (None: the
    command line did, or nothing distributed was found)."""

    kind: Kind
    line: int | None = None

    @property
    def distributed(self) -> bool:
        """One process per rank: the world size is a process count."""
        return self.kind in ("torchrun", "spawns")


def launch_of(command: ScriptCommand) -> Launch:
    """The launch of ``command``: torchrun's where it names torchrun, else the script's own."""
    if command.launcher == "torchrun":
        return Launch("torchrun")
    ctx = _context(command)
    spawns = ctx.calls_to(N.SPAWN)
    if spawns:
        return Launch("spawns", spawns[0].lineno)
    if command.launcher == "path" and (ctx.is_ddp_script or ctx.starts_group_by_helper):
        first = (ctx.ddp_calls or ctx.init_calls or list(ctx.group_helper_calls()))[:1]
        return Launch("torchrun", first[0].lineno if first else None)
    wraps = ctx.calls_to(N.DATA_PARALLEL | N.DATA_PARALLEL_FUNCTIONAL)
    if wraps:
        return Launch("dataparallel", wraps[0].lineno)
    return Launch("single")


def _context(command: ScriptCommand) -> FileContext:
    path = str(command.script)
    try:
        source = command.script.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=path)
    except (OSError, UnicodeDecodeError) as exc:
        raise DpwiseError(f"--script {command.given!r}: cannot read {path}: {exc}") from None
    except SyntaxError as exc:
        raise DpwiseError(
            f"--script {command.given!r}: {path} is not valid Python (line {exc.lineno}: {exc.msg})"
        ) from None
    return FileContext(path, source, tree, Project())


def unsharded_loader(command: ScriptCommand) -> str | None:
    """Where the script builds a loader without a DistributedSampler, as lint's
    `missing-distributed-sampler` says it ("ddp_train.py line 25, `get_dataloader` (common.py:18)
    …"); None where lint finds none."""
    from dpwise.lint.checker import lint_paths

    found = lint_paths([str(command.script)], select="missing-distributed-sampler")
    if not found:
        return None
    first = found[0]
    return f"{first.name} at {command.script.name} line {first.line}: {first.message}"
