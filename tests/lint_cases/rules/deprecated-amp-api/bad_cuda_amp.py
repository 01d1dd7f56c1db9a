import torch
from torch.cuda.amp import GradScaler, autocast

model = torch.nn.Linear(8, 1).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = GradScaler()  # expect: deprecated-amp-api


class Block(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd  # expect: deprecated-amp-api
    def forward(ctx, x):
        return x * 2


for x in [torch.randn(4, 8, device="cuda")]:
    with autocast():  # expect: deprecated-amp-api
        loss = model(x).sum()
    with torch.cuda.amp.autocast(dtype=torch.bfloat16):  # expect: deprecated-amp-api
        loss = loss + model(x).sum()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
