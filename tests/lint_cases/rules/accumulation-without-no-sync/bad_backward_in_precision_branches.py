"""The backward pass is chosen by precision (both branches run it every step); the optimizer
steps every `accum_steps` iterations, and DDP all-reduces on every one of them."""
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def train(args, model, batches):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda", enabled=args.fp16)
    for step, (x, y) in enumerate(batches):
        loss = (model(x) - y).pow(2).mean()
        if args.accum_steps > 1:
            loss = loss / args.accum_steps
        if args.fp16:
            scaler.scale(loss).backward()  # expect: accumulation-without-no-sync
        else:
            loss.backward()
        if (step + 1) % args.accum_steps == 0:
            if args.fp16:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            opt.zero_grad()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fp16", action="store_true")
    parser.add_argument("--accum-steps", type=int, default=4)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    train(args, model, [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(16)])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
