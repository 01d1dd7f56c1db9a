"""On GPUs: a barrier that only rank 0 calls, under NCCL, with a short collective timeout and
the Flight Recorder's dump on timeout (the environment sets TORCH_NCCL_DUMP_ON_TIMEOUT,
TORCH_FR_BUFFER_SIZE and TORCH_NCCL_DEBUG_INFO_TEMP_FILE): NCCL's watchdog writes its lines
and each rank's dump."""

import datetime
import os
import time

import torch
import torch.distributed as dist

rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=8))
t = torch.ones(4, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
if rank == 0:
    dist.barrier()
    torch.cuda.synchronize()
else:
    time.sleep(30)
