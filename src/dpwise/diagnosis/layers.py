"""A named layer of a model; lists of them grouped by type, so reports show no walls of names."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from torch import nn

EXAMPLES = 3  # names shown per type before "…"


class LayerDict(TypedDict):
    """A Layer in a JSON document or a saved file."""

    name: str
    kind: str


@dataclass(frozen=True)
class Layer:
    name: str  # dotted path from model.named_modules(); "" is the model itself
    kind: str  # the class name, e.g. "BatchNorm2d"

    @property
    def label(self) -> str:
        return self.name or "the model's own forward"

    def to_dict(self) -> LayerDict:
        return {"name": self.name, "kind": self.kind}


def layers_of(model: nn.Module, names: Iterable[str]) -> list[Layer]:
    """The Layer of each module name, in the model's order."""
    wanted = set(names)
    return [Layer(n, type(m).__name__) for n, m in model.named_modules() if n in wanted]


def batchnorm_layers(model: nn.Module) -> list[Layer]:
    """Layers that normalise with the statistics of the batch they see (each process's share)."""
    from torch import nn

    return [
        Layer(n, type(m).__name__)
        for n, m in model.named_modules()
        if isinstance(m, nn.modules.batchnorm._BatchNorm)
    ]


def sparse_layers(model: nn.Module) -> list[Layer]:
    """Embeddings with sparse=True: their gradients are sparse tensors."""
    from torch import nn

    return [
        Layer(n, type(m).__name__)
        for n, m in model.named_modules()
        if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and m.sparse
    ]


def dropout_layers(model: nn.Module) -> list[Layer]:
    """Random layers found by class (Dropout with p > 0, attention dropout): the fallback where
    the model's forward could not be watched."""
    from torch import nn

    return [
        Layer(n, type(m).__name__)
        for n, m in model.named_modules()
        if (isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0)
        or (isinstance(m, nn.MultiheadAttention) and m.dropout > 0)
    ]


def _group_text(kind: str, members: list[Layer]) -> str:
    count = len(members)
    noun = f"{kind} layer" if kind else "layer"
    noun += "" if count == 1 else "s"
    shown = ", ".join(m.label for m in members[:EXAMPLES])
    if count > EXAMPLES:
        return f"{count} {noun}, e.g. {shown}, …"
    return f"{count} {noun}: {shown}"


def group(layers: Iterable[Layer]) -> str:
    """'49 BatchNorm2d layers, e.g. a, b, c, …; 1 Dropout layer: head.drop' (largest first)."""
    by_kind: dict[str, list[Layer]] = {}
    for layer in layers:
        by_kind.setdefault(layer.kind, []).append(layer)
    ordered = sorted(by_kind.items(), key=lambda item: -len(item[1]))  # stable: first seen first
    return "; ".join(_group_text(kind, members) for kind, members in ordered)
