"""What every strategy with a process per device shares (ddp and fsdp, siblings over it, as
Lightning Fabric's ParallelStrategy): the process group's setup and teardown, this process's
rank, device and share of a batch, and the collectives. Each subclass owns its wrapper and what
the wrapper holds (DDP's Reducers and hooks, FSDP2's sharded units)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import torch
import torch.distributed as dist
from torch import nn

from dpwise.launch.env import DistEnv
from dpwise.launch.settings import DEFAULT_TIMEOUT_S
from dpwise.strategies.base import OptionValue, StrategyFacts
from dpwise.strategies.traits import Traits

if TYPE_CHECKING:
    from dpwise.strategies.base import StrategySpec

# Workers reach init_process_group seconds apart (imports, data, a loaded machine): the first
# meeting may wait this long even when --timeout is shorter; --timeout applies from then on.
STARTUP_TIMEOUT_S = DEFAULT_TIMEOUT_S

Built = TypeVar("Built", bound="ProcessGroupStrategy")


class ProcessGroupStrategy:
    """A process per device in one torch.distributed process group; the model's wrapper is the
    subclass's (``wrap``, ``release``'s and ``teardown``'s ``_let_go``)."""

    traits: ClassVar[Traits]
    name: ClassVar[str]

    def __init__(
        self,
        env: DistEnv,
        backend: str,
        device_type: str,
        *,
        timeout_s: float | None = None,
        options: Mapping[str, OptionValue] | None = None,
    ) -> None:
        self.env = env
        self.backend = backend
        self.rank = env.rank
        self.world_size = env.world_size
        if device_type == "cuda":
            self.device = torch.device("cuda", env.device_index)
        else:
            self.device = torch.device("cpu")
        self.timeout = timedelta(seconds=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s)
        self.settings: dict[str, OptionValue] = dict(options or {})
        """This strategy's own options as given (its traits' ``options``, defaults included)."""
        self._owns_group = False
        self._configure()

    def _configure(self) -> None:
        """Read this strategy's own options (``settings``) and make its wrapper's state."""

    @classmethod
    def from_spec(cls: type[Built], spec: StrategySpec, env: DistEnv) -> Built:
        return cls(
            env,
            spec.backend or "gloo",
            spec.device_type,
            timeout_s=spec.timeout_s,
            options=spec.options,
        )

    @classmethod
    def refuses(cls, model: nn.Module, device_type: str, varying: str = "") -> str | None:
        """Why this strategy cannot run ``model`` on ``device_type`` (before any process starts),
        or None: SyncBatchNorm synchronises through CUDA only. ``varying``: the layers whose
        parameters the model uses in some steps only (a subclass may refuse them)."""
        if device_type == "cuda":
            return None
        synced = [
            n or "the model" for n, m in model.named_modules() if isinstance(m, nn.SyncBatchNorm)
        ]
        if not synced:
            return None
        return (
            f"--strategy {cls.traits.name} on the CPU: the model has SyncBatchNorm layers "
            f"({', '.join(synced[:3])}{', …' if len(synced) > 3 else ''}), which PyTorch runs "
            "only on GPUs; on the CPU use nn.BatchNorm layers (or single/dp), or run on GPUs"
        )

    # -- the process group --------------------------------------------------------------------
    def setup(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)  # before any CUDA tensor or NCCL communicator
        if not dist.is_initialized():
            self._init_group()
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()

    def _init_group(self) -> None:
        """The default group, met with a startup timeout at least STARTUP_TIMEOUT_S where torch
        can shorten it to --timeout afterwards."""
        setter = _timeout_setter()
        startup = self.timeout
        if setter is not None:
            startup = max(self.timeout, timedelta(seconds=STARTUP_TIMEOUT_S))
        kwargs: dict[str, Any] = {"backend": self.backend, "timeout": startup}
        if self.device.type == "cuda" and _accepts_device_id():
            kwargs["device_id"] = self.device  # binds NCCL to this rank's GPU up front
        dist.init_process_group(**kwargs)
        self._owns_group = True
        if setter is not None and startup != self.timeout:
            setter(self.timeout)  # collectives wait at most --timeout from now on

    def release(self, model: nn.Module) -> None:
        """Every rank is done with ``model``: finish outstanding work, then let go of what holds
        the group (``_let_go``).

        The barrier completes every collective this rank queued (its async work objects), so
        what is let go afterwards has no work in flight.
        """
        self.barrier()
        self._let_go(model)

    def teardown(self) -> None:
        """Free what the wrappers built that still holds the process group
        (``_let_go_of_all``), then the group itself (in that order)."""
        self._let_go_of_all()
        if self._owns_group and dist.is_initialized():
            dist.destroy_process_group()
            self._owns_group = False

    def _let_go(self, model: nn.Module) -> None:
        """Drop what one wrapped model holds of the process group (a no-op where nothing)."""

    def _let_go_of_all(self) -> None:
        """Drop what every wrapper built holds of the group, before it is destroyed."""

    # -- this process's place -----------------------------------------------------------------
    def shard(self, rows: torch.Tensor) -> torch.Tensor:
        return rows[self.rank :: self.world_size]  # DistributedSampler: rank r takes r::W

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def memory_devices(self) -> list[torch.device]:
        return [self.device]

    def describe(self) -> StrategyFacts:
        return StrategyFacts(devices=(str(self.device),), backend=self.backend)

    # -- collectives --------------------------------------------------------------------------
    def barrier(self) -> None:
        """Every rank's outstanding collectives are done (a no-op without a group)."""
        if dist.is_initialized():
            dist.barrier()

    def all_reduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        reduced = tensor.detach().clone()
        dist.all_reduce(reduced, op=dist.ReduceOp.SUM)
        return reduced / self.world_size

    def all_gather_object(self, obj: object) -> list[object]:
        gathered: list[object] = [None] * self.world_size
        dist.all_gather_object(gathered, obj)
        return gathered

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def _accepts_device_id() -> bool:
    return "device_id" in inspect.signature(dist.init_process_group).parameters


def _timeout_setter() -> Callable[[timedelta], None] | None:
    """What changes the default group's timeout after init (None where torch has nothing)."""
    public = getattr(dist, "set_timeout", None)  # newer torch; the private one warns there
    return public or getattr(dist.distributed_c10d, "_set_pg_timeout", None)
