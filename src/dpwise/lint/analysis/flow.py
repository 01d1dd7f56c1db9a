"""'Has X happened before this point?' within a function and across same-file calls.

The order is source order inside a function body (branches are not told apart: an
`init_process_group` under `if not dist.is_initialized():` counts). A call to a same-file function
counts as whatever that function (transitively) does, with cycle protection. A function's entry
context is judged from its same-file call sites: X holds at entry when every call site is preceded
by X (or is itself entered with X). A function started in a new process (`mp.spawn(train, ...)`,
`Process(target=train)`) is entered with nothing done; a function the file never calls (or only
hands to something else, such as an RPC or a callback list) is unknown, and rules stay silent.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.index import MODULE, pos

CallPredicate = Callable[[FileContext, ast.Call], bool]
SiteCheck = Callable[[str, ast.Call], bool]

SETUP_WORDS = ("setup", "set_up", "init_dist", "distributed", "process_group", "ddp")


def external_setup(ctx: FileContext, call: ast.Call) -> bool:
    """A call into another module that, by its name, sets up distributed training
    (`init_distributed_mode(args)`, `utils.setup_ddp()`, `deepspeed.init_distributed()`)."""
    if ctx.callee(call) is not None:
        return False
    q = ctx.qual(call.func) or ""
    if q.startswith("torch."):
        return False
    name = N.last_name(call.func).lower()
    if name.startswith(("is_", "get_")) or name.endswith("sampler"):
        return False
    return any(word in name for word in SETUP_WORDS)


def is_init(ctx: FileContext, call: ast.Call) -> bool:
    return ctx.qual(call.func) in N.INIT or external_setup(ctx, call)


def is_set_device(ctx: FileContext, call: ast.Call) -> bool:
    return ctx.qual(call.func) in N.SET_DEVICE or external_setup(ctx, call)


class Flow:
    """Happens-before for one kind of event (init, set_device) in one file."""

    def __init__(self, ctx: FileContext, event: CallPredicate) -> None:
        self.ctx = ctx
        self.event = event
        self._reaches: dict[str, bool] = {}

    def reaches(self, key: str, visiting: frozenset[str] = frozenset()) -> bool:
        """Does calling function `key` make the event happen (somewhere inside it)?"""
        if key in self._reaches:
            return self._reaches[key]
        if key in visiting:
            return False
        inner = visiting | {key}
        result = any(self.does(c, inner) for c in self.ctx.idx.calls.get(key, ()))
        self._reaches[key] = result
        return result

    def does(self, call: ast.Call, visiting: frozenset[str] = frozenset()) -> bool:
        if self.event(self.ctx, call):
            return True
        key = self.ctx.callee(call)
        return key is not None and self.reaches(key, visiting)

    def before(self, scope: str, node: ast.AST) -> bool:
        """Did the event happen earlier in `scope`'s own body (following same-file calls)?"""
        limit, visiting = pos(node), frozenset({scope})
        for call in self.ctx.idx.calls.get(scope, ()):
            if pos(call) >= limit:
                return False
            if self.does(call, visiting):
                return True
        return False

    def on_entry(self, scope: str) -> bool | None:
        return holds_on_entry(self.ctx, scope, self.before)

    def established(self, scope: str, node: ast.AST) -> bool | None:
        """True: happened before `node` on every known path; False: missing on some path;
        None: unknown (the function is never called in this file)."""
        if self.before(scope, node):
            return True
        return self.on_entry(scope)


def holds_on_entry(
    ctx: FileContext, scope: str, site_ok: SiteCheck, visiting: frozenset[str] = frozenset()
) -> bool | None:
    """Does a property hold whenever `scope` is entered, judged from its same-file call sites?"""
    if scope == MODULE or ctx.spawned.get(scope):
        return False
    if scope in visiting:
        return True
    sites = ctx.callers.get(scope)
    if not sites:
        return None
    inner = visiting | {scope}
    for caller, call in sites:
        if site_ok(caller, call):
            continue
        if holds_on_entry(ctx, caller, site_ok, inner) is False:
            return False
    return True
