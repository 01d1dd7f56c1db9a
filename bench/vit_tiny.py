"""A ViT-tiny-sized image classifier and synthetic images, written for the memory benchmark.

The sizes of ViT-Ti/16 (Touvron et al., DeiT): 224×224 images, 16×16 patches, width 192, depth 12,
3 heads, MLP 768, 1000 classes: about 5.7 M parameters. Dropout is 0, so it keeps the
equivalence contract. Use: --model vit_tiny:build --data vit_tiny:images (bench/ on PYTHONPATH);
image=N (a model and a data argument) shrinks the images where a 224-pixel step is too slow.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """Pre-norm attention and MLP, as in ViT/DeiT (no dropout)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d)
        x = x + self.proj(attn)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    def __init__(
        self, image: int = 224, patch: int = 16, dim: int = 192, depth: int = 12, heads: int = 3
    ) -> None:
        super().__init__()
        tokens = (image // patch) ** 2 + 1
        self.patches = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
        self.blocks = nn.Sequential(*(Block(dim, heads) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patches(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(len(x), -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


def build(image: int = 224) -> nn.Module:
    return ViT(image)


def images(
    seed: int = 0, samples: int = 256, image: int = 224
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, 3, image, image, generator=gen)
    return x, torch.randint(0, 1000, (samples,), generator=gen)
