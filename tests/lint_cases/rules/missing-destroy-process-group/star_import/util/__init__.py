import util.utils as utils
from .engine import train_one_epoch
