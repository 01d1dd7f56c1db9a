"""Each rank writes its own files: the rank reaches the path through variables built earlier."""
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DDP(torch.nn.Linear(8, 1))
    suffix = "_" + str(rank)
    weights = "weights" + suffix + ".pt"
    folder = os.path.join("logs", f"worker{rank}")
    log_file = Path(folder) / "log.txt"
    torch.save(model.module.state_dict(), weights)
    torch.save(model.module.state_dict(), os.path.join(folder, "model.pt"))
    with open(log_file, "w") as f:
        f.write("done\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
