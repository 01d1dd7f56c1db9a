"""Real architectures for the estimate benchmark: `--model real_models:resnet18` and so on.

torchvision, timm and transformers are optional: a factory raises ImportError when its library is
missing, and the benchmark reports the model as skipped with that reason. Weights are never
downloaded: every model is built from its configuration with random initial weights.
"""

from __future__ import annotations

import torch
from torch import nn


def resnet18(classes: int = 10) -> nn.Module:
    import torchvision

    return torchvision.models.resnet18(num_classes=classes)


def mobilenet_v3_small(classes: int = 10) -> nn.Module:
    import torchvision

    return torchvision.models.mobilenet_v3_small(num_classes=classes)


def vit_tiny(classes: int = 10, image: int = 64) -> nn.Module:
    import timm

    return timm.create_model("vit_tiny_patch16_224", num_classes=classes, img_size=image)


class Logits(nn.Module):
    """Hands dpwise the logits of a transformers model called on token ids."""

    def __init__(self, model: nn.Module, last_token: bool) -> None:
        super().__init__()
        self.model, self.last_token = model, last_token

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = torch.ones_like(ids)  # as a tokenizer hands it: transformers checks its values
        logits = self.model(input_ids=ids, attention_mask=mask).logits
        return logits[:, -1] if self.last_token else logits


def gpt2(layers: int = 2) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=layers, vocab_size=8192, n_positions=128)
    return Logits(GPT2LMHeadModel(config), last_token=True)


def bert(layers: int = 2, classes: int = 10) -> nn.Module:
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(num_hidden_layers=layers, vocab_size=8192, num_labels=classes)
    return Logits(BertForSequenceClassification(config), last_token=False)


def images(seed: int = 0, samples: int = 512, size: int = 32, classes: int = 10):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, 3, size, size, generator=gen)
    return x, torch.randint(0, classes, (samples,), generator=gen)


def tokens(seed: int = 0, samples: int = 512, length: int = 64, vocab: int = 8192):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(0, vocab, (samples, length), generator=gen)
    return x, torch.randint(0, 10, (samples,), generator=gen)
