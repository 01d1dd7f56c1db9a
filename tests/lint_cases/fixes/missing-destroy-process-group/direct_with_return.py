import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    for step in range(3):
        pass  # train
    return 0  # exit status


if __name__ == "__main__":
    main()
