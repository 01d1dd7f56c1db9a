import torch

model = torch.nn.Linear(8, 1).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")


class Block(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx, x):
        return x * 2


for x in [torch.randn(4, 8, device="cuda")]:
    with torch.amp.autocast("cuda"):
        loss = model(x).sum()
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        loss = loss + model(x).sum()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
