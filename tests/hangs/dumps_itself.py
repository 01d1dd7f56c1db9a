"""A job run without dpwise that hangs (rank 0's barrier under a rank guard) and writes torch's
Flight Recorder dump of each rank itself, as a user's own call would, into the folder its
argument names: `trace_rank_<R>` (pickled, as NCCL's dump on timeout is)."""

import os
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _dump_fr_trace

dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)


def dump_and_end():
    time.sleep(0.5)  # rank 0 waits in its barrier by then
    with open(os.path.join(sys.argv[1], f"trace_rank_{rank}"), "wb") as f:
        f.write(_dump_fr_trace(True, True, False))
    time.sleep(1.0 * rank)  # rank 1 ends after rank 0 dumped (its end breaks rank 0's wait)
    os._exit(0)


threading.Thread(target=dump_and_end, daemon=True).start()
if rank == 0:
    dist.barrier()
else:
    time.sleep(30)
