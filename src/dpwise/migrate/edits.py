"""An edit: what it changes, the lint rule whose pitfall it avoids, and its transformation of one
node of the original LibCST module. All edits of a migration are applied in one pass."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import libcst as cst

N = TypeVar("N", bound=cst.CSTNode)
# A rewrite is given the target as the pass rebuilt it (the same kind of node) and returns its
# replacement: a node, or several statements (a FlattenSentinel).
Replacement = cst.CSTNode | cst.FlattenSentinel[Any]
# what a module's body holds
Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement
# the body the process group is set up in: the module, a function's or the `__main__` block's
Block = cst.Module | cst.BaseSuite


@dataclass(frozen=True)
class Edit(Generic[N]):
    """`rewrite` replaces the target node; `before` / `after` are statements inserted around a
    target statement (or, for the module, after its imports: see `apply`); `needs` names the
    optional functions of the inserted block (`helper.OPTIONAL`) the edit's code calls."""

    what: str
    rule: str
    target: N
    rewrite: Callable[[N], Replacement] | None = None
    before: Sequence[cst.BaseStatement] = field(default_factory=tuple)
    after: Sequence[cst.BaseStatement] = field(default_factory=tuple)
    needs: tuple[str, ...] = ()


def statements(code: str) -> list[Statement]:
    """The statements of `code`; comment and blank lines before the first stay with it."""
    module = cst.parse_module(code)
    body = list(module.body)
    if body and module.header:
        body[0] = body[0].with_changes(leading_lines=[*module.header, *body[0].leading_lines])
    return body


def lines(suite: cst.BaseSuite) -> list[Statement]:
    """The statements of a block written over lines; none for one on its header's line
    (`for x in y: f(x)`, whose body is simple statements)."""
    if not isinstance(suite, cst.IndentedBlock):
        return []
    return [
        s for s in suite.body if isinstance(s, cst.SimpleStatementLine | cst.BaseCompoundStatement)
    ]


def _break(last: str) -> cst.ParenthesizedWhitespace:
    """A line break inside brackets; the next line takes the block's indent plus `last`."""
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(newline=cst.Newline()),
        empty_lines=[],
        indent=True,
        last_line=cst.SimpleWhitespace(last),
    )


def reflowed(call: cst.Call, width: int = 72) -> cst.Call:
    """A one-line call longer than `width` laid out one argument per line (with a trailing
    comma), as a formatter would; a call already spread over lines is left as it is."""
    from dpwise.lint.fix.cst import code

    text = code(call)
    if "\n" in text or len(text) <= width or not call.args:
        return call
    args = [
        a.with_changes(comma=cst.Comma(whitespace_after=_break("    "))) for a in call.args[:-1]
    ]
    args.append(call.args[-1].with_changes(comma=cst.Comma(whitespace_after=_break(""))))
    args = [a.with_changes(whitespace_after_arg=cst.SimpleWhitespace("")) for a in args]
    return call.with_changes(args=args, whitespace_before_args=_break("    "))


def indented(expression: str) -> cst.BaseExpression:
    """`expression` (written over several lines, inside brackets) parsed so that its lines
    take the indent of the block it is put in."""

    class _Indent(cst.CSTTransformer):
        def leave_ParenthesizedWhitespace(
            self,
            original_node: cst.ParenthesizedWhitespace,
            updated_node: cst.ParenthesizedWhitespace,
        ) -> cst.ParenthesizedWhitespace:
            return updated_node.with_changes(indent=True)

    parsed = cst.parse_expression(expression).visit(_Indent())
    assert isinstance(parsed, cst.BaseExpression)  # re-indenting keeps the expression
    return parsed


class _Apply(cst.CSTTransformer):
    def __init__(self, edits: Sequence[Edit]) -> None:
        self._by_target: dict[int, list[Edit[Any]]] = {}
        for edit in edits:
            self._by_target.setdefault(id(edit.target), []).append(edit)

    def on_leave(  # type: ignore[override]  # libcst types a leave as returning the node's own kind; an edit may return statements
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> Replacement:
        edits = self._by_target.get(id(original_node))
        if not edits:
            return updated_node
        node: Replacement = updated_node
        for edit in edits:
            if edit.rewrite is not None:
                node = edit.rewrite(node)
        before = [s for e in edits for s in e.before]
        after = [s for e in edits for s in e.after]
        if isinstance(node, cst.Module) and isinstance(original_node, cst.Module):
            return _after_imports(node, original_node, after)
        if not (before or after):
            return node
        nodes = list(node.nodes) if isinstance(node, cst.FlattenSentinel) else [node]
        lines = getattr(nodes[0], "leading_lines", None)
        if before and lines:  # the blank line above moves up
            before[0] = before[0].with_changes(leading_lines=lines)
            nodes[0] = nodes[0].with_changes(leading_lines=())
        return cst.FlattenSentinel([*before, *nodes, *after])


def _after_imports(
    module: cst.Module, original: cst.Module, block: list[cst.BaseStatement]
) -> cst.Module:
    """`block` inserted after the module's last top-level import line (at the top if none)."""
    imports = [
        i
        for i, s in enumerate(original.body)
        if isinstance(s, cst.SimpleStatementLine)
        and all(isinstance(x, cst.Import | cst.ImportFrom) for x in s.body)
    ]
    at = imports[-1] + 1 if imports else 0
    body = list(module.body)
    if at < len(body) and block:  # two blank lines between the inserted functions and the rest
        blank = [cst.EmptyLine()] * max(0, 2 - len(body[at].leading_lines))
        body[at] = body[at].with_changes(leading_lines=[*blank, *body[at].leading_lines])
    return module.with_changes(body=[*body[:at], *block, *body[at:]])


def apply(module: cst.Module, edits: Sequence[Edit[Any]]) -> cst.Module:
    return module.visit(_Apply(edits))
