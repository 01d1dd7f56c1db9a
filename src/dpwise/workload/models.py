"""Built-in models and their synthetic data sets. Sizes are factory arguments (--model-arg)."""

from __future__ import annotations

import torch
from torch import nn

from dpwise.errors import DpwiseError


def _not_a_size(sizes: dict[str, object]) -> tuple[str, object] | None:
    """The first (name, value) that is not a whole number of at least 1."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return name, value
    return None


def positive(flag: str, **sizes: object) -> None:
    """Every size is a whole number of at least 1: one line naming the argument otherwise."""
    bad = _not_a_size(sizes)
    if bad is not None:
        name, value = bad
        raise DpwiseError(f"{flag} {name}={value}: {name} must be a whole number of at least 1")


class SimpleModel(nn.Module):
    """The guide's model: Linear(1000→512), ReLU, Linear(512→10)."""

    def __init__(self, in_features: int = 1000, hidden: int = 512, classes: int = 10) -> None:
        positive("--model-arg", in_features=in_features, hidden=hidden, classes=classes)
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class SmallCNN(nn.Module):
    """Two conv blocks with BatchNorm for 3×image×image inputs (BatchNorm breaks equality)."""

    def __init__(self, channels: int = 16, classes: int = 10, image_size: int = 32) -> None:
        positive("--model-arg", channels=channels, classes=classes, image_size=image_size)
        super().__init__()
        del image_size  # the global pooling makes the network independent of it
        self.features = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(channels, 2 * channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(2 * channels),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(2 * channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


class TinyTransformer(nn.Module):
    """A pre-norm transformer encoder classifier over token ids (mean-pooled)."""

    def __init__(
        self,
        layers: int = 2,
        dim: int = 64,
        heads: int = 4,
        vocab: int = 1000,
        seq_len: int = 32,
        classes: int = 10,
        ffn: int | None = None,
        dropout: float = 0.0,
    ) -> None:
        sizes = {"layers": layers, "dim": dim, "heads": heads, "vocab": vocab, "seq_len": seq_len}
        positive("--model-arg", **sizes, classes=classes, **({} if ffn is None else {"ffn": ffn}))
        if dim % heads:
            raise DpwiseError(f"--model-arg heads={heads} must divide dim={dim} (e.g. heads=4)")
        if not 0 <= dropout < 1:
            raise DpwiseError(f"--model-arg dropout={dropout} must lie in [0, 1)")
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(seq_len, dim))
        block = nn.TransformerEncoderLayer(
            dim,
            heads,
            dim_feedforward=ffn or 4 * dim,
            dropout=dropout,
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.encoder(self.embed(tokens) + self.pos[: tokens.shape[1]])
        return self.head(self.norm(h).mean(dim=1))


def _labels(gen: torch.Generator, samples: int, classes: int) -> torch.Tensor:
    return torch.randint(0, classes, (samples,), generator=gen)


def _sizes(**values: object) -> None:
    """The built-in data sets' sizes are positive integers: say which --data-arg is not."""
    bad = _not_a_size(values)
    if bad is not None:
        name, value = bad
        raise DpwiseError(
            f"--data-arg {name} must be a positive integer, got {value!r}; "
            f"write e.g. --data-arg {name}=1000"
        )


def simple_data(
    seed: int, samples: int = 10_000, in_features: int = 1000, classes: int = 10, **_: object
) -> tuple[torch.Tensor, torch.Tensor]:
    """The guide's data set: samples × in_features standard-normal inputs, uniform labels."""
    _sizes(samples=samples, in_features=in_features, classes=classes)
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(samples, in_features, generator=gen), _labels(gen, samples, classes)


def image_data(
    seed: int, samples: int = 2048, classes: int = 10, image_size: int = 32, **_: object
) -> tuple[torch.Tensor, torch.Tensor]:
    _sizes(samples=samples, classes=classes, image_size=image_size)
    gen = torch.Generator().manual_seed(seed)
    images = torch.randn(samples, 3, image_size, image_size, generator=gen)
    return images, _labels(gen, samples, classes)


def token_data(
    seed: int,
    samples: int = 2048,
    vocab: int = 1000,
    seq_len: int = 32,
    classes: int = 10,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    _sizes(samples=samples, vocab=vocab, seq_len=seq_len, classes=classes)
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (samples, seq_len), generator=gen)
    return tokens, _labels(gen, samples, classes)
