"""A ResNet under DDP keeping per-rank BatchNorm statistics (large per-GPU batches).

The linter reports this at info level only (batchnorm-without-sync); nothing at warning or above.
"""
import os

import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    model = torchvision.models.resnet18(num_classes=10).cuda()
    model = DDP(model, device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    dataset = TensorDataset(torch.randn(2048, 3, 64, 64), torch.randint(0, 10, (2048,)))
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=256, sampler=sampler, num_workers=8)
    for epoch in range(90):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            loss = torch.nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0 and epoch % 10 == 9:
            torch.save(model.module.state_dict(), f"resnet18_epoch{epoch}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
