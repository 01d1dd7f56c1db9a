"""One process: AdamW with weight decay on the weights only, a linear warm-up then cosine decay
(LambdaLR stepped every batch), gradients clipped to norm 0.5, a classifier on made rows."""

import math

import torch
from torch.utils.data import DataLoader, TensorDataset

EPOCHS, BATCH, WARMUP = 4, 32, 2


def make_data():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(192, 12, generator=g)
    return TensorDataset(x, (x[:, :3].sum(dim=1) > 0).long())


def make_model():
    return torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.Tanh(), torch.nn.Linear(24, 2))


def make_optimizer(model, total_steps):
    decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
    rest = [p for n, p in model.named_parameters() if not n.endswith("weight")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": rest, "weight_decay": 0.0}], lr=2e-3)

    def factor(step):
        if step < WARMUP:
            return (step + 1) / WARMUP
        return 0.5 * (1 + math.cos(math.pi * (step - WARMUP) / max(1, total_steps - WARMUP)))

    return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)


if __name__ == "__main__":
    data = make_data()
    loader = DataLoader(data, batch_size=BATCH, shuffle=True)
    model = make_model()
    opt, scheduler = make_optimizer(model, EPOCHS * len(loader))
    for epoch in range(EPOCHS):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
            opt.step()
            scheduler.step()
        print(f"epoch {epoch}: lr {scheduler.get_last_lr()[0]:.2e} loss {loss.item():.4f}")
