"""The conditional expression is the guard: only rank 0 builds the writer."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.tensorboard import SummaryWriter


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    writer = SummaryWriter() if rank == 0 else None
    model = DDP(torch.nn.Linear(8, 1))
    loss = model(torch.randn(4, 8)).sum()
    loss.backward()
    if writer is not None:
        writer.add_scalar("loss", loss.item(), 0)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
