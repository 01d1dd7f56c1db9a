# spawn_ddp.py: the guide's ddp_train.py (tests/userscripts/guide/ddp_train.py) fixed (it never
# imported nn), on the smaller data of common.py beside it
import os
import torch
import torch.nn as nn
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from common import SimpleModel, get_dataloader

def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29500"
    dist.init_process_group(backend="nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)

def cleanup():
    dist.destroy_process_group()

def train(rank, world_size):
    setup(rank, world_size)
    model = SimpleModel().cuda(rank)
    ddp_model = DDP(model, device_ids=[rank])
    criterion = nn.CrossEntropyLoss().cuda(rank)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.01)
    loader = get_dataloader(batch_size=256)

    for epoch in range(5):
        for x, y in loader:
            x, y = x.cuda(rank), y.cuda(rank)
            out = ddp_model(x)
            loss = criterion(out, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"Rank {rank} Epoch {epoch} completed")
    cleanup()

if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(train, args=(world_size,), nprocs=world_size, join=True)
