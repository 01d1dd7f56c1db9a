"""Step-based training: a global step counter, a max_steps limit, and a linear warmup schedule.

Style: the loop counts optimizer steps rather than epochs (`while global_step < max_steps`
over repeated passes of the loader), uses a LambdaLR warmup, clips the gradient norm, and
logs every few steps. The model is wrapped in nn.DataParallel.

Run:     python max_steps.py [--max-steps 24]
Output:  the final weights (unwrapped state_dict) go to $DPWISE_OUT (default: final.pt).
"""

import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-steps", type=int, default=24)
    parser.add_argument("--warmup-steps", type=int, default=4)
    parser.add_argument("--per-device-batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-2)
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1234)
    return parser.parse_args()


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    n_gpu = max(torch.cuda.device_count(), 1)
    train_batch_size = args.per_device_batch_size * n_gpu

    tokens = torch.randn(256, 16)
    labels = torch.randint(0, 4, (256,))
    dataloader = DataLoader(
        TensorDataset(tokens, labels), batch_size=train_batch_size, shuffle=True
    )

    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    if n_gpu > 1:
        model = nn.DataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / args.warmup_steps)
    )

    global_step = 0
    model.train()
    while global_step < args.max_steps:
        for step, (batch_x, batch_y) in enumerate(dataloader):
            batch_x, batch_y = batch_x.to(device), batch_y.to(device)
            loss = nn.functional.cross_entropy(model(batch_x), batch_y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            global_step += 1
            if global_step % 8 == 0:
                print(f"step {global_step} (batch {step}): loss {loss.item():.4f}")
            if global_step >= args.max_steps:
                break

    model_to_save = model.module if hasattr(model, "module") else model
    torch.save(model_to_save.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))


if __name__ == "__main__":
    main()
