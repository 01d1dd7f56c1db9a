"""Which modules make a training-mode forward random, found by behaviour rather than by class name.

The same input and state go through the model under several seeds. A module is named when its own
code advanced a global random generator (Dropout, DropPath, a functional F.dropout inside an
attention block, a home-made ``torch.rand`` skip), or when its output changed while its input did
not and none of its sub-modules explains the change (randomness from a source dpwise cannot see).
"""

from __future__ import annotations

from dpwise.diagnosis.calls import Call, same


def _differing(first: list[Call], other: list[Call]) -> list[Call]:
    """Calls of ``first`` whose matching call in ``other`` had the same input, another output."""
    theirs = {c.key: c for c in other}
    return [
        c
        for c in first
        if c.key in theirs
        # inputs bit for bit: a tiny upstream difference that a normalisation then magnifies
        # is not randomness of this module
        and same(c.inputs, theirs[c.key].inputs, rel=0.0)
        and not same(c.output, theirs[c.key].output)
    ]


def _innermost(calls: list[Call], flagged: list[Call]) -> list[Call]:
    """Flagged calls with no flagged call inside them."""
    index = {id(c): i for i, c in enumerate(calls)}
    starts = sorted(index[id(c)] for c in flagged)
    inner = []
    for c in flagged:
        start = index[id(c)]
        if not any(start < s < c.end for s in starts):
            inner.append(c)
    return inner


def stochastic_modules(runs: list[list[Call]]) -> list[str]:
    """Names of the modules that behave randomly across ``runs`` (one call list per seed)."""
    names = {c.name for run in runs for c in run if c.drew}
    first = runs[0]
    for other in runs[1:]:
        names |= {c.name for c in _innermost(first, _differing(first, other))}
    return sorted(names)
