"""nanoGPT's style, one file for both launches: DDP when torchrun set RANK, the accumulation
split over the ranks, gradient sync only on the last micro-step (`require_backward_grad_sync`),
a warm-up-then-cosine learning rate set by hand, clipping, AdamW. The global batch is
`micro_batch * grad_accum` rows whatever the world size."""

import math
import os

import torch
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

micro_batch = 8
grad_accum = 4  # micro-steps per optimizer step, over all ranks
max_iters, warmup_iters, learning_rate, min_lr, grad_clip = 20, 3, 3e-3, 3e-4, 1.0

ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    init_process_group(backend="gloo")
    world = int(os.environ["WORLD_SIZE"])
    assert grad_accum % world == 0
    grad_accum //= world
master = not ddp or int(os.environ["RANK"]) == 0

g = torch.Generator().manual_seed(1234)  # the "dataset": the same tokens in every process
tokens = torch.randint(0, 32, (320, 8), generator=g)
targets = torch.randint(0, 32, (320,), generator=g)
data = TensorDataset(tokens, targets)
sampler = DistributedSampler(data, shuffle=True) if ddp else None
loader = DataLoader(data, batch_size=micro_batch, sampler=sampler, shuffle=sampler is None)


class TinyLM(torch.nn.Module):
    def __init__(self, vocab=32, width=16):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                       torch.nn.Linear(4 * width, width))
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, idx, y=None):
        h = self.wte(idx).mean(dim=1)
        logits = self.head(h + self.mlp(h))
        loss = None if y is None else torch.nn.functional.cross_entropy(logits, y)
        return logits, loss


model = TinyLM()
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.1,
                              betas=(0.9, 0.95))
if ddp:
    model = DDP(model)


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    ratio = (it - warmup_iters) / (max_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


def batches():
    epoch = 0
    while True:
        if sampler is not None:
            sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


stream = batches()
X, Y = next(stream)
for iter_num in range(max_iters):
    for group in optimizer.param_groups:
        group["lr"] = get_lr(iter_num)
    for micro_step in range(grad_accum):
        if ddp:
            model.require_backward_grad_sync = micro_step == grad_accum - 1
        logits, loss = model(X, Y)
        loss = loss / grad_accum
        X, Y = next(stream)  # the next micro-batch while this one's backward runs
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if master and iter_num % 5 == 0:
        print(f"iter {iter_num}: loss {loss.item() * grad_accum:.4f}")
if ddp:
    destroy_process_group()
