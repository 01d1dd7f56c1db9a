"""dpwise: choose, run and verify a PyTorch data-parallel strategy."""

from dpwise.errors import DpwiseError

__version__ = "0.1.0"
__all__ = ["DpwiseError", "__version__"]
