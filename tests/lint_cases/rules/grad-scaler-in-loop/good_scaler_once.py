import torch
from torch.amp import GradScaler, autocast


def train(model, optimizer, loader, epochs):
    scaler = GradScaler("cuda")
    for epoch in range(epochs):
        for x, y in loader:
            with autocast("cuda", dtype=torch.float16):
                loss = (model(x) - y).pow(2).mean()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)


def sweep(configs, make_run):
    for config in configs:
        scaler = GradScaler("cuda", init_scale=config["init_scale"])
        make_run(config, scaler)
