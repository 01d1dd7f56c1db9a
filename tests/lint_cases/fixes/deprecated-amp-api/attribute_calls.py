"""AMP through `torch.cuda.amp.*` attributes."""
import torch  # the only import

model = torch.nn.Linear(4, 4)
scaler = torch.cuda.amp.GradScaler(init_scale=2.0**10)  # one scaler per process
late = torch.cuda.amp.GradScaler(
    2.0**12,  # init_scale, by position
    growth_interval=100,  # keyword kept
)
with torch.cuda.amp.autocast(True, torch.bfloat16):  # positional: enabled, dtype
    out = model(torch.ones(2, 4))
with torch.cpu.amp.autocast(enabled=True):
    out = model(torch.ones(2, 4))
