import torch
from torch.nn.parallel import DistributedDataParallel as DDP

import utils


def main(args):
    utils.init_distributed_mode(args)
    torch.cuda.set_device(args.gpu)
    model = DDP(torch.nn.Linear(10, 10).cuda(args.gpu), device_ids=[args.gpu])
    model(torch.randn(4, 10).cuda(args.gpu)).sum().backward()


if __name__ == "__main__":
    main(utils.parse_args())
