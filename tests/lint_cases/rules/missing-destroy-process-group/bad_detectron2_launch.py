"""detectron2's launcher starts one worker per GPU and creates the process group in each; the
main function the workers run never destroys it."""
import torch
from detectron2.engine import default_argument_parser, launch


def main(args):
    torch.backends.cudnn.benchmark = True
    return args.num_gpus


if __name__ == "__main__":
    args = default_argument_parser().parse_args()
    launch(main, args.num_gpus, args=(args,))  # expect: missing-destroy-process-group
