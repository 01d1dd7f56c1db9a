"""A per-rank path in one function does not make the same name per-rank in another."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def save_shard(model, rank):
    path = f"shard{rank}.pt"
    torch.save(model.module.state_dict(), path)


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    save_shard(model, dist.get_rank())
    path = "final.pt"
    torch.save(model.module.state_dict(), path)  # expect: unguarded-rank-side-effect
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
