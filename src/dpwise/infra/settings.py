"""A setting is declared once: a dataclass field whose metadata holds its flag, help and checks.

The command-line argument is generated from the field (its default is the field's default, never
restated), ``from_args`` builds the dataclass from parsed arguments, and ``validate`` runs every
field's checks, each raising DpwiseError with one line that names the flag and the value.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable
from dataclasses import MISSING, Field, field, fields
from typing import Any

from dpwise.errors import DpwiseError

# (flag, value) -> None, or DpwiseError
Check = Callable[[str, Any], None]


def setting(
    default: Any = MISSING,
    *,
    factory: Callable[[], Any] | Any = MISSING,
    flag: str | tuple[str, ...] | None = None,
    checks: Iterable[Check] = (),
    parse: Callable[[Any, str], Any] | None = None,
    **argparse_kwargs: Any,
) -> Any:
    """A dataclass field that is also a command-line setting.

    ``flag``: the option's name (default ``--field-name``), several names (``("-o", "--out")``),
    or a name without dashes for a positional argument (its value lands in the field);
    ``parse(raw, flag)`` turns the argparse value into the field's value (not called on None);
    ``argparse_kwargs`` go to ``add_argument``; ``choices`` are also checked at construction (a
    callable is called each time, so that a registry filled later is seen).
    """
    if "choices" in argparse_kwargs:  # the same choices checked at construction
        checks = (one_of(argparse_kwargs["choices"]), *checks)
    meta = {"flag": flag, "checks": tuple(checks), "parse": parse, "argparse": argparse_kwargs}
    return field(default=default, default_factory=factory, metadata={"setting": meta})


def like(cls: type, name: str, *, default: Any = MISSING, **argparse_changes: Any) -> Any:
    """The setting ``name`` of ``cls`` again (same flag, checks and default), for a second
    command; ``argparse_changes`` adjust how it is shown (its help). ``default`` replaces the
    default where the second command means something else by leaving it out (None: detected)."""
    f = _field(cls, name)
    meta = dict(f.metadata["setting"])
    meta["argparse"] = {**meta["argparse"], **argparse_changes}
    if default is not MISSING:
        return field(default=default, metadata={"setting": meta})
    return field(default=f.default, default_factory=f.default_factory, metadata={"setting": meta})


def flags_of(f: Field) -> tuple[str, ...]:
    """The names ``add_argument`` takes: the options' names, or a positional's one name."""
    flag = f.metadata["setting"]["flag"] or "--" + f.name.replace("_", "-")
    return (flag,) if isinstance(flag, str) else tuple(flag)


def flag_of(f: Field) -> str:
    """How messages name the setting: its long option, or a positional's metavar."""
    flags = flags_of(f)
    if flags[0].startswith("-"):
        return flags[-1]
    return f.metadata["setting"]["argparse"].get("metavar") or flags[0]


def add_settings(group: Any, cls: type, names: Iterable[str], detected: Iterable[str] = ()) -> None:
    """Add the arguments of ``cls``'s settings ``names``, in that order, to a parser or group.
    ``detected``: settings whose value may come from elsewhere when the flag is not given (a
    scheduler's variables): absent from the parsed arguments unless given, so that
    ``given(args, …)`` tells them apart from their defaults."""
    detected = set(detected)
    for name in names:
        f = _field(cls, name)
        kwargs = dict(f.metadata["setting"]["argparse"])
        if callable(kwargs.get("choices")):
            kwargs["choices"] = kwargs["choices"]()
        if name in detected:
            kwargs["default"] = argparse.SUPPRESS
        elif "default" not in kwargs and kwargs.get("action") != "append":
            kwargs["default"] = None if f.default is MISSING else f.default
        flags = flags_of(f)
        if flags[0].startswith("-"):
            group.add_argument(*flags, dest=name, **kwargs)
        else:  # a positional: argparse takes its name as the destination
            group.add_argument(name, **kwargs)


def given(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The settings among ``names`` that the command line gave (added as ``detected``)."""
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


def from_args(cls: type, args: argparse.Namespace, **given: Any) -> Any:
    """``cls`` built from the parsed arguments of its settings; ``given`` wins over them."""
    kwargs = {}
    for f in fields(cls):
        if "setting" not in f.metadata or f.name in given or not hasattr(args, f.name):
            continue
        value = getattr(args, f.name)
        parse = f.metadata["setting"]["parse"]
        if value is not None and parse is not None:
            value = parse(value, flag_of(f))
        if value is None and f.default_factory is not MISSING:
            continue  # not given: the field's own default
        kwargs[f.name] = value
    return cls(**kwargs, **given)


def validate(obj: Any) -> None:
    """Run every setting's checks, in field order."""
    for f in fields(obj):
        for check in f.metadata.get("setting", {}).get("checks", ()):
            check(flag_of(f), getattr(obj, f.name))


def _field(cls: type, name: str) -> Field:
    for f in fields(cls):
        if f.name == name:
            return f
    raise KeyError(f"{cls.__name__} has no setting {name!r}")


# The checks. Each skips None (a setting left to its default or to detection).


def one_of(choices: Callable[[], Iterable[str]] | Iterable[str]) -> Check:
    def check(flag: str, value: Any) -> None:
        known = tuple(choices() if callable(choices) else choices)
        if value is not None and value not in known:
            raise DpwiseError(f"{flag} {value!r} is not one of {', '.join(known)}")

    return check


def at_least(low: int | float) -> Check:
    def check(flag: str, value: Any) -> None:
        if value is not None and not value >= low:  # NaN is not at least anything
            raise DpwiseError(f"{flag} must be at least {low}, got {value}")

    return check


def finite(example: str) -> Check:
    """A real number: inf or nan would make every weight non-finite at the first step."""

    def check(flag: str, value: Any) -> None:
        if value is not None and not math.isfinite(value):
            raise DpwiseError(f"{flag} must be a finite number, got {value}; e.g. {flag} {example}")

    return check


def positive(flag: str, value: Any) -> None:
    if value is not None and not value > 0:
        raise DpwiseError(f"{flag} must be positive, got {value}")
