"""Mixed precision under DDP with torch.amp (torchrun --nproc_per_node=8 amp_torch_amp.py)."""
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    is_main = dist.get_rank() == 0

    model = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512)).cuda()
    model = DDP(model, device_ids=[local_rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    scaler = torch.amp.GradScaler("cuda")

    data = TensorDataset(torch.randn(8192, 512), torch.randn(8192, 512))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=32, sampler=sampler, pin_memory=True)

    for epoch in range(4):
        sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            with torch.amp.autocast("cuda", dtype=torch.float16):
                loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        if is_main:
            print(f"epoch {epoch} loss {loss.item():.4f} scale {scaler.get_scale():.0f}")
            torch.save(
                {"model": model.module.state_dict(), "scaler": scaler.state_dict()},
                f"amp_epoch{epoch}.pt",
            )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
