"""An entry script: the set-up helper creates the process group, the model is wrapped elsewhere,
and every rank writes the same copy of the parameters."""
import json
import sys

import torch.distributed as dist
from helper_plain_setup import setup_distributed


def run(params):
    return len(params)


def main(path):
    with open(path) as f:
        params = json.load(f)
    with open("params-used.json", "w") as f:  # expect: unguarded-rank-side-effect
        json.dump(params, f)
    rank = setup_distributed()
    run(params)
    if rank == 0:
        with open("done.txt", "w") as f:
            f.write("ok")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
