"""Model shortcuts through the libraries' own registries; never downloads weights or configs.

- ``torchvision:NAME``   → ``torchvision.models.get_model(NAME, weights=None, **args)``
- ``timm:NAME``          → ``timm.create_model(NAME, pretrained=False, **args)``
- ``transformers:X``     → X is a model type (``gpt2``, ``bert``, ``vit``) or a model class
  (``GPT2LMHeadModel``, ``BertForSequenceClassification``); ``--model-arg`` overrides the config's
  defaults, and ``task=causal-lm|seq2seq-lm|sequence-classification|image-classification|masked-lm``
  picks the head for a model type (default: causal-lm where the type has one, else seq2seq-lm
  (T5, BART: an encoder-decoder trained on its labels), else image- then
  sequence-classification). Weights are freshly initialised from the seed.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

from torch import nn

from dpwise.errors import DpwiseError

LIBRARIES = ("torchvision", "timm", "transformers")
_NO_DOWNLOAD = ("weights", "pretrained", "pretrained_cfg_overlay", "checkpoint_path")
TASKS = {
    "causal-lm": "AutoModelForCausalLM",
    "seq2seq-lm": "AutoModelForSeq2SeqLM",
    "image-classification": "AutoModelForImageClassification",
    "sequence-classification": "AutoModelForSequenceClassification",
    "masked-lm": "AutoModelForMaskedLM",
}
# The auto mappings that say which model types have which head (looked up in this order).
_TASK_MAPPINGS = (
    ("causal-lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
    ("seq2seq-lm", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
    ("image-classification", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES"),
    ("sequence-classification", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"),
)


def is_shortcut(spec: str) -> bool:
    library, sep, name = spec.partition(":")
    return bool(sep and name) and library in LIBRARIES


def factory(spec: str) -> Callable[..., nn.Module]:
    """A factory ``(**model_args) -> nn.Module`` for ``library:name``; imports fail as one line."""
    library, _, name = spec.partition(":")
    module = _import(library, spec)
    build = {"torchvision": _torchvision, "timm": _timm, "transformers": _transformers}[library]

    def make(**kwargs: Any) -> nn.Module:
        refused = sorted(set(kwargs) & set(_NO_DOWNLOAD))
        if refused:
            raise DpwiseError(
                f"--model {spec}: --model-arg {refused[0]} would load weights; dpwise trains from "
                "freshly initialised weights and never downloads (drop that argument)"
            )
        return build(module, name, spec, kwargs)

    make.__name__ = f"{library}_{name}"
    return make


def _import(library: str, spec: str) -> Any:
    broken = broken_torchvision()
    if broken and library != "transformers":  # timm and torchvision models need torchvision
        raise DpwiseError(f"--model {spec}: {library} needs torchvision, but {broken}")
    if broken:
        sys.modules["torchvision"] = None  # type: ignore[assignment]  # transformers skips it
        print(f"dpwise: note: {broken}; transformers runs without it", file=sys.stderr)
    try:
        return importlib.import_module(library)
    except ModuleNotFoundError as exc:
        if exc.name != library:
            raise DpwiseError(
                f"--model {spec}: {library} needs {exc.name}: {_first(exc)}"
            ) from None
        raise DpwiseError(
            f"--model {spec}: {library} is not installed; pip install {library} (or dpwise's "
            "models extra), or use pkg.module:factory"
        ) from None
    except Exception as exc:  # an optional library can fail to import in any way
        raise DpwiseError(
            f"--model {spec}: {library} is not usable here ({type(exc).__name__}: {_first(exc)}); "
            f"install a {library} build that matches your torch, or use pkg.module:factory"
        ) from None


def _first(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else "import failed"


def broken_torchvision() -> str | None:
    """Why the installed torchvision cannot load against this torch (a build for another torch or
    CUDA: "operator torchvision::nms does not exist"), or None where it loads or is absent.

    transformers imports torchvision whenever it is installed, so a broken one breaks every
    transformers model with an unrelated message; timm and torchvision's models need it."""
    if "torchvision" in sys.modules:
        return None  # loaded already (or hidden by an earlier call)
    try:
        if importlib.util.find_spec("torchvision") is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        importlib.import_module("torchvision")
    except Exception as exc:
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]  # what the failed import left half-made
        import torch

        version = _version("torchvision")
        return (
            f"the installed torchvision{f' {version}' if version else ''} cannot load against "
            f"torch {torch.__version__} ({type(exc).__name__}: {_first(exc)}): install the "
            "torchvision built for this torch (from the index your torch came from), or "
            "uninstall torchvision"
        )
    return None


def _version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _torchvision(tv: Any, name: str, spec: str, kwargs: dict[str, Any]) -> nn.Module:
    models = importlib.import_module("torchvision.models")
    if name not in models.list_models():
        raise DpwiseError(
            f"--model {spec}: torchvision has no model {name!r}; e.g. "
            f"{', '.join(sorted(models.list_models(module=models))[:5])} (torchvision.models."
            "list_models() lists all)"
        )
    return models.get_model(name, weights=None, **kwargs)


def _timm(timm: Any, name: str, spec: str, kwargs: dict[str, Any]) -> nn.Module:
    if not timm.is_model(name):
        raise DpwiseError(
            f"--model {spec}: timm has no model {name!r} (timm.list_models('*{name[:4]}*') "
            "lists similar names)"
        )
    return timm.create_model(name, pretrained=False, **kwargs)


def _transformers(tf: Any, name: str, spec: str, kwargs: dict[str, Any]) -> nn.Module:
    tf.logging.set_verbosity_error()  # config notes (e.g. token ids beyond a small vocab) are noise
    kwargs = dict(kwargs)
    task = kwargs.pop("task", None)
    cls = getattr(tf, name, None)
    if isinstance(cls, type) and hasattr(cls, "config_class") and hasattr(cls, "from_pretrained"):
        if task is not None:
            raise DpwiseError(f"--model {spec}: task= is for a model type, not a model class")
        model = cls(cls.config_class(**kwargs))
    else:
        model = _auto_model(tf, name, spec, task, kwargs)
    if hasattr(model.config, "use_cache"):
        model.config.use_cache = False  # training: no key/value cache
    _decoder_start(model.config)
    return model


def _decoder_start(config: Any) -> None:
    """An encoder-decoder builds its decoder's inputs from the labels, shifted right after a
    start token. A config made from scratch may leave that token unset (T5's lives in its
    pretrained generation config): the pad token starts, as T5 and BART are trained."""
    if not getattr(config, "is_encoder_decoder", False):
        return
    try:
        start = config.decoder_start_token_id
    except AttributeError:
        start = None
    if start is None:
        pad = getattr(config, "pad_token_id", None)
        config.decoder_start_token_id = 0 if pad is None else pad


def _auto_model(tf: Any, model_type: str, spec: str, task: Any, kwargs: dict) -> nn.Module:
    try:
        config = tf.AutoConfig.for_model(model_type, **kwargs)
    except ValueError:
        raise DpwiseError(
            f"--model {spec}: transformers knows no model type or class {model_type!r}; give a "
            "model type (gpt2, bert, vit, …) or a class name (GPT2LMHeadModel, …)"
        ) from None
    task = task or default_task(model_type)
    if task not in TASKS:
        raise DpwiseError(
            f"--model {spec}: task={task!r} is not one of {', '.join(TASKS)}"
            if task
            else f"--model {spec}: {model_type} has no causal-lm, seq2seq-lm, image- or sequence-"
            "classification head; give --model-arg task=… or a model class name"
        )
    auto = getattr(tf, TASKS[task])
    if model_type not in _mapping(task):
        raise DpwiseError(f"--model {spec}: {model_type} has no {task} head in transformers")
    return auto.from_config(config)  # a bad config value fails as the factory's own error


def _mapping(task: str) -> Any:
    """transformers' table of the model types that have ``task``'s head."""
    names = {"masked-lm": "MODEL_FOR_MASKED_LM_MAPPING_NAMES", **dict(_TASK_MAPPINGS)}
    mappings = importlib.import_module("transformers.models.auto.modeling_auto")
    return getattr(mappings, names[task], {})


def default_task(model_type: str) -> str | None:
    for task, _ in _TASK_MAPPINGS:
        if model_type in _mapping(task):
            return task
    return None
