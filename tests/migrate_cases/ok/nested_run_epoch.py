"""A trainer whose `train()` defines `run_epoch(split)`, which builds its DataLoader on every call
(train or test data) and iterates it under a progress bar; the epoch loop calls run_epoch.

Style: the compact trainer of many small GPT-style repositories: a config object, `self.device`
taken as the current CUDA device and `nn.DataParallel(self.model).to(self.device)`, a loader
built inside the nested function with shuffle=True and pin_memory, the gradient clipped, the
raw model saved through `model.module if hasattr(model, "module") else model`.

Run:     python nested_run_epoch.py
Output:  the final weights (unwrapped state_dict) go to $DPWISE_OUT (default: final.pt).
"""

import os

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class TrainerConfig:
    max_epochs = 3
    batch_size = 32
    learning_rate = 3e-3
    grad_norm_clip = 1.0
    num_workers = 0
    ckpt_path = None

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)


class Trainer:
    def __init__(self, model, train_dataset, test_dataset, config):
        self.model = model
        self.train_dataset = train_dataset
        self.test_dataset = test_dataset
        self.config = config
        self.device = "cpu"
        if torch.cuda.is_available():
            self.device = torch.cuda.current_device()
            self.model = torch.nn.DataParallel(self.model).to(self.device)

    def save_checkpoint(self, path):
        raw_model = self.model.module if hasattr(self.model, "module") else self.model
        torch.save(raw_model.state_dict(), path)

    def train(self):
        model, config = self.model, self.config
        optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)

        def run_epoch(split):
            is_train = split == "train"
            model.train(is_train)
            data = self.train_dataset if is_train else self.test_dataset
            loader = DataLoader(
                data,
                shuffle=True,
                pin_memory=True,
                batch_size=config.batch_size,
                num_workers=config.num_workers,
            )
            losses = []
            for x, y in loader:
                x, y = x.to(self.device), y.to(self.device)
                with torch.set_grad_enabled(is_train):
                    loss = nn.functional.mse_loss(model(x), y)
                    losses.append(loss.item())
                if is_train:
                    model.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_norm_clip)
                    optimizer.step()
            return float(np.mean(losses))

        for epoch in range(config.max_epochs):
            train_loss = run_epoch("train")
            test_loss = run_epoch("test")
            print(f"epoch {epoch + 1}: train {train_loss:.4f} test {test_loss:.4f}")


if __name__ == "__main__":
    torch.manual_seed(21)
    x = torch.randn(320, 12)
    y = x @ torch.randn(12, 2)
    train_set, test_set = TensorDataset(x[:256], y[:256]), TensorDataset(x[256:], y[256:])
    net = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 2))
    trainer = Trainer(net, train_set, test_set, TrainerConfig())
    trainer.train()
    trainer.save_checkpoint(os.environ.get("DPWISE_OUT", "final.pt"))
