"""Which runs a comparison makes on this hardware: single, dp and ddp at several world sizes."""

from __future__ import annotations

from dataclasses import dataclass

from dpwise.batch_split import check_batch_divides
from dpwise.compare.settings import CompareConfig
from dpwise.errors import DpwiseError
from dpwise.hardware import Hardware


@dataclass(frozen=True)
class RunSpec:
    id: str  # file-name safe: single, dp-2, ddp-4
    label: str
    strategy: str
    world_size: int  # ddp processes, or the GPUs DataParallel splits over (1 on the CPU)
    device_type: str

    @property
    def launched(self) -> bool:
        """ddp with more than one process runs in workers started by the elastic launcher."""
        return self.strategy == "ddp" and self.world_size > 1


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
    specs = [RunSpec("single", "single", "single", 1, device)]  # the reference, always run
    if "dp" in cfg.strategies:
        if device == "cpu":
            specs.append(RunSpec("dp", "dp (CPU pass-through)", "dp", 1, device))
        else:
            specs += [RunSpec(f"dp-{k}", f"dp × {k} GPUs", "dp", k, device) for k in sizes]
    if "ddp" in cfg.strategies:
        check_batch_divides(cfg.batch_size, sizes, name_sizes=True)
        specs += [RunSpec(f"ddp-{w}", f"ddp × {w}", "ddp", w, device) for w in sizes]
    return specs
