"""Owns: the rules, one module each (`RULE`: metadata and docs; `check(ctx)` unless the checker
reports it; `fix(ctx, hit)` where the rule can fix), and CODES, the one table of codes.
May import: lint.analysis, lint.fix, lint.model, lint.files; never another rule's module.
Imported by: lint (checker, session, fixer) and the documentation's rule pages.

CODES is the one table of codes. A rule keeps its code for life; a removed rule's code is never
reused; a new rule takes the next free code (NEXT_CODE) and one row here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from types import ModuleType

from dpwise.errors import DpwiseError
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.model import Fix, Hit, Rule
from dpwise.lint.rules import (
    accumulation_without_no_sync,
    analysis_incomplete,
    batchnorm_without_sync,
    collective_under_rank_guard,
    data_parallel_usage,
    ddp_before_init_process_group,
    deprecated_amp_api,
    file_not_checked,
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
    syntax_error,
    unguarded_rank_side_effect,
    wrapped_state_dict,
)

Check = Callable[[FileContext], Iterator[Hit]]
Fixer = Callable[[FileContext, Hit], Fix | None]

CODES: tuple[tuple[str, ModuleType], ...] = (
    ("DPW000", syntax_error),
    ("DPW001", data_parallel_usage),
    ("DPW002", missing_set_device),
    ("DPW003", ddp_before_init_process_group),
    ("DPW004", missing_distributed_sampler),
    ("DPW005", missing_set_epoch),
    ("DPW006", shuffle_with_sampler),
    ("DPW007", spawn_under_torchrun),
    ("DPW008", hardcoded_master_port),
    ("DPW009", unguarded_rank_side_effect),
    ("DPW010", wrapped_state_dict),
    ("DPW011", missing_destroy_process_group),
    ("DPW012", grad_scaler_in_loop),
    ("DPW013", deprecated_amp_api),
    ("DPW014", accumulation_without_no_sync),
    ("DPW015", batchnorm_without_sync),
    ("DPW016", file_not_checked),
    ("DPW017", collective_under_rank_guard),
    ("DPW018", reentrant_checkpoint_with_ddp),
    ("DPW019", no_sync_without_forward),
    ("DPW020", find_unused_parameters),
    ("DPW021", loss_divided_by_world_size),
    ("DPW022", analysis_incomplete),
)
NEXT_CODE = "DPW023"

for _code, _module in CODES:
    if _module.RULE.code != _code:
        raise ValueError(f"{_module.__name__} declares {_module.RULE.code}; its row says {_code}")

SYNTAX_ERROR = syntax_error.RULE
NOT_CHECKED = file_not_checked.RULE
INCOMPLETE = analysis_incomplete.RULE

RULES: tuple[Rule, ...] = tuple(m.RULE for _, m in CODES)
ALWAYS_ON = frozenset({SYNTAX_ERROR.code, NOT_CHECKED.code, INCOMPLETE.code})  # unless ignored
# The rules the checker reports itself have no `check` of their own.
CHECKS: dict[str, Check] = {code: m.check for code, m in CODES if hasattr(m, "check")}
# A rule module with a `fix(ctx, hit)` offers fixes (`dpwise lint --fix`).
FIXERS: dict[str, Fixer] = {code: m.fix for code, m in CODES if hasattr(m, "fix")}
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
