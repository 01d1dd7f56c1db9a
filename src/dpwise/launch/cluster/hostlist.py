"""SLURM's hostlist syntax, expanded without `scontrol`: ``gpu[01-04,07]``, ``a-[1-2]-[3-4]``,
several groups separated by commas (``n1,n2,m[3-4]``).

The rules are python-hostlist's (the parser HPC tools use; the tests hold this one to it on the
same cases): a range keeps its low bound's zero padding (``x[08-11]``: x08 … x11), several
bracket groups multiply (``a-[1-2]-[3-4]``: a-1-3, a-1-4, a-2-3, a-2-4), empty items are
skipped, a name met twice is kept once, in the order first met. Nested or unbalanced brackets,
a range that runs backwards and anything but digits in a range are refused.

A list is counted before it is expanded: one that names more than MAX_SIZE hosts in all (a
hostile or corrupted variable: 8,194 items of 100,000 hosts each) is refused without a host made.
"""

from __future__ import annotations

import re

_RANGE = re.compile(r"(\d+)(?:-(\d+))?\Z")
# Hosts one list may name (python-hostlist's limit for one item, here for the whole list too):
# more than any cluster has nodes; expanding this many takes a fraction of a second.
MAX_SIZE = 100_000
_MAX_DIGITS = 18  # a range's bound: far above any node number, far below int()'s own limit


class BadHostlist(ValueError):
    """The text is not a hostlist; the message says what is wrong."""


def expand(text: str) -> list[str]:
    """Every host name of ``text``, in order, each once (counted first: see size)."""
    items = _top_level_items(text)
    _count(items)
    hosts: list[str] = []
    for item in items:
        hosts.extend(_product(item))
    return list(dict.fromkeys(hosts))


def size(text: str) -> int:
    """How many names ``text`` holds, a name met twice counted twice, without expanding it
    (BadHostlist past MAX_SIZE)."""
    return _count(_top_level_items(text))


def _count(items: list[str]) -> int:
    total = 0
    for item in items:
        total += _item_size(item)
        if total > MAX_SIZE:
            raise BadHostlist(f"it names more than {MAX_SIZE} hosts")
    return total


def first(text: str) -> str:
    """The first host of ``text`` (BadHostlist when it names none)."""
    hosts = expand(text)
    if not hosts:
        raise BadHostlist("it names no host")
    return hosts[0]


def _top_level_items(text: str) -> list[str]:
    """``text`` split at the commas outside brackets; brackets checked for balance."""
    items, part, depth = [], "", 0
    for char in text:
        if char == "," and depth == 0:
            items.append(part)
            part = ""
            continue
        part += char
        if char == "[":
            depth += 1
            if depth > 1:
                raise BadHostlist("nested brackets")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise BadHostlist("unbalanced brackets")
    if depth:
        raise BadHostlist("unbalanced brackets")
    items.append(part)
    return [item for item in items if item]


def _item_size(item: str) -> int:
    """How many names one item holds: its bracket groups' sizes multiplied."""
    size = 1
    for group in re.findall(r"\[([^]]*)\]", item):
        size *= sum(int(hi or lo) - int(lo) + 1 for lo, hi in map(_bounds, group.split(",")))
        if size > MAX_SIZE:
            raise BadHostlist(f"it names more than {MAX_SIZE} hosts")
    return size


def _product(item: str) -> list[str]:
    """One item: literal text and bracket groups, the groups multiplied left to right."""
    names = [""]
    for literal, inside in re.findall(r"([^[]*)(?:\[([^]]*)\])?", item):
        numbers = _numbers(inside) if inside else [""]
        names = [name + literal + number for name in names for number in numbers]
    return names


def _bounds(part: str) -> tuple[str, str | None]:
    """LOW and HIGH (None for a single number) of one range of a bracket group."""
    match = _RANGE.match(part)
    if match is None:
        raise BadHostlist(f"bad range {part!r}: give numbers or LOW-HIGH, e.g. [01-04,07]")
    low, high = match.group(1), match.group(2)
    if max(len(low), len(high or "")) > _MAX_DIGITS:
        raise BadHostlist(f"range {part[:40]!r}… has numbers over {_MAX_DIGITS} digits")
    if high is not None and int(low) > int(high):
        raise BadHostlist(f"range {part} runs backwards")
    return low, high


def _numbers(inside: str) -> list[str]:
    """The numbers of one bracket group (``01-04,07``), each padded as its range's low bound."""
    numbers = []
    for part in inside.split(","):
        low, high = _bounds(part)
        high = high or low
        numbers += [str(i).zfill(len(low)) for i in range(int(low), int(high) + 1)]
    return numbers
