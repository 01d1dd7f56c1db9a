import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    optimizer = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cpu")
    for step in range(100):
        for micro in range(8):
            x = torch.randn(4, 8)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(x).pow(2).mean() / 8
            scaler.scale(loss).backward()  # expect: accumulation-without-no-sync
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
