"""The wrapped model is unwrapped where it was wrapped, by a branch or a conditional expression."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def save(generator, critic, distributed):
    if distributed:
        g_plain = generator.module
    else:
        g_plain = generator
    c_plain = critic.module if distributed else critic
    if not distributed or dist.get_rank() == 0:
        torch.save({"g": g_plain.state_dict(), "c": c_plain.state_dict()}, "gan.pt")


def main(distributed=True):
    generator, critic = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)
    if distributed:
        dist.init_process_group("gloo")
        generator, critic = DDP(generator), DDP(critic)
    save(generator, critic, distributed)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
