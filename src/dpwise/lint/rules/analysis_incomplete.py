"""DPW022 analysis-incomplete: the analysis of a file stopped at one of its bounds (the time a file
may take, or how many modules a set-up helper is followed through), so a finding may be missing.
The checker reports the time bound; `check` reports the depth bound. Always on unless ignored."""

from __future__ import annotations

import re
from collections.abc import Iterator

from dpwise.lint.analysis.context import FileContext
from dpwise.lint.model import Hit, Rule

# Only a script that speaks of distributed training, and only its helpers named like a set-up,
# are worth a note: a bound hit while following `get_wandb_api_key` says nothing useful.
_DISTRIBUTED = ("torch.distributed", "DistributedDataParallel", "local_rank", "LOCAL_RANK",
                "world_size", "WORLD_SIZE", "init_dist", "dist_url")  # fmt: skip
_SETUP = re.compile(r"init|setup|set_up|dist|launch|option|config|env|prepare|main", re.I)
FILE_BUDGET_S = 2.0  # the longest one file's rules may take together
CALL_DEPTH_SHOWN = 4  # analysis.project.CALL_DEPTH, for the docs (a test holds them equal)

RULE = Rule(
    code="DPW022",
    name="analysis-incomplete",
    severity="info",
    summary="the analysis of the file stopped at a bound (its time, or a helper's depth)",
    message="the analysis of this file stopped at a bound: a finding may be missing",
    help="nothing to change in the code; split a very large file, or check the deep helper by hand",
    docs=f"""\
## What it does
Says that the analysis of a file stopped at one of its bounds, rather than passing the file in
silence:

- **time**: the rules checking one file stop once they have taken {FILE_BUDGET_S:g} s together
  (a file near the 1 MiB size limit built to be slow); the finding names how many rules ran.
  The rules run in code order, so the first ones are never skipped.
- **depth**: a set-up helper of the script (`init_dist(launcher)`) is followed through the
  project's modules to `init_process_group`, at most {CALL_DEPTH_SHOWN} modules deep; when the
  search reached that depth without finding the group, the finding names the helper (in a script
  that speaks of distributed training, for helpers named like a set-up: `init…`, `setup…`,
  `…dist…`, `launch…`, `parse_options`, `…config…`, `main`). Rules that
  ask whether the script owns a process group (`missing-destroy-process-group`,
  `unguarded-rank-side-effect`) then judge the script as if the helper made none.

Reported even under `--select`, unless ignored by name or code. Info level: it never changes the
exit code on its own.

## Why is this bad?
A bound that is hit in silence looks like a clean file. Saying so keeps the report honest.

## Example
```python
from pkg.a import setup  # setup -> pkg.b -> pkg.c -> pkg.d -> pkg.e.init_process_group
setup()
```

## Use instead
Nothing is wrong with the code; check the deep helper by hand, or shorten the chain.
""",
)


def check(ctx: FileContext) -> Iterator[Hit]:
    project = ctx.project
    if project is None or not ctx.is_script or not any(w in ctx.source for w in _DISTRIBUTED):
        return
    calls = [(c, m, f) for c, m, f in ctx.sibling_calls() if _SETUP.search(f)]
    for _, module, func in calls:
        project.creates_group(ctx.path, module, func)  # memoised there: asked once per helper
    stopped = set(project.stops(ctx.path))
    for call, module, func in calls:
        if f"{module}.{func}" in stopped:
            yield Hit(
                call,
                message=f"`{func}` was followed {CALL_DEPTH_SHOWN} modules deep without reaching "
                "`init_process_group`; the analysis stopped there, so whether this script owns "
                "a process group was not judged",
            )
