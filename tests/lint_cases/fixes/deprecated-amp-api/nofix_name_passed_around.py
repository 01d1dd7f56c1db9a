import contextlib

import torch
from torch.cuda.amp import autocast

# `autocast` is used as a value, not only called: rewriting its import would need every use
# reviewed, so no fix is offered.
context = autocast if torch.cuda.is_available() else contextlib.nullcontext
with autocast():
    pass
