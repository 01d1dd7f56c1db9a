"""The workload flags every command that builds a model takes (train, compare, advise), declared
once: --model, --model-arg, --data, --data-arg and --loss."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpwise.errors import DpwiseError
from dpwise.infra.settings import setting

LOSSES = ("auto", "cross-entropy", "token-cross-entropy", "mse", "model")


def parse_kv(items: list[str] | None, flag: str) -> dict[str, Any]:
    """Turn ['layers=4', 'dim=256'] into {'layers': 4, 'dim': 256} (int, float, bool or str)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise DpwiseError(f"{flag} {item!r} is not KEY=VALUE; write e.g. {flag} layers=4")
        out[key.strip().replace("-", "_")] = _literal(raw.strip())
    return out


def _literal(raw: str) -> Any:
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


MODEL_HELP = (
    "simple | cnn | transformer | torchvision:NAME | timm:NAME | transformers:TYPE-or-Class | "
    "pkg.mod:factory (library models start from fresh weights; nothing is downloaded)"
)
DATA_HELP = (
    "pkg.mod:factory returning (inputs, targets), a dict of tensors or a Dataset; or 'synthetic' "
    "(--data-arg shape=3x224x224 classes=10 | vocab=V seq_len=T | outputs=K, samples=N). "
    "Default: the built-in model's data, else synthetic data inferred from the model"
)
LOSS_HELP = (
    "auto (default): the model's own loss when it returns one, cross-entropy for class labels, "
    "token-cross-entropy for (batch, tokens) labels, mse for real-valued targets"
)
WORKLOAD_SETTINGS = ("model", "model_args", "data", "data_args", "loss")


def key_values(flag: str, help: str) -> Any:
    """A repeatable `KEY=VALUE` flag gathered into a dict (`--model-arg depth=4`)."""
    return setting(
        factory=dict, flag=flag, parse=parse_kv, action="append", metavar="KEY=VALUE", help=help
    )


@dataclass(frozen=True, kw_only=True)
class WorkloadSettings:
    """The workload flags every command that builds a model takes (train, compare, advise)."""

    model: str = setting("simple", help=MODEL_HELP)
    model_args: dict[str, Any] = key_values("--model-arg", "factory argument")
    data: str | None = setting(None, help=DATA_HELP)
    data_args: dict[str, Any] = key_values("--data-arg", "e.g. samples=20000")
    loss: str = setting("auto", choices=LOSSES, help=LOSS_HELP)
