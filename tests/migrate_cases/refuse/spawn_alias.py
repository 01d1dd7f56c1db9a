# refuse: own-spawning
"""Workers started through an alias: `from torch.multiprocessing import spawn as launch`.

Why it is refused: the script starts its own processes, under a name that does not say so.
Under torchrun every worker would start two more.
"""

import torch.nn as nn
from torch.multiprocessing import spawn as launch


def worker(rank):
    model = nn.DataParallel(nn.Linear(4, 2)).cuda()
    print(rank, sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    launch(worker, nprocs=2)
