import torch


class Scale(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)  # inputs in fp32
    def forward(ctx, x):
        return x * 2

    @staticmethod
    @torch.cuda.amp.custom_bwd  # backward runs like forward
    def backward(ctx, grad):
        return grad * 2
