"""Training loop with a tqdm progress bar over the loader (tqdm is optional).

Style: `for batch in tqdm(loader, desc=...)` with the running loss shown through
set_postfix(); when tqdm is not installed a tiny stand-in keeps the loop unchanged.
The model is wrapped in nn.DataParallel.

Run:     python tqdm_progress.py
Output:  the final weights (unwrapped state_dict) go to $DPWISE_OUT (default: final.pt).
"""

import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

try:
    from tqdm import tqdm
except ImportError:  # progress bars are a nicety, never a requirement

    class tqdm:
        def __init__(self, iterable, **kwargs):
            self.iterable = iterable

        def __iter__(self):
            return iter(self.iterable)

        def set_postfix(self, **kwargs):
            pass


NUM_EPOCHS = 2
BATCH_SIZE = 32

torch.manual_seed(42)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

X = torch.randn(256, 10)
Y = (X.sum(dim=1) > 0).long()
train_loader = DataLoader(TensorDataset(X, Y), batch_size=BATCH_SIZE, shuffle=True)

model = nn.DataParallel(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2)).to(device))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
criterion = nn.CrossEntropyLoss()

for epoch in range(NUM_EPOCHS):
    model.train()
    progress = tqdm(train_loader, desc=f"Epoch [{epoch + 1}/{NUM_EPOCHS}]", leave=False)
    for inputs, targets in progress:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        progress.set_postfix(loss=f"{loss.item():.4f}")

torch.save(model.module.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))
