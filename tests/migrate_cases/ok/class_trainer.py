"""Train with a Trainer class: __init__ builds it all, fit() runs epochs, train_epoch() one pass.

Style: an object-oriented trainer holding model, optimizer, loss and loader as attributes; the model
is wrapped in nn.DataParallel inside the trainer; save() writes the unwrapped weights.

Run:     python class_trainer.py
Output:  the final weights (unwrapped state_dict) go to $DPWISE_OUT (default: final.pt).
"""

import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class RegressionData(Dataset):
    """A map-style data set of noisy linear targets."""

    def __init__(self, n=256, dim=16, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, dim, generator=g)
        w = torch.randn(dim, 1, generator=g)
        self.y = self.x @ w + 0.1 * torch.randn(n, 1, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        return self.x[idx], self.y[idx]


class Trainer:
    def __init__(self, model, dataset, batch_size=32, lr=0.01, epochs=3):
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model = nn.DataParallel(model.to(self.device))
        self.loader = DataLoader(dataset, batch_size=batch_size, shuffle=True)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)
        self.criterion = nn.MSELoss()
        self.epochs = epochs
        self.history = []

    def train_epoch(self, epoch):
        self.model.train()
        running = 0.0
        for inputs, targets in self.loader:
            inputs, targets = inputs.to(self.device), targets.to(self.device)
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(inputs), targets)
            loss.backward()
            self.optimizer.step()
            running += loss.item()
        return running / len(self.loader)

    def fit(self):
        for epoch in range(self.epochs):
            loss = self.train_epoch(epoch)
            self.history.append(loss)
            print(f"[epoch {epoch + 1}/{self.epochs}] loss={loss:.4f}")
        return self.history

    def save(self, path):
        torch.save(self.model.module.state_dict(), path)


if __name__ == "__main__":
    torch.manual_seed(3)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    trainer = Trainer(net, RegressionData())
    trainer.fit()
    trainer.save(os.environ.get("DPWISE_OUT", "final.pt"))
