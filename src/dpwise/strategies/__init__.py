"""Owns: one file per strategy, the registry, the traits, and the contract (base.py: the Strategy
protocol, the StrategySpec it is built from and the StrategyFacts it describes its run with);
process_group.py, the base ddp and fsdp share as siblings (the group, rank, collectives);
hooks.py, DDP's communication hooks (powersgd.py: PowerSGD's checkpointable state); fsdp_views.py,
FSDP2's view-tensor warning filtered in a scope and said once.
May import: launch, diagnosis, errors
Imported by: advise, commands, compare, link, report, results, train, tune

The strategies, one module each; this registry maps a name to the class that implements it.

A strategy class declares its ``traits`` (see traits.Traits) and builds itself from the
StrategySpec the planner resolved (``from_spec``; base.py declares the type). Names are known
without importing a strategy's module (the CLI lists them before torch is loaded); traits and
classes are imported on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from dpwise.errors import DpwiseError
from dpwise.strategies.traits import Traits

if TYPE_CHECKING:
    from torch import nn

    from dpwise.launch.env import DistEnv
    from dpwise.strategies.base import Strategy, StrategySpec

__all__ = [
    "Traits",
    "compared_by_default",
    "make_strategy",
    "multiprocess",
    "names",
    "reference",
    "register",
    "strategy_class",
    "those",
    "traits",
    "unregister",
]

_REGISTRY: dict[str, str | type[Strategy]] = {}  # name -> "module:Class", or the class itself
_NAMED_ONLY: set[str] = set()  # compared only when --strategies names them
_MULTIPROCESS: set[str] = set()  # their traits say multiprocess (checked when the class loads)


def register(
    name: str,
    target: str | type[Strategy],
    *,
    compared_by_default: bool = True,
    multiprocess: bool = False,
) -> None:
    """Make ``name`` a strategy: ``target`` is its class or "package.module:Class".

    Known without importing the class (the commands read them before torch loads):
    ``compared_by_default``, whether `dpwise compare` runs it when --strategies is not given;
    ``multiprocess``, its traits' (a command starts its fork server early for it; a class given
    itself says it)."""
    if name in _REGISTRY:
        raise ValueError(f"strategy {name!r} is already registered")
    _REGISTRY[name] = target
    if not compared_by_default:
        _NAMED_ONLY.add(name)
    if multiprocess or (isinstance(target, type) and target.traits.multiprocess):
        _MULTIPROCESS.add(name)


def unregister(name: str) -> None:
    del _REGISTRY[name]
    _NAMED_ONLY.discard(name)
    _MULTIPROCESS.discard(name)


def multiprocess(name: str) -> bool:
    """Whether ``name``'s runs have several processes (its traits' ``multiprocess``), known
    without importing its class: torch is not loaded for it."""
    if name not in _REGISTRY:
        raise DpwiseError(f"--strategy {name!r} is not one of {', '.join(names())}")
    return name in _MULTIPROCESS


def names() -> tuple[str, ...]:
    """Every strategy's name, in registration order (the order compare runs them)."""
    return tuple(_REGISTRY)


def strategy_class(name: str) -> type[Strategy]:
    target = _REGISTRY.get(name)
    if target is None:
        raise DpwiseError(f"--strategy {name!r} is not one of {', '.join(names())}")
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        target = _REGISTRY[name] = getattr(importlib.import_module(module), attr)
    declared = target.traits.name
    if declared != name:
        raise ValueError(f"strategy {name!r} is registered with a class that declares {declared!r}")
    if target.traits.multiprocess != (name in _MULTIPROCESS):
        raise ValueError(
            f"strategy {name!r} is registered with multiprocess={name in _MULTIPROCESS}, but its "
            f"class's traits say {target.traits.multiprocess}"
        )
    return target


def traits(name: str) -> Traits:
    return strategy_class(name).traits


def compared_by_default() -> tuple[str, ...]:
    """What `dpwise compare` runs when --strategies is not given."""
    return tuple(n for n in names() if n not in _NAMED_ONLY)


def those(has: Callable[[Traits], bool]) -> tuple[str, ...]:
    """The names of the strategies whose traits satisfy ``has`` (for messages and matrices)."""
    return tuple(n for n in names() if has(traits(n)))


def reference() -> str:
    """The name of the strategy every other one must reproduce (single)."""
    return next(n for n in names() if traits(n).reference)


def refusal(name: str, model: nn.Module, device_type: str, varying: str = "") -> str | None:
    """Why strategy ``name`` cannot run ``model`` on ``device_type``, in one line, or None (its
    class's ``refuses``, where it has one): asked before any process starts. ``varying`` names
    the layers whose parameters running the model found used in some steps only ("" if none or
    not run)."""
    refuses = getattr(strategy_class(name), "refuses", None)
    return refuses(model, device_type, varying) if refuses is not None else None


def make_strategy(spec: StrategySpec, env: DistEnv) -> Strategy:
    """The one constructor: the strategy the spec names, built from it (the planner resolves a
    run's spec: ``RunPlan.strategy``)."""
    return strategy_class(spec.name).from_spec(spec, env)


register("single", "dpwise.strategies.single:SingleStrategy")
register("dp", "dpwise.strategies.dp:DataParallelStrategy")
register("ddp", "dpwise.strategies.ddp:DDPStrategy", multiprocess=True)
# fsdp's runs alone took 51 s of the default comparison's 90 s budget on a 2-core CPU (the
# SimpleModel's two small units pay FSDP's per-unit collectives every step): run when named
register(
    "fsdp", "dpwise.strategies.fsdp:FSDPStrategy", compared_by_default=False, multiprocess=True
)
