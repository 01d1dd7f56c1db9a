"""Mixed-precision training with torch.autocast and a GradScaler around a DataParallel model.

Style: the AMP recipe: forward and loss under autocast, scaler.scale(loss).backward(),
scaler.step(optimizer), scaler.update(). AMP is on only where CUDA is available (float16 needs a
GPU); on the CPU both autocast and the scaler are disabled, so the run is plain float32.

Run:     python amp_gradscaler.py [--epochs 2]
Output:  the final weights (unwrapped state_dict) go to $DPWISE_OUT (default: final.pt).
"""

import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.02)
    return p.parse_args()


def main():
    args = get_args()
    torch.manual_seed(11)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    use_amp = device.type == "cuda"

    x = torch.randn(512, 40)
    y = torch.randint(0, 6, (512,))
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True)

    model = nn.Sequential(nn.Linear(40, 96), nn.GELU(), nn.Linear(96, 6)).to(device)
    model = nn.DataParallel(model)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)

    for epoch in range(args.epochs):
        for step, (images, labels) in enumerate(loader):
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=use_amp):
                output = model(images)
                loss = criterion(output, labels)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            if step % 4 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")

    torch.save(model.module.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))


if __name__ == "__main__":
    main()
