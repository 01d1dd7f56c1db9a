import torch

model = torch.nn.Linear(8, 1).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train_one_epoch(loader):
    scaler = torch.amp.GradScaler("cuda")  # expect: grad-scaler-in-loop
    for x, y in loader:
        with torch.amp.autocast("cuda"):
            loss = (model(x) - y).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


def train(loader, steps):
    for step in range(steps):
        scaler = torch.amp.GradScaler("cuda")  # expect: grad-scaler-in-loop
        x, y = next(loader)
        with torch.amp.autocast("cuda"):
            loss = (model(x) - y).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


def fit(loader, epochs):
    for epoch in range(epochs):
        train_one_epoch(loader)
