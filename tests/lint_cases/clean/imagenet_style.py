"""PyTorch-examples ImageNet structure: one process per node (env:// or tcp://), mp.spawn per GPU.

python imagenet_style.py --dist-url tcp://10.1.1.20:FREE_PORT --world-size 2 --rank 0 \
    --multiprocessing-distributed
"""
import argparse
import os
import shutil

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--dist-url", default="env://")
    p.add_argument("--world-size", type=int, default=-1)
    p.add_argument("--rank", type=int, default=-1)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--multiprocessing-distributed", action="store_true")
    return p.parse_args()


def save_checkpoint(state, is_best, filename="checkpoint.pth.tar"):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, "model_best.pth.tar")


def main_worker(gpu, ngpus_per_node, args):
    if args.dist_url == "env://" and args.rank == -1:
        args.rank = int(os.environ["RANK"])
    args.rank = args.rank * ngpus_per_node + gpu
    dist.init_process_group("nccl", init_method=args.dist_url, world_size=args.world_size, rank=args.rank)
    torch.cuda.set_device(gpu)
    model = nn.parallel.DistributedDataParallel(nn.Linear(224, 1000).cuda(gpu), device_ids=[gpu])
    optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9)
    train_dataset = TensorDataset(torch.randn(512, 224), torch.randint(0, 1000, (512,)))
    train_sampler = DistributedSampler(train_dataset)
    train_loader = DataLoader(train_dataset, batch_size=32, sampler=train_sampler, num_workers=4)
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        for images, target in train_loader:
            loss = nn.functional.cross_entropy(model(images.cuda(gpu)), target.cuda(gpu))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if not args.multiprocessing_distributed or args.rank % ngpus_per_node == 0:
            save_checkpoint({"epoch": epoch + 1, "state_dict": model.module.state_dict()}, False)
    dist.destroy_process_group()


def main():
    args = parse()
    if args.dist_url == "env://" and args.world_size == -1:
        args.world_size = int(os.environ["WORLD_SIZE"])
    ngpus_per_node = torch.cuda.device_count()
    if args.multiprocessing_distributed:
        args.world_size = ngpus_per_node * args.world_size
        mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, args))
    else:
        main_worker(0, ngpus_per_node, args)


if __name__ == "__main__":
    main()
