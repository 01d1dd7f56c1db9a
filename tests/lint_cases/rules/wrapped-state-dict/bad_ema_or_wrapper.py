"""The checkpoint takes the EMA copy when there is one, else the DDP wrapper itself."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, use_ema):
        self.use_ema = use_ema
        self.ema = None

    def before_train(self):
        model = DDP(torch.nn.Linear(8, 1))
        if self.use_ema:
            self.ema = torch.optim.swa_utils.AveragedModel(model.module)
        self.model = model

    def save(self):
        if dist.get_rank() == 0:
            save_model = self.ema.module if self.use_ema else self.model
            torch.save({"model": save_model.state_dict()}, "last.pt")  # expect: wrapped-state-dict


if __name__ == "__main__":
    dist.init_process_group("gloo")
    trainer = Trainer(use_ema=False)
    trainer.before_train()
    trainer.save()
    dist.destroy_process_group()
