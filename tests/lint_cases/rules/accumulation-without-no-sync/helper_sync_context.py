"""A helper that skips the all-reduce on the micro-steps that do not sync."""
import contextlib

from torch.nn.parallel import DistributedDataParallel


@contextlib.contextmanager
def maybe_sync(module, sync):
    if sync or not isinstance(module, DistributedDataParallel):
        yield
    else:
        with module.no_sync():
            yield
