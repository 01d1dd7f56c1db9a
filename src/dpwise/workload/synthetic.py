"""Synthetic data described on the command line (``--data synthetic``) or inferred from the model.

``--data-arg`` fields: ``shape=3x224x224`` (one sample's input), ``dtype=float32``, ``classes=N``
(integer labels), ``vocab=V`` and ``seq_len=T`` (token inputs; without ``classes`` the targets are
the next tokens, as a language model trains), ``outputs=K`` (real-valued targets: regression),
``inputs=dict`` (inputs as a dict: ``input_ids``/``attention_mask`` or ``pixel_values``;
``inputs=dict+labels`` adds the targets as ``labels``, for a model that computes its own loss
from them, as an encoder-decoder does),
``samples=N``. What is not given is inferred from the model (a transformers config, timm's
``pretrained_cfg``, torchvision's first layer and classifier) and the data says what it inferred.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import torch
from torch import nn

from dpwise.errors import DpwiseError
from dpwise.workload.objective import IGNORE_INDEX

NAME = "synthetic"
BYTES_CAP = 256 * 1024**2  # default sample count keeps the inputs under this size
DEFAULT_SAMPLES = 1024
INPUTS = ("tensor", "dict", "dict+labels")
_DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class Spec:
    shape: tuple[int, ...] | None = None  # features/images; None for tokens
    vocab: int | None = None
    seq_len: int | None = None
    classes: int | None = None
    outputs: int | None = None
    dtype: str = "float32"
    inputs: str = "tensor"  # or "dict", or "dict+labels" (the targets also as "labels")
    samples: int | None = None
    source: str = "given"

    @property
    def tokens(self) -> bool:
        return self.vocab is not None

    def token_shape(self) -> tuple[int, int]:
        """(vocab, seq_len) of token inputs (`complete` gives seq_len its default)."""
        if self.vocab is None or self.seq_len is None:
            raise DpwiseError("--data synthetic: token inputs need vocab=V and seq_len=T")
        return self.vocab, self.seq_len

    def sample_shape(self) -> tuple[int, ...]:
        """One sample's shape, where the inputs are no tokens."""
        if self.shape is None:
            raise DpwiseError("--data synthetic: give shape=… (or vocab=… for token inputs)")
        return self.shape

    @property
    def task(self) -> str:
        if self.outputs is not None:
            return "regression"
        if self.classes is not None:
            return "classification"
        return "language modelling" if self.tokens else "unknown"


def spec_from_args(args: dict[str, Any]) -> Spec:
    known = {f.name for f in fields(Spec)} - {"source"}
    unknown = sorted(set(args) - known - {"seed"})
    if unknown:
        raise DpwiseError(
            f"--data synthetic: unknown --data-arg {unknown[0]}; use {', '.join(sorted(known))}"
        )
    values = {k: v for k, v in args.items() if k in known}
    if "shape" in values:
        values["shape"] = parse_shape(values["shape"])
    for name in ("vocab", "seq_len", "classes", "outputs", "samples"):
        if name in values and (not isinstance(values[name], int) or values[name] < 1):
            raise DpwiseError(f"--data-arg {name} must be a positive integer, got {values[name]!r}")
    if values.get("dtype", "float32") not in _DTYPES:
        raise DpwiseError(f"--data-arg dtype must be one of {', '.join(_DTYPES)}")
    if values.get("inputs", "tensor") not in INPUTS:
        raise DpwiseError(f"--data-arg inputs must be {', '.join(INPUTS[:-1])} or {INPUTS[-1]}")
    return Spec(**values)


def parse_shape(raw: Any) -> tuple[int, ...]:
    parts = [raw] if isinstance(raw, int) else str(raw).lower().replace("×", "x").split("x")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        shape = ()
    if not shape or min(shape) < 1:
        raise DpwiseError(f"--data-arg shape={raw!r} is not a shape; write e.g. shape=3x224x224")
    return shape


def is_complete(spec: Spec) -> bool:
    """Inputs and targets are both described: nothing to infer from the model (token inputs
    need their length too: `complete` gives it its default)."""
    has_inputs = spec.shape is not None or (spec.tokens and spec.seq_len is not None)
    return has_inputs and (spec.tokens or spec.classes is not None or spec.outputs is not None)


def complete(given: Spec, model: nn.Module) -> Spec:
    """Fill what the arguments leave open from the model (built on the meta device)."""
    if given.shape is not None or given.tokens:
        if given.classes is None and given.outputs is None and not given.tokens:
            return replace(given, classes=_last_linear(model), source="given + classes inferred")
        return replace(given, seq_len=given.seq_len or 32) if given.tokens else given
    inferred = infer(model)
    merged = {f.name: getattr(given, f.name) for f in fields(Spec)}
    for f in fields(Spec):
        if merged[f.name] in (None, Spec.__dataclass_fields__[f.name].default):
            merged[f.name] = getattr(inferred, f.name)
    merged["source"] = inferred.source
    return Spec(**merged)


def infer(model: nn.Module) -> Spec:
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "model_type"):
        return _from_transformers(model, config)
    timm_cfg = getattr(model, "pretrained_cfg", None) or getattr(model, "default_cfg", None)
    if isinstance(timm_cfg, dict) and "input_size" in timm_cfg:
        classes = getattr(model, "num_classes", None) or _last_linear(model)
        shape = tuple(timm_cfg["input_size"])
        size = getattr(getattr(model, "patch_embed", None), "img_size", None)  # img_size=… given
        if isinstance(size, (tuple, list)) and len(size) == 2:
            shape = (shape[0], *size)
        return Spec(shape=shape, classes=classes, source="timm's pretrained_cfg")
    return _from_layers(model)


def _from_transformers(model: nn.Module, config: Any) -> Spec:
    cls = type(model).__name__
    where = f"the transformers config of {cls}"
    if "ImageClassification" in cls:
        size = config.image_size
        size = size if isinstance(size, int) else size[0]
        shape = (getattr(config, "num_channels", 3), size, size)
        return Spec(shape=shape, classes=config.num_labels, inputs="dict", source=where)
    vocab = getattr(config, "vocab_size", None)
    if vocab is None:
        raise DpwiseError(f"cannot infer the inputs of {cls}; give --data synthetic with shape=…")
    positions: int = getattr(config, "max_position_embeddings", 0) or getattr(
        config, "n_positions", 64
    )
    seq = min(64, positions)
    if "SequenceClassification" in cls:
        classes = config.num_labels
        return Spec(vocab=vocab, seq_len=seq, classes=classes, inputs="dict", source=where)
    if getattr(config, "is_encoder_decoder", False) and hasattr(model, "lm_head"):
        # a sequence-to-sequence LM (T5, BART …): its decoder's inputs come from the labels
        return Spec(vocab=vocab, seq_len=seq, inputs="dict+labels", source=where)
    if "LM" in cls or "CausalLM" in cls:
        return Spec(vocab=vocab, seq_len=seq, inputs="dict", source=where)
    raise DpwiseError(
        f"cannot infer training targets for {cls} (no head); use a class with a head, e.g. "
        f"--model-arg task=causal-lm or task=seq2seq-lm, or give --data pkg.module:factory"
    )


def _from_layers(model: nn.Module) -> Spec:
    first = next((m for m in model.modules() if _is_leaf_with_params(m)), None)
    where = f"its first layer ({type(first).__name__}) and last Linear"
    if isinstance(first, nn.Embedding):
        vocab = first.num_embeddings
        return Spec(vocab=vocab, seq_len=32, classes=_last_linear(model), source=where)
    if isinstance(first, nn.Linear):
        shape: tuple[int, ...] = (first.in_features,)
    elif isinstance(first, nn.Conv2d):
        size = getattr(model, "image_size", None) or 224
        shape = (first.in_channels, size, size)
    elif isinstance(first, nn.Conv1d):
        shape = (first.in_channels, 128)
    else:
        shape = ()
    if shape:
        return Spec(shape=shape, classes=_last_linear(model), source=where)
    raise DpwiseError(
        "cannot infer the model's inputs; give --data synthetic --data-arg shape=… --data-arg "
        "classes=… (or vocab=… seq_len=…), or --data pkg.module:factory"
    )


def _is_leaf_with_params(m: nn.Module) -> bool:
    return not list(m.children()) and any(True for _ in m.parameters(recurse=False))


def _last_linear(model: nn.Module) -> int:
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise DpwiseError(
            "cannot infer the number of classes (the model has no Linear layer); give "
            "--data-arg classes=N or outputs=K"
        )
    return linears[-1].out_features


def sample_count(spec: Spec) -> int:
    if spec.samples is not None:
        return spec.samples
    if spec.tokens:
        per = 8 * spec.token_shape()[1] * 2
    else:
        per = _DTYPES[spec.dtype].itemsize
        for d in spec.sample_shape():
            per *= d
    return max(64, min(DEFAULT_SAMPLES, BYTES_CAP // max(1, per) // 64 * 64))


def generate(spec: Spec, seed: int) -> tuple[Any, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    n = sample_count(spec)
    if spec.tokens:
        vocab, seq_len = spec.token_shape()
        tokens = torch.randint(0, vocab, (n, seq_len), generator=gen)
        x: Any = tokens
        if spec.inputs != "tensor":
            x = {"input_ids": tokens, "attention_mask": torch.ones_like(tokens)}
    else:
        x = torch.randn(n, *spec.sample_shape(), generator=gen).to(_DTYPES[spec.dtype])
        if spec.inputs != "tensor":
            x = {"pixel_values": x}
    targets = _targets(spec, n, gen, tokens if spec.tokens else None)
    if spec.inputs == "dict+labels":
        x["labels"] = targets
    return x, targets


def _targets(spec: Spec, n: int, gen: torch.Generator, tokens: torch.Tensor | None) -> torch.Tensor:
    if spec.outputs is not None:
        return torch.randn(n, spec.outputs, generator=gen)
    if spec.classes is not None:
        return torch.randint(0, spec.classes, (n,), generator=gen)
    if tokens is None:
        raise DpwiseError("--data synthetic needs classes=N or outputs=K for non-token inputs")
    nxt = torch.full_like(tokens, IGNORE_INDEX)
    nxt[:, :-1] = tokens[:, 1:]  # each position predicts the next token
    return nxt


def describe(spec: Spec) -> str:
    n = sample_count(spec)
    if spec.tokens:
        what = f"{n:,} sequences of {spec.seq_len} tokens (vocab {spec.vocab:,})"
    else:
        what = f"{n:,} inputs of {'×'.join(map(str, spec.sample_shape()))} {spec.dtype}"
    target = {
        "classification": f"{spec.classes} classes",
        "regression": f"{spec.outputs} real-valued outputs",
        "language modelling": "next-token targets",
    }.get(spec.task, "no targets")
    as_dict = {"dict": ", as a dict", "dict+labels": ", as a dict with the targets as labels"}.get(
        spec.inputs, ""
    )
    return f"synthetic data: {what}{as_dict}, {target} ({spec.source})"
