"""Rewrites of one call, on LibCST's concrete syntax tree: comments, quotes, line breaks and
trailing commas inside the call are kept; only the arguments a fix names change.

A fixer takes a node's exact source text (`Text.segment`), rewrites it here and replaces that span
of the file, so everything outside the node is untouched. LibCST is imported on first use: a lint
run that computes no fix never loads it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dpwise.lint.fix.edits import Text
from dpwise.lint.model import Edit

if TYPE_CHECKING:
    import libcst as cst


def _cst() -> Any:
    """LibCST, imported when a fix first needs it (a lint run without --fix never does)."""
    import libcst

    return libcst


def _before(call: cst.Call, args: list[cst.Arg]) -> cst.BaseParenthesizableWhitespace:
    """The whitespace before the last of `args`: after the previous argument's comma (every
    argument but the last has one), else after the call's opening bracket."""
    if len(args) < 2:
        return call.whitespace_before_args
    from libcst import Comma

    comma = args[-2].comma
    assert isinstance(comma, Comma), "an argument followed by another has its comma"
    return comma.whitespace_after


def parse_call(segment: str) -> cst.Call | None:
    """The call written in `segment`, or None if it is not one call (or LibCST cannot parse it)."""
    lib = _cst()
    try:
        node = lib.parse_expression(segment)
    except lib.ParserSyntaxError:
        return None
    return node if isinstance(node, lib.Call) and not node.lpar else None


def code(node: cst.CSTNode) -> str:
    return _cst().Module(body=[]).code_for_node(node)


def expression(text: str) -> cst.BaseExpression:
    return _cst().parse_expression(text)


def keyword_index(call: cst.Call, name: str) -> int | None:
    for index, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == name:
            return index
    return None


def with_keyword(call: cst.Call, name: str, value: str) -> cst.Call:
    """`name=value` set: the existing keyword's value replaced, or a keyword appended after the
    last argument in the call's own layout (one line, or one argument per line)."""
    lib = _cst()
    index = keyword_index(call, name)
    if index is not None:
        args = list(call.args)
        args[index] = args[index].with_changes(value=expression(value))
        return call.with_changes(args=args)
    nothing = lib.SimpleWhitespace("")
    new = lib.Arg(
        keyword=lib.Name(name),
        value=expression(value),
        equal=lib.AssignEqual(whitespace_before=nothing, whitespace_after=nothing),
    )
    return append(call, new)


def append(call: cst.Call, new: cst.Arg) -> cst.Call:
    lib = _cst()
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if not isinstance(last.comma, lib.Comma):
        closing = last.whitespace_after_arg
        if isinstance(closing, lib.ParenthesizedWhitespace):  # `f(\n    a\n)`: a line of its own
            indent = _indent(lib, _before(call, args), closing)
            line = closing.with_changes(first_line=lib.TrailingWhitespace(), last_line=indent)
            args[-1] = last.with_changes(
                comma=lib.Comma(whitespace_after=line),
                whitespace_after_arg=lib.SimpleWhitespace(""),
            )
            return call.with_changes(args=[*args, new.with_changes(whitespace_after_arg=closing)])
        # `f(a)` -> `f(a, new)`
        args[-1] = last.with_changes(comma=lib.Comma(whitespace_after=lib.SimpleWhitespace(" ")))
        return call.with_changes(args=[*args, new])
    after = last.comma.whitespace_after
    if not isinstance(after, lib.ParenthesizedWhitespace):  # `f(a, )` -> `f(a, new, )`
        args[-1] = last.with_changes(
            comma=last.comma.with_changes(whitespace_after=lib.SimpleWhitespace(" "))
        )
        return call.with_changes(args=[*args, new.with_changes(comma=last.comma)])
    # One argument per line with a trailing comma: the new argument gets a line of its own at the
    # arguments' indentation; a comment after the old last argument stays on that argument's line.
    indent = _indent(lib, _before(call, args), after)
    args[-1] = last.with_changes(
        comma=last.comma.with_changes(whitespace_after=after.with_changes(last_line=indent))
    )
    closing = lib.ParenthesizedWhitespace(
        first_line=lib.TrailingWhitespace(),
        empty_lines=[],
        indent=after.indent,
        last_line=after.last_line,
    )
    new = new.with_changes(comma=lib.Comma(whitespace_after=closing))
    return call.with_changes(args=[*args, new])


def _indent(
    lib: Any, before: cst.BaseParenthesizableWhitespace, after: cst.ParenthesizedWhitespace
) -> cst.SimpleWhitespace:
    """The arguments' indentation: the line break before the previous argument's."""
    return before.last_line if isinstance(before, lib.ParenthesizedWhitespace) else after.last_line


def without_arg(call: cst.Call, index: int) -> cst.Call:
    """The call without its argument at `index` (with that argument's comma and a comment after
    it); when the last argument goes, the one before it takes over its comma (so a trailing comma
    stays one) but keeps its own comment."""
    lib = _cst()
    args = list(call.args)
    removed = args.pop(index)
    if index == len(args) and args:
        prev = args[-1]
        mine: Any = prev.comma.whitespace_after if isinstance(prev.comma, lib.Comma) else None

        def keep_mine(space: Any) -> Any:
            both = isinstance(mine, lib.ParenthesizedWhitespace) and isinstance(
                space, lib.ParenthesizedWhitespace
            )
            return space.with_changes(first_line=mine.first_line) if both else space

        comma = removed.comma
        if isinstance(comma, lib.Comma):
            comma = comma.with_changes(whitespace_after=keep_mine(comma.whitespace_after))
        args[-1] = prev.with_changes(
            comma=comma, whitespace_after_arg=keep_mine(removed.whitespace_after_arg)
        )
    return call.with_changes(args=args)


def with_first(call: cst.Call, value: str) -> cst.Call:
    """A positional argument put first: `GradScaler(init_scale=1)` -> `GradScaler("cuda", ...)`."""
    lib = _cst()
    new = lib.Arg(value=expression(value))
    if not call.args:
        return call.with_changes(args=[new])
    space = call.whitespace_before_args
    if isinstance(space, lib.ParenthesizedWhitespace):  # one argument per line
        space = space.with_changes(first_line=lib.TrailingWhitespace(), empty_lines=[])
    else:
        space = lib.SimpleWhitespace(" ")
    comma = lib.Comma(whitespace_after=space)
    return call.with_changes(args=[new.with_changes(comma=comma), *call.args])


def positional_as_keywords(call: cst.Call, names: tuple[str, ...]) -> cst.Call | None:
    """Positional arguments given their parameters' names (for a callee whose parameter order
    changed); None if there are more positional arguments than names, or a `*args`."""
    lib = _cst()
    nothing = lib.SimpleWhitespace("")
    args = []
    for index, arg in enumerate(call.args):
        if arg.keyword is not None or arg.star == "**":
            args.append(arg)
            continue
        if arg.star or index >= len(names):
            return None
        equal = lib.AssignEqual(whitespace_before=nothing, whitespace_after=nothing)
        args.append(arg.with_changes(keyword=lib.Name(names[index]), equal=equal))
    return call.with_changes(args=args)


def with_func(call: cst.Call, func: str) -> cst.Call:
    return call.with_changes(func=expression(func))


def call_edit(
    text: Text, call: ast.Call, rewrite: Callable[[cst.Call], cst.Call | None]
) -> Edit | None:
    """The edit that replaces `call` with `rewrite` of it; None if LibCST cannot read the call's
    text as one call or `rewrite` declines."""
    node = parse_call(text.segment(call))
    new = rewrite(node) if node is not None else None
    return text.replace(call, code(new)) if new is not None else None


def _text_of(node: cst.BaseExpression) -> str | None:
    lib = _cst()
    if isinstance(node, lib.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def dict_edit(text: Text, node: ast.Dict, key: str, value: str) -> Edit | None:
    """The edit that sets `key: value` in a dict display: the existing entry's value replaced,
    or an entry appended in the display's own layout."""
    lib = _cst()
    try:
        tree = lib.parse_expression(text.segment(node))
    except lib.ParserSyntaxError:
        return None
    if not isinstance(tree, lib.Dict) or tree.lpar:
        return None
    wanted = _text_of(expression(key))
    items = list(tree.elements)
    for index, item in enumerate(items):
        if isinstance(item, lib.DictElement) and _text_of(item.key) == wanted:
            items[index] = item.with_changes(value=expression(value))
            return text.replace(node, code(tree.with_changes(elements=items)))
    space = lib.SimpleWhitespace(" ")
    new = lib.DictElement(
        key=expression(key), value=expression(value), whitespace_after_colon=space
    )
    if not items:
        items = [new]
    elif not isinstance(items[-1].comma, lib.Comma):
        items[-1] = items[-1].with_changes(comma=lib.Comma(whitespace_after=space))
        items.append(new)
    else:
        last = items[-1]
        closing = tree.rbrace.whitespace_before
        if isinstance(closing, lib.ParenthesizedWhitespace):  # one entry per line, then `}`
            before = (
                items[-2].comma.whitespace_after if len(items) > 1 else tree.lbrace.whitespace_after
            )
            line = closing.with_changes(last_line=_indent(lib, before, closing))
            items[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=line))
            items.append(new.with_changes(comma=lib.Comma()))
            end = closing.with_changes(first_line=lib.TrailingWhitespace(), empty_lines=[])
            tree = tree.with_changes(rbrace=tree.rbrace.with_changes(whitespace_before=end))
        else:
            items[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=space))
            items.append(new.with_changes(comma=last.comma))
    return text.replace(node, code(tree.with_changes(elements=items)))
