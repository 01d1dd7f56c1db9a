# spawn_hangs.py: a script whose second process waits forever before its first step
import time
import torch
import torch.multiprocessing as mp

def train(rank, world_size):
    if rank == 1:
        while True:
            time.sleep(1)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(10):
        model(torch.randn(8, 4)).sum().backward()
        optimizer.step()

if __name__ == "__main__":
    mp.spawn(train, args=(2,), nprocs=2, join=True)
