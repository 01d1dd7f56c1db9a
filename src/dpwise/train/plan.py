"""Resolve a TrainConfig against the hardware and the launch environment into a RunPlan: what
the strategy is built from (a StrategySpec) and what the launcher is given (LaunchSettings)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpwise import strategies
from dpwise.errors import DpwiseError
from dpwise.infra.hardware import Hardware
from dpwise.launch.env import DistEnv
from dpwise.launch.settings import LaunchSettings
from dpwise.strategies.base import StrategySpec
from dpwise.strategies.traits import VISIBLE, Traits
from dpwise.train.batch_split import check_batch_divides
from dpwise.train.config import TrainConfig


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    """What will actually run: one process, or world_size workers of a multi-process strategy."""

    config: TrainConfig
    strategy: StrategySpec  # what the strategy is built from
    nproc_per_node: int
    world_size: int
    launch: bool  # True: dpwise starts the workers itself through the elastic launcher
    topology: dict[str, Any] | None = None  # where the job runs, each value with its source

    @property
    def device_type(self) -> str:
        """ "cpu" or "cuda"."""
        return self.strategy.device_type

    @property
    def backend(self) -> str | None:
        """None where the strategy runs one process."""
        return self.strategy.backend

    @property
    def per_rank_batch(self) -> int:
        return self.config.batch_size // self.world_size

    @property
    def launch_settings(self) -> LaunchSettings:
        """What the elastic launcher is given: the launch section of the settings."""
        cfg = self.config
        return LaunchSettings(
            nproc_per_node=self.nproc_per_node,
            nnodes=cfg.nnodes,
            min_nodes=cfg.min_nnodes,
            node_rank=cfg.node_rank,
            rdzv_endpoint=cfg.rdzv_endpoint,
            rdzv_backend=cfg.rdzv_backend,
            rdzv_id=cfg.rdzv_id,
            max_restarts=cfg.max_restarts,
            timeout=cfg.timeout,
        )


def _spec(
    cfg: TrainConfig, traits: Traits, device: str, backend: str | None, dp_devices: int = 0
) -> StrategySpec:
    return StrategySpec(
        name=cfg.strategy,
        device_type=device,
        backend=backend,
        dp_devices=dp_devices,
        timeout_s=cfg.timeout,
        options={name: getattr(cfg, name) for name in traits.options},
    )


def resolve(cfg: TrainConfig, hw: Hardware, env: DistEnv) -> RunPlan:
    """The plan of ``cfg`` on this hardware, in this process's launch environment; what cannot
    run is refused in one line."""
    device = _device(cfg.device, hw)
    traits = strategies.traits(cfg.strategy)
    if not traits.multiprocess:
        return _one_process(cfg, traits, device, hw, env)
    backend = _backend(cfg, traits, device)
    nproc, world, worlds = _workers(cfg, hw, env, device)
    if device == "cuda" and nproc > hw.cuda_devices and not env.under_launcher:
        raise DpwiseError(
            f"--nproc {nproc} asks for more GPU workers than the {hw.cuda_devices} GPUs this node "
            f"has; use --nproc {hw.cuda_devices} or fewer"
        )
    if world < traits.min_world_size:
        raise DpwiseError(
            f"--strategy {cfg.strategy} needs at least {traits.min_world_size} processes, "
            f"this run has {world}; use --nproc {traits.min_world_size} or more"
        )
    check_batch_divides(cfg.batch_size, worlds)
    return RunPlan(
        config=cfg,
        strategy=_spec(cfg, traits, device, backend),
        nproc_per_node=nproc,
        world_size=world,
        launch=not env.under_launcher,
    )


def _device(wanted: str, hw: Hardware) -> str:
    """ "cpu" or "cuda": --device, auto being CUDA where this node has a GPU."""
    device = wanted
    if device == "auto":
        device = "cuda" if hw.cuda_devices > 0 else "cpu"
    if device == "cuda" and hw.cuda_devices == 0:
        raise DpwiseError("--device cuda needs a CUDA GPU, but PyTorch sees none; use --device cpu")
    return device


def _one_process(
    cfg: TrainConfig, traits: Traits, device: str, hw: Hardware, env: DistEnv
) -> RunPlan:
    """A strategy that runs one process (single, dp): refused as one of a launcher's workers."""
    if env.under_launcher and env.world_size > 1:
        several = " or ".join(strategies.those(lambda t: t.multiprocess))
        raise DpwiseError(
            f"--strategy {cfg.strategy} runs one process, but this is worker {env.rank} of "
            f"{env.world_size} under {env.launched_by}; use --strategy {several} or launch "
            f"without {env.launched_by}'s per-device processes"
        )
    every_gpu = traits.devices == VISIBLE and device == "cuda"
    dp_devices = hw.cuda_devices if every_gpu else 0
    return RunPlan(
        config=cfg,
        strategy=_spec(cfg, traits, device, None, dp_devices),
        nproc_per_node=1,
        world_size=1,
        launch=False,
    )


def _backend(cfg: TrainConfig, traits: Traits, device: str) -> str:
    """--backend, auto being nccl on CUDA and gloo on the CPU; a hook that cannot use it, or
    nccl on the CPU, refused."""
    backend = cfg.backend
    if backend == "auto":
        backend = "nccl" if device == "cuda" else "gloo"
    if cfg.comm_hook != "none" and "comm_hook" in traits.options:
        from dpwise.strategies.hooks import check_comm_hook

        check_comm_hook(cfg.comm_hook, backend, cfg.find_unused_parameters)
    if backend == "nccl" and device != "cuda":
        raise DpwiseError(
            "--backend nccl needs CUDA GPUs, but this run is on the CPU; use --backend gloo"
        )
    return backend


def _workers(
    cfg: TrainConfig, hw: Hardware, env: DistEnv, device: str
) -> tuple[int, int, tuple[int, ...]]:
    """(workers per node, world size, every world size the job may have: an elastic job's
    node range), from the launcher that started this process, else from the settings."""
    if not env.under_launcher:
        nproc = cfg.nproc or (hw.cuda_devices if device == "cuda" else 2)
        low = cfg.min_nnodes or cfg.nnodes  # an elastic job: every node count in its range
        worlds = tuple(nproc * nodes for nodes in range(low, cfg.nnodes + 1))
        return nproc, nproc * cfg.nnodes, worlds
    nproc, world = env.local_world_size, env.world_size
    if env.launched_by == "torchrun" and cfg.nproc is not None and cfg.nproc != nproc:
        raise DpwiseError(
            f"--nproc {cfg.nproc} conflicts with torchrun's {nproc} workers per node: drop "
            f"--nproc (torchrun started the workers), or run `dpwise train --nproc "
            f"{cfg.nproc}` without torchrun (dpwise starts them)"
        )
    if device == "cuda" and env.device_index >= hw.cuda_devices:
        raise DpwiseError(
            f"worker {env.rank} (local rank {env.local_rank}) needs GPU {env.device_index}, "
            f"but this process sees {hw.cuda_devices}; give each node as many GPUs as "
            "processes (SLURM: --gpus-per-node, not --gpus-per-task with a shared node)"
        )
    return nproc, world, (world,)
