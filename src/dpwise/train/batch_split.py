"""How the global batch splits over processes: every world size must divide it.

One check for `dpwise train` (one world size) and `dpwise compare` (every world size it runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dpwise.errors import DpwiseError


def nearest_multiples(value: int, k: int) -> str:
    """The positive multiples of ``k`` just below and above ``value``: "248 or 252"."""
    low = (value // k) * k
    return " or ".join(str(m) for m in (low, low + k) if m > 0)


def check_batch_divides(batch: int, sizes: Sequence[int], *, name_sizes: bool = False) -> None:
    """Raise unless every world size in ``sizes`` divides the global batch. The message names the
    first that does not and the multiples that would do; ``name_sizes`` also lists every size
    (compare, which runs them all)."""
    bad = [w for w in sizes if batch % w]
    if not bad:
        return
    step = math.lcm(*sizes)
    every = f" so every world size in {list(sizes)} divides it" if name_sizes else ""
    raise DpwiseError(
        f"--batch-size {batch} is not divisible by world size {bad[0]}; use a multiple of "
        f"{step}{every} (e.g. {nearest_multiples(batch, step)})"
    )
