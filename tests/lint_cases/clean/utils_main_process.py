"""DeiT/DETR-style helpers in one file: is_main_process(), save_on_master(), init_distributed_mode()."""
import argparse
import os

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def is_dist_avail_and_initialized():
    return dist.is_available() and dist.is_initialized()


def get_rank():
    return dist.get_rank() if is_dist_avail_and_initialized() else 0


def is_main_process():
    return get_rank() == 0


def save_on_master(*args, **kwargs):
    if is_main_process():
        torch.save(*args, **kwargs)


def init_distributed_mode(args):
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        args.rank = int(os.environ["RANK"])
        args.world_size = int(os.environ["WORLD_SIZE"])
        args.gpu = int(os.environ["LOCAL_RANK"])
    else:
        args.distributed = False
        return
    args.distributed = True
    torch.cuda.set_device(args.gpu)
    dist.init_process_group("nccl", world_size=args.world_size, rank=args.rank)
    dist.barrier()


def main(args):
    init_distributed_mode(args)
    device = torch.device("cuda")
    model = torch.nn.Linear(384, 100).to(device)
    model_without_ddp = model
    if args.distributed:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
        model_without_ddp = model.module
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
    dataset_train = TensorDataset(torch.randn(4096, 384), torch.randint(0, 100, (4096,)))
    sampler_train = DistributedSampler(dataset_train, shuffle=True)
    data_loader_train = DataLoader(dataset_train, sampler=sampler_train, batch_size=64)
    for epoch in range(args.epochs):
        if args.distributed:
            data_loader_train.sampler.set_epoch(epoch)
        for samples, targets in data_loader_train:
            loss = torch.nn.functional.cross_entropy(model(samples.to(device)), targets.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        save_on_master({"model": model_without_ddp.state_dict(), "epoch": epoch}, "checkpoint.pth")
        if is_main_process():
            print(f"epoch {epoch}: loss {loss.item():.3f}")
    if args.distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    main(parser.parse_args())
