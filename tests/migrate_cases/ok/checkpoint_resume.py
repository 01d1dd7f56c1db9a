"""Checkpointing: save model, optimizer and epoch every epoch; continue from one with --resume.

Style: a save_checkpoint(state, filename) helper writes {'epoch', 'state_dict', 'optimizer'} after
each epoch; `--resume PATH` loads it back (model and optimizer state, start epoch) before training.
The DataParallel model's own state_dict (keys prefixed `module.`) goes into the checkpoint.

Run:     python checkpoint_resume.py [--epochs 3] [--checkpoint checkpoint.pth.tar]
         python checkpoint_resume.py --epochs 5 --resume checkpoint.pth.tar
Output:  the final weights (unwrapped state_dict) go to $DPWISE_OUT (default: final.pt);
         the checkpoint goes to --checkpoint (default: checkpoint.pth.tar in the working directory).
"""

import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description="training with checkpoints")
parser.add_argument("--epochs", default=3, type=int, help="total epochs to run")
parser.add_argument("-b", "--batch-size", default=64, type=int)
parser.add_argument("--lr", default=0.05, type=float)
parser.add_argument("--checkpoint", default="checkpoint.pth.tar", type=str)
parser.add_argument(
    "--resume",
    default="",
    type=str,
    metavar="PATH",
    help="path to latest checkpoint (default: none)",
)


def save_checkpoint(state, filename):
    torch.save(state, filename)


def main():
    args = parser.parse_args()
    torch.manual_seed(2)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    x = torch.randn(384, 12)
    y = torch.randint(0, 2, (384,))
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True)

    model = nn.DataParallel(nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 2)))
    model = model.to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)

    start_epoch = 0
    if args.resume:
        if os.path.isfile(args.resume):
            print(f"=> loading checkpoint '{args.resume}'")
            checkpoint = torch.load(args.resume, map_location=device)
            start_epoch = checkpoint["epoch"]
            model.load_state_dict(checkpoint["state_dict"])
            optimizer.load_state_dict(checkpoint["optimizer"])
            print(f"=> loaded checkpoint '{args.resume}' (epoch {start_epoch})")
        else:
            print(f"=> no checkpoint found at '{args.resume}'")

    for epoch in range(start_epoch, args.epochs):
        model.train()
        for inputs, target in loader:
            inputs, target = inputs.to(device), target.to(device)
            loss = criterion(model(inputs), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"Epoch {epoch}: loss {loss.item():.4f}")
        save_checkpoint(
            {
                "epoch": epoch + 1,
                "state_dict": model.state_dict(),
                "optimizer": optimizer.state_dict(),
            },
            args.checkpoint,
        )

    torch.save(model.module.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))


if __name__ == "__main__":
    main()
