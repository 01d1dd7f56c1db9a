"""`enable()` builds an environment object whose method makes the process group: the script owns
it and never destroys it."""
import torch
from tools.distenv import enable


def main():
    enable()  # expect: missing-destroy-process-group
    torch.nn.Linear(2, 2)(torch.randn(1, 2)).sum().backward()


if __name__ == "__main__":
    main()
