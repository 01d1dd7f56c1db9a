"""Which runs a comparison makes on this hardware: the reference (single), then every asked
strategy at the world sizes its traits call for (processes, or the GPUs one process drives)."""

from __future__ import annotations

from dataclasses import dataclass

from dpwise import strategies
from dpwise.compare.settings import CompareConfig
from dpwise.errors import DpwiseError
from dpwise.infra.hardware import Hardware
from dpwise.strategies.traits import VISIBLE
from dpwise.train.batch_split import check_batch_divides


@dataclass(frozen=True)
class RunSpec:
    id: str  # file-name safe: single, dp-2, ddp-4
    label: str
    strategy: str
    world_size: int  # processes, or the GPUs one process splits each batch over (1 on the CPU)
    device_type: str

    @property
    def launched(self) -> bool:
        """A multi-process run of more than one process runs in workers the elastic launcher
        starts."""
        return self.world_size > 1 and strategies.traits(self.strategy).multiprocess


def default_world_sizes(hw: Hardware, device_type: str) -> tuple[int, ...]:
    if device_type == "cpu":
        return (1, 2)
    sizes, w = [], 1
    while w <= hw.cuda_devices:
        sizes.append(w)
        w *= 2
    if sizes[-1] != hw.cuda_devices:
        sizes.append(hw.cuda_devices)
    return tuple(sizes)


def device_type_for(cfg: CompareConfig, hw: Hardware) -> str:
    if cfg.device == "cuda" and hw.cuda_devices == 0:
        raise DpwiseError("--device cuda needs a CUDA GPU, but PyTorch sees none; use --device cpu")
    if cfg.device == "auto":
        return "cuda" if hw.cuda_devices else "cpu"
    return cfg.device


def build_matrix(cfg: CompareConfig, hw: Hardware) -> list[RunSpec]:
    device = device_type_for(cfg, hw)
    sizes = tuple(sorted(set(cfg.world_sizes or default_world_sizes(hw, device))))
    if device == "cuda" and max(sizes) > hw.cuda_devices:
        raise DpwiseError(
            f"--world-sizes {max(sizes)} needs more GPUs than the {hw.cuda_devices} this machine "
            f"has; use sizes up to {hw.cuda_devices}"
        )
    reference = strategies.reference()
    specs = [RunSpec(reference, reference, reference, 1, device)]  # always run
    for name in strategies.names():
        if name not in cfg.strategies or name == reference:
            continue
        kind = strategies.traits(name)
        if max(sizes) < kind.min_world_size and cfg.strategies == strategies.compared_by_default():
            continue  # not asked for by name: the default set runs what these sizes allow
        specs += _runs(name, kind, sizes, device, cfg.batch_size)
    return specs


def _runs(
    name: str, traits: strategies.Traits, sizes: tuple[int, ...], device: str, batch: int
) -> list[RunSpec]:
    if traits.multiprocess:  # one run per world size of processes
        check_batch_divides(batch, sizes, name_sizes=True)
        own = [w for w in sizes if w >= traits.min_world_size]
        if not own:
            raise DpwiseError(
                f"--strategies {name} needs a world size of at least {traits.min_world_size}, "
                f"but --world-sizes gives {list(sizes)}; add {traits.min_world_size}"
            )
        return [RunSpec(f"{name}-{w}", f"{name} × {w}", name, w, device) for w in own]
    if traits.devices == VISIBLE and device == "cuda":  # one process over the first k GPUs
        return [RunSpec(f"{name}-{k}", f"{name} × {k} GPUs", name, k, device) for k in sizes]
    if traits.devices == VISIBLE:  # no GPU to split over: the wrapper calls the module itself
        return [RunSpec(name, f"{name} (CPU pass-through)", name, 1, device)]
    return [RunSpec(name, name, name, 1, device)]
