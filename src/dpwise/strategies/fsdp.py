"""Fully sharded data parallel (FSDP2, ``torch.distributed.fsdp.fully_shard``): a process per
device, each holding 1/W of every parameter, gradient and optimizer state.

What is sharded (``shard_units``): each repeated block (the children of a ModuleList or
Sequential with two or more children that hold parameters: transformer layers, ResNet stages'
blocks), or, in a model without repeated blocks, each direct child that holds parameters; then
the root, which takes every parameter left. A unit's parameters are all-gathered just before its
forward and backward and freed after (``reshard_after_forward``).

Mixed precision: compute runs under autocast, as in single and ddp, so that the runs stay
comparable op for op. FSDP2's MixedPrecisionPolicy is given ``reduce_dtype=float32`` so that
gradients are reduce-scattered in fp32 whatever the compute dtype; its ``param_dtype`` stays
unset: casting whole modules to bf16 (norms and softmax included) would be a different model from
autocast's. fp16's GradScaler works on sharded gradients because DTensor reduces the scaler's
inf/NaN flag over every shard before the step is skipped or taken.

Checkpoints are gathered, not sharded: ``full_state_dict`` and ``optimizer_state_dict`` return
the whole model and optimizer state on rank 0 in the plain model's names and the plain
optimizer's layout. A checkpoint is then one file in the same format as single's and ddp's
(resumable by any strategy, loadable with ``weights_only=True``); the price is that rank 0 holds
the whole state in host memory while it writes, which a model that fits the host allows.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from dpwise.errors import DpwiseError
from dpwise.strategies.base import NoHookState, StrategyFacts
from dpwise.strategies.fsdp_views import note_views, view_warning_hidden
from dpwise.strategies.process_group import ProcessGroupStrategy
from dpwise.strategies.traits import OWN, Traits

if TYPE_CHECKING:
    from dpwise.launch.env import DistEnv
    from dpwise.strategies.base import StrategySpec

ROOT = "(root)"


def _api() -> Any:
    """torch.distributed.fsdp with FSDP2's public ``fully_shard`` (PyTorch 2.6 and later)."""
    module = importlib.import_module("torch.distributed.fsdp")
    if not hasattr(module, "fully_shard"):
        raise DpwiseError(
            f"--strategy fsdp needs PyTorch 2.6 or later (torch.distributed.fsdp.fully_shard); "
            f"this is {torch.__version__}: upgrade torch or use --strategy ddp"
        )
    return module


def _holds_parameters(module: nn.Module) -> bool:
    return any(True for _ in module.parameters())


def _holders(model: nn.Module) -> dict[int, set[str]]:
    """Each parameter (by id) with the qualified names of every module that holds it directly:
    a tied parameter has several."""
    held: dict[int, set[str]] = {}
    for name, module in model.named_modules(remove_duplicate=False):
        for p in module._parameters.values():
            if p is not None:
                held.setdefault(id(p), set()).add(name)
    return held


def _self_contained(name: str, module: nn.Module, held: dict[int, set[str]]) -> bool:
    """No parameter of the module is also held outside it (a weight tied to another layer's, a
    module registered in two places): a unit must own its parameters alone, or FSDP2 would
    shard one parameter twice. Such parameters stay with the root."""
    inside = f"{name}."
    return all(
        all(h == name or h.startswith(inside) for h in held.get(id(p), ()))
        for p in module.parameters()
    )


def shard_units(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The submodules sharded as units of their own, by qualified name, outermost first.

    Repeated blocks where the model has them; otherwise each direct child with parameters. A
    module that shares a parameter with a module outside it (tied weights) is not a unit. The
    root (not listed) is sharded last and holds every parameter no unit holds, tied ones
    included.
    """
    held = _holders(model)
    blocks: list[tuple[str, nn.Module]] = []
    chosen: set[int] = set()
    inside: set[int] = set()  # modules within a chosen block
    for name, module in model.named_modules():
        if id(module) in inside or not isinstance(module, (nn.ModuleList, nn.Sequential)):
            continue
        children = [(n, c) for n, c in module.named_children() if _holds_parameters(c)]
        if len(children) < 2:
            continue
        for child_name, child in children:
            qualified = f"{name}.{child_name}" if name else child_name
            if id(child) in chosen or not _self_contained(qualified, child, held):
                continue
            chosen.add(id(child))
            inside.update(id(m) for m in child.modules())
            blocks.append((qualified, child))
    if blocks:
        return blocks
    return [
        (n, c)
        for n, c in model.named_children()
        if _holds_parameters(c) and _self_contained(n, c, held)
    ]


def unit_names(model: nn.Module) -> list[str]:
    """What ``wrap`` shards, in order, for output and metrics.json: the units, then the root."""
    return [name for name, _ in shard_units(model)] + [ROOT]


class FSDPStrategy(NoHookState, ProcessGroupStrategy):
    """The process group's (ProcessGroupStrategy); the model sharded over it instead of
    replicated, by FSDP2's ``fully_shard``."""

    traits = Traits(
        name="fsdp",
        summary="FSDP2 (fully_shard): a process per device, parameters, gradients and "
        "optimizer state sharded",
        multiprocess=True,
        process_group=True,
        devices=OWN,
        min_world_size=2,
        shards_model=True,
        options=("reshard_after_forward", "shard_units"),
    )
    name = traits.name

    def _configure(self) -> None:
        # True: each unit's parameters freed after its forward, gathered again for backward
        # (ZeRO-3-like); False: kept gathered until backward (ZeRO-2-like)
        self.reshard_after_forward = bool(self.settings.get("reshard_after_forward", True))
        # "model": the whole model is one unit (the root's); "blocks": each repeated block
        self.whole_model = self.settings.get("shard_units", "blocks") == "model"
        self.units: list[str] = []  # what wrap() sharded, for describe()
        self._scope = (
            ExitStack()
        )  # what holds while a sharded model lives (fsdp_views.view_warning_hidden)

    @classmethod
    def refuses(cls, model: nn.Module, device_type: str, varying: str = "") -> str | None:
        """The process group's refusals; sparse gradients (FSDP2 shards gradients as dense
        tensors); and parameters used in some steps only (``varying``, found by running the
        model): FSDP2 reduce-scatters only the gradients each process has, packed together, so
        when the processes used different parameters their packs do not line up (a crash, or
        mixed-up gradients without an error)."""
        if varying:
            return (
                f"--strategy fsdp: {varying} get a gradient in some steps and none in others "
                "(a branch picked by the batch or at random); FSDP2 reduces only the gradients "
                "each process has, so processes that took different branches mix them up or "
                "crash: use --strategy ddp (with --find-unused-parameters)"
            )
        sparse = [
            n
            for n, m in model.named_modules()
            if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and m.sparse
        ]
        if sparse:
            return (
                f"--strategy fsdp: {', '.join(sparse[:3])} (sparse=True) would give sparse "
                "gradients, which FSDP2 cannot shard; use --strategy ddp, or sparse=False"
            )
        return super().refuses(model, device_type)

    @classmethod
    def from_spec(cls, spec: StrategySpec, env: DistEnv) -> FSDPStrategy:
        _api()  # an older torch is refused before any process group exists
        return super().from_spec(spec, env)  # backend, device, timeout and fsdp's options

    def place(self, model: nn.Module) -> nn.Module:
        # stays where it was built (the host): fully_shard moves each unit's parameters and
        # buffers to the mesh's device as it shards it (the root takes the rest), so a GPU never
        # holds more than its shards and one whole unit
        return model

    def wrap(self, model: nn.Module) -> nn.Module:
        fsdp = _api()
        if not _holds_parameters(model):
            raise DpwiseError(
                "--strategy fsdp: the model has no parameters to shard; use --strategy ddp"
            )
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(self.device.type, (self.world_size,))
        policy = fsdp.MixedPrecisionPolicy(reduce_dtype=torch.float32)
        units = [] if self.whole_model else shard_units(model)
        for _, unit in units:
            fsdp.fully_shard(
                unit, mesh=mesh, mp_policy=policy, reshard_after_forward=self.reshard_after_forward
            )
        # the root is left to FSDP2's default (its parameters are needed again first in backward)
        fsdp.fully_shard(model, mesh=mesh, mp_policy=policy)
        self.units = [name for name, _ in units] + [ROOT]
        self._scope.enter_context(view_warning_hidden())
        if self.is_main:
            note_views([unit for _, unit in units] + [model])
        return model

    def unwrap(self, model: nn.Module) -> nn.Module:
        return model  # fully_shard changes the module in place; its names stay the plain model's

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        state = get_model_state_dict(model, options=_gathered())
        # full_state_dict=True: every value is a whole tensor (ValueType also allows DTensors)
        return cast(dict[str, torch.Tensor], state) if self.is_main else {}

    def load_full_state_dict(self, model: nn.Module, state: dict[str, torch.Tensor]) -> None:
        from torch.distributed.checkpoint.state_dict import set_model_state_dict

        # every rank read the file: each takes its own shard (the call converts the dict in place)
        set_model_state_dict(model, dict(state), options=_full())

    def optimizer_state_dict(
        self, model: nn.Module, optimizer: torch.optim.Optimizer
    ) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

        state = get_optimizer_state_dict(model, optimizer, options=_gathered())
        if not self.is_main:
            return {}
        return _by_index(cast(dict[str, Any], state), _optimizer_names(model, optimizer))

    def load_optimizer_state_dict(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]
    ) -> None:
        from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

        if not _holds_tensors(state):
            # plain SGD keeps no per-parameter tensors: there is nothing to shard, and torch's
            # loader cannot find a device to shard it on ("Expected device to be set"), so the
            # hyper-parameters are loaded as the plain optimizer would
            optimizer.load_state_dict(state)
            return
        named = _by_name(state, _optimizer_names(model, optimizer))
        set_optimizer_state_dict(model, optimizer, named, options=_full())

    def no_sync(self, model: nn.Module) -> AbstractContextManager[None]:
        return _gradient_sync_off(model)

    def _let_go(self, model: nn.Module) -> None:
        self._scope.close()  # the sharded model's warning filter ends with it

    def _let_go_of_all(self) -> None:
        self._scope.close()

    def describe(self) -> StrategyFacts:
        return StrategyFacts(
            devices=(str(self.device),),
            backend=self.backend,
            notes=(f"fsdp shards {len(self.units)} unit(s): {', '.join(self.units)}",),
            sharded_units=tuple(self.units),
        )


def _full() -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True)


def _gathered() -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=True)


@contextmanager
def _gradient_sync_off(model: nn.Module) -> Iterator[None]:
    """FSDP2's own switch: gradients accumulate unsharded, the last micro-step reduce-scatters."""
    switch = getattr(model, "set_requires_gradient_sync", None)
    if switch is None:
        yield
        return
    switch(False)
    try:
        yield
    finally:
        switch(True)


def _optimizer_names(model: nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """Each parameter's qualified name, in the optimizer's order (the plain layout's indices)."""
    names = {id(p): n for n, p in model.named_parameters()}
    return [names[id(p)] for group in optimizer.param_groups for p in group["params"]]


def _holds_tensors(state: dict[str, Any]) -> bool:
    """The optimizer state keeps a tensor of at least one dimension for some parameter."""
    per_param = state.get("state") or {}
    return any(
        isinstance(v, torch.Tensor) and v.dim() > 0
        for entry in per_param.values()
        if isinstance(entry, dict)
        for v in entry.values()
    )


def _by_index(state: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """Names → indices: the layout ``torch.optim.Optimizer.state_dict()`` writes for the plain
    model, so that the checkpoint is the same whichever strategy wrote it."""
    index = {n: i for i, n in enumerate(names)}
    groups = [
        {**group, "params": [index[n] for n in group["params"]]} for group in state["param_groups"]
    ]
    return {"state": {index[n]: s for n, s in state["state"].items()}, "param_groups": groups}


def _by_name(state: dict[str, Any], names: list[str]) -> dict[str, Any]:
    try:
        groups = [
            {**group, "params": [names[i] for i in group["params"]]}
            for group in state["param_groups"]
        ]
        return {"state": {names[i]: s for i, s in state["state"].items()}, "param_groups": groups}
    except (IndexError, TypeError) as exc:
        raise ValueError(f"optimizer state for another model ({exc})") from None
