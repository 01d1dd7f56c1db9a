"""The block a migration inserts once after the script's imports: process-group set-up under
torchrun, one process otherwise, and the loader that gives each process its share."""

from __future__ import annotations

# Names the inserted code binds at module level; a script already defining one is refused.
NAMES = (
    "_dist_setup",
    "_dist_teardown",
    "_distributed_loader",
    "_per_process_batch",
    "_rank",
    "_device",
    "_world_size",
    "is_main_process",
    "_next_epoch",
    "_PASSES",
    "_no_sync_unless",
)

BLOCK = '''
# --- added by `dpwise migrate`: one process per device under torchrun, one process otherwise ---
import gc
import os

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader as _DataLoader
from torch.utils.data import RandomSampler as _RandomSampler
from torch.utils.data.distributed import DistributedSampler


def _dist_setup():
    """(rank, world_size, local_rank, device). Under torchrun (RANK and WORLD_SIZE set) this
    process joins the process group (nccl on CUDA, gloo on CPU) and takes GPU LOCAL_RANK;
    otherwise it trains alone, as the original script did."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return 0, 1, 0, device
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if not dist.is_initialized():  # a second call (a second trainer) joins no second group
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return dist.get_rank(), dist.get_world_size(), local_rank, device


def _dist_teardown():
    """Leave the process group. A DDP wrapper still alive holds the group through its Reducer,
    so the group would otherwise be destroyed at interpreter exit, where gloo can abort
    ("terminate called without an active exception"): the reducers go first."""
    gc.collect()
    for obj in gc.get_objects():
        if issubclass(type(obj), DistributedDataParallel):
            obj.reducer = None
            obj.logger = None
    dist.destroy_process_group()


def is_main_process():
    """True in the one process that prints and writes files (rank 0, or the only process)."""
    return _rank() == 0


def _rank():
    """This process's rank: the group's, or torchrun's RANK before the group is set up."""
    return dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", "0"))


def _world_size():
    """Processes training together: the group's, or torchrun's WORLD_SIZE before set-up."""
    if dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", "1")) if "RANK" in os.environ else 1


def _device():
    """This process's device: GPU LOCAL_RANK under torchrun on CUDA, else the only GPU or CPU."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))


def _per_process_batch(global_batch):
    """global_batch // world_size: the global batch stays what the script says (said once)."""
    world_size = _world_size()
    if global_batch % world_size:
        raise SystemExit(
            f"global batch {global_batch} does not split evenly across {world_size} processes; "
            f"use a multiple of {world_size}"
        )
    if world_size > 1 and _rank() == 0:
        print(
            f"global batch {global_batch} kept: {global_batch // world_size} per process "
            f"x {world_size} processes (learning rate unchanged)"
        )
    return global_batch // world_size


def _distributed_loader(loader):
    """The same loader with each process drawing its own share of every global batch: a
    DistributedSampler (shuffled if the original was) and a per-process batch of
    global batch // world_size."""
    if _world_size() == 1:
        return loader
    sampler = DistributedSampler(
        loader.dataset,
        num_replicas=_world_size(),
        rank=_rank(),
        shuffle=isinstance(loader.sampler, _RandomSampler),
        drop_last=loader.drop_last,
    )
    return _DataLoader(
        loader.dataset,
        batch_size=_per_process_batch(loader.batch_size),
        shuffle=False,
        sampler=sampler,
        num_workers=loader.num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        drop_last=loader.drop_last,
    )
'''

# Functions added to the block only when an edit calls them (`Edit.needs`).
OPTIONAL = {
    "_next_epoch": '''

_PASSES = {}


def _next_epoch(loader):
    """Before each pass over `loader`: its DistributedSampler's epoch is the number of passes
    made so far over the same data set (a loader built anew every epoch counts on), so every
    pass has a new order, the same on every process."""
    sampler = getattr(loader, "sampler", None)
    if isinstance(sampler, DistributedSampler):
        key = id(sampler.dataset)
        sampler.set_epoch(_PASSES.get(key, 0))
        _PASSES[key] = _PASSES.get(key, 0) + 1
''',
    "_no_sync_unless": '''

def _no_sync_unless(model, sync):
    """DDP's `no_sync()` for a micro-step that ends in no optimizer step: its gradients add up
    in this process, and the last micro-step all-reduces the sum (nothing to skip otherwise)."""
    import contextlib

    if sync or not isinstance(model, DistributedDataParallel):
        return contextlib.nullcontext()
    return model.no_sync()
''',
}


def block(needs: set[str]) -> str:
    """The inserted block with the optional functions the edits call, in a fixed order."""
    return BLOCK + "".join(code for name, code in OPTIONAL.items() if name in needs)
