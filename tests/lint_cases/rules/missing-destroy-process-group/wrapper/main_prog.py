import torch.distributed as dist


def main(args):
    dist.init_process_group("gloo")
    print(args)


if __name__ == "__main__":
    main(None)
