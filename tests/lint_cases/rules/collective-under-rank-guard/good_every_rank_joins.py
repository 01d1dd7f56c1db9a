import contextlib
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def validate(model, rank):
    dist.barrier()  # every rank
    if rank == 0:
        with torch.no_grad():
            out = model.module(torch.randn(4, 8))  # the unwrapped model: local only
        print(f"validation output mean {out.mean().item():.3f}")


def share(value, rank):
    if rank == 0:
        objects = [value]
        dist.broadcast_object_list(objects, src=0)
    else:
        objects = [None]
        dist.broadcast_object_list(objects, src=0)
    if rank == 0:
        dist.send(torch.ones(1), dst=1)  # point to point, not a collective
    return objects[0]


@contextlib.contextmanager
def rank_zero_first(local_rank):
    if local_rank not in (-1, 0):
        dist.barrier()  # the other ranks wait here while rank 0 works
    yield
    if local_rank == 0:
        dist.barrier()  # rank 0 releases them


def download(rank):
    with rank_zero_first(rank):
        return torch.zeros(1)


class Evaluator:
    def __init__(self, model):
        self.model = model

    def run(self, x):
        return self.inner(x)

    def inner(self, x):
        return self.model(x)  # its callers are not known here: not rank 0 only


def test_barrier_times_out(rank, pytest):
    if rank == 0:
        with pytest.raises(RuntimeError, match="Timed out"):
            dist.barrier()  # meant to time out: only rank 0 enters


def main():
    dist.init_process_group("gloo")
    rank = int(os.environ["RANK"])
    model = DDP(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
    validate(model, rank)
    share(rank, rank)
    download(rank)
    Evaluator(model).run(torch.randn(4, 8))
    test_barrier_times_out(rank, None)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
