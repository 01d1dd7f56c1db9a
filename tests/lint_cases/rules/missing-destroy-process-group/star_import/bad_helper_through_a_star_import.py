"""`utils` comes from `from util import *` (the package's __init__.py binds it): its set-up helper
makes the process group, which the script never destroys. The print after it is silenced on
the other ranks by that helper, so it is not reported."""
import torch
from util import *


def main():
    utils.init_distributed_mode(None)  # expect: missing-destroy-process-group
    model = torch.nn.Linear(2, 2)
    train_one_epoch(model, [torch.randn(1, 2)])
    print("loss", model.weight.sum().item())


if __name__ == "__main__":
    main()
