"""A rank that sleeps while the others wait in the next all-reduce (a slow rank-0 phase, a
straggler): for the seconds its argument says (default 120), then it trains on."""

import sys
import time

import torch.distributed as dist
from common import train

dist.init_process_group("gloo")
train()
if dist.get_rank() == 1:
    time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 120)
train()
