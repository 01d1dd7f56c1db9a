"""The rule registry: one module per rule, each with `RULE` (metadata and docs) and `check(ctx)`.

Codes are stable: a rule keeps its code for life; a removed rule's code is never reused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from dpwise.errors import DpwiseError
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.files import MAX_FILE_BYTES
from dpwise.lint.model import Fix, Hit, Rule
from dpwise.lint.rules import (
    accumulation_without_no_sync,
    batchnorm_without_sync,
    collective_under_rank_guard,
    data_parallel_usage,
    ddp_before_init_process_group,
    deprecated_amp_api,
    find_unused_parameters,
    grad_scaler_in_loop,
    hardcoded_master_port,
    loss_divided_by_world_size,
    missing_destroy_process_group,
    missing_distributed_sampler,
    missing_set_device,
    missing_set_epoch,
    no_sync_without_forward,
    reentrant_checkpoint_with_ddp,
    shuffle_with_sampler,
    spawn_under_torchrun,
    unguarded_rank_side_effect,
    wrapped_state_dict,
)

Check = Callable[[FileContext], Iterator[Hit]]
Fixer = Callable[[FileContext, Hit], Fix | None]

SYNTAX_ERROR = Rule(
    code="DPW000",
    name="syntax-error",
    severity="error",
    summary="the file cannot be parsed (or decoded) as Python",
    message="syntax error",
    help="fix the syntax error; no other rule can check this file until it parses",
    docs="""\
## What it does
Reports a file that Python cannot parse (or decode), with the parser's message and position. The
other files are still checked. Reported even under `--select`, unless ignored by name or code.

## Why is this bad?
A training script that does not parse fails on every rank at start-up, and no other rule can look
at it.

## Example
```python
for epoch in range(10)
    train(epoch)
```

## Use instead
```python
for epoch in range(10):
    train(epoch)
```
""",
)

NOT_CHECKED = Rule(
    code="DPW016",
    name="file-not-checked",
    severity="warning",
    summary="the file was not checked: too large, or nested too deeply to analyse",
    message="file not checked",
    help="split the file into smaller modules or flatten the nesting; no rule checked this file",
    docs=f"""\
## What it does
Reports a file that dpwise did not check, so that a skipped file is never mistaken for a clean
one: a file over {MAX_FILE_BYTES // 2**20} MiB (never read, which bounds the cost of one file),
and a file whose expressions are nested so deeply (thousands of levels) that parsing or analysing it
exhausts the recursion limit or memory. The other files are still checked. Reported even under
`--select`, unless ignored by name or code.

## Why is this bad?
No rule looked at the file. A file nested that deeply usually cannot be compiled by Python
either; a file that large is usually generated code or data, not a training script.

## Example
```python
x = ----------------------------------------------------------------------------------1  # × 5,000
```

## Use instead
```python
x = 1
```
""",
)

_MODULES = (
    data_parallel_usage,
    missing_set_device,
    ddp_before_init_process_group,
    missing_distributed_sampler,
    missing_set_epoch,
    shuffle_with_sampler,
    spawn_under_torchrun,
    hardcoded_master_port,
    unguarded_rank_side_effect,
    wrapped_state_dict,
    missing_destroy_process_group,
    grad_scaler_in_loop,
    deprecated_amp_api,
    accumulation_without_no_sync,
    batchnorm_without_sync,
    collective_under_rank_guard,
    reentrant_checkpoint_with_ddp,
    no_sync_without_forward,
    find_unused_parameters,
    loss_divided_by_world_size,
)

RULES: tuple[Rule, ...] = tuple(
    sorted((SYNTAX_ERROR, NOT_CHECKED, *(m.RULE for m in _MODULES)), key=lambda r: r.code)
)
ALWAYS_ON = frozenset({SYNTAX_ERROR.code, NOT_CHECKED.code})  # unless ignored
CHECKS: dict[str, Check] = {m.RULE.code: m.check for m in _MODULES}
# A rule module with a `fix(ctx, hit)` offers fixes (`dpwise lint --fix`).
FIXERS: dict[str, Fixer] = {m.RULE.code: m.fix for m in _MODULES if hasattr(m, "fix")}
_BY_KEY = {key: rule for rule in RULES for key in (rule.code.lower(), rule.name)}


def find_rule(token: str) -> Rule | None:
    """A rule by code (`DPW004`, any case) or name (`missing-distributed-sampler`)."""
    return _BY_KEY.get(token.strip().lower())


def parse_rules(values: Iterable[str] | str | None, option: str) -> set[str] | None:
    """Comma-separated codes or names (the option may repeat) -> codes; `ALL` = every rule."""
    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    codes: set[str] = set()
    for value in values:
        for token in filter(None, (t.strip() for t in value.split(","))):
            if token.upper() == "ALL":
                codes |= {r.code for r in RULES}
                continue
            rule = find_rule(token)
            if rule is None:
                raise DpwiseError(
                    f"{option}: unknown rule {token!r}; expected a code (DPW001) or a name "
                    "(missing-set-epoch), see 'dpwise lint --list-rules'"
                )
            codes.add(rule.code)
    return codes


def selected(select: Iterable[str] | str | None, ignore: Iterable[str] | str | None) -> list[Rule]:
    """The rules to run: `select` (default: all), minus `ignore`. `syntax-error` and
    `file-not-checked` stay on unless ignored. A `--select` that names no rule is a usage error."""
    chosen = parse_rules(select, "--select")
    if chosen is not None and not chosen:
        raise DpwiseError(
            f"--select {_shown(select)} names no rule; give codes or names "
            "(--select DPW004,missing-set-epoch) or ALL, or leave --select out to run every rule"
        )
    ignored = parse_rules(ignore, "--ignore") or set()
    codes = {r.code for r in RULES} if chosen is None else chosen | ALWAYS_ON
    return [r for r in RULES if r.code in codes and r.code not in ignored]


def _shown(values: Iterable[str] | str | None) -> str:
    values = [values] if isinstance(values, str) else list(values or [])
    return " ".join(repr(v) for v in values)
