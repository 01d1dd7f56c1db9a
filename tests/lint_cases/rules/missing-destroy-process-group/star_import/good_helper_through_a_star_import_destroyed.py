"""The same star-imported set-up helper, its group destroyed at the end."""
import torch
from util import *


def main():
    utils.init_distributed_mode(None)
    model = torch.nn.Linear(2, 2)
    train_one_epoch(model, [torch.randn(1, 2)])
    print("loss", model.weight.sum().item())
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
