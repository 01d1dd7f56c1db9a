"""A package that offers its launcher through a re-export."""
from .launcher import *  # noqa: F403
