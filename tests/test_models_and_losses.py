"""Models that are not `x → logits`, the loss choice, synthetic data and library shortcuts."""

from __future__ import annotations

import importlib

import pytest
import torch
from torch import nn

from dpwise.errors import DpwiseError
from dpwise.infra.hardware import Hardware
from dpwise.launch.env import DistEnv
from dpwise.strategies import make_strategy
from dpwise.train.config import TrainConfig
from dpwise.train.engine import Loop
from dpwise.train.plan import resolve
from dpwise.workload.data import BatchSource
from dpwise.workload.objective import Objective
from dpwise.workload.spec import resolve_workload, workload_for
from dpwise.workload.synthetic import (
    Spec,
    complete,
    generate,
    is_complete,
    parse_shape,
    spec_from_args,
)

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

TINY_GPT2 = {
    "n_layer": 2,
    "n_embd": 32,
    "n_head": 2,
    "vocab_size": 97,
    "n_positions": 16,
    "resid_pdrop": 0.0,
    "embd_pdrop": 0.0,
    "attn_pdrop": 0.0,
}
SMALL_ENCODER = {
    "num_hidden_layers": 1,
    "hidden_size": 32,
    "num_attention_heads": 2,
    "intermediate_size": 64,
}


def _train(cfg: TrainConfig):
    plan = resolve(cfg, Hardware(cuda_devices=0, cpu_cores=1), DistEnv())
    strategy = make_strategy(plan.strategy, DistEnv())
    return Loop(plan, strategy, workload_for(cfg)).run()


# -- the loss -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("out", "y", "kind"),
    [
        (torch.randn(4, 3), torch.tensor([0, 1, 2, 0]), "cross-entropy"),
        (torch.randn(4, 5, 7), torch.randint(0, 7, (4, 5)), "token-cross-entropy"),
        (torch.randn(4, 2), torch.randn(4, 2), "mse"),
        ({"loss": torch.tensor(1.5), "logits": torch.randn(4, 3)}, None, "model"),
    ],
)
def test_auto_picks_the_loss_the_targets_call_for(out, y, kind):
    objective = Objective("auto", "m")
    loss = objective(out, y)
    assert objective.kind == kind and loss.dim() == 0 and torch.isfinite(loss)


def test_outputs_are_read_from_tuples_dicts_and_model_outputs():
    logits = torch.randn(4, 3)
    y = torch.tensor([0, 1, 2, 0])
    want = nn.functional.cross_entropy(logits, y)
    output = transformers.modeling_outputs.SequenceClassifierOutput(logits=logits)
    for out in (logits, (logits, torch.zeros(1)), {"logits": logits, "extra": 1}, output):
        assert torch.equal(Objective("cross-entropy", "m")(out, y), want)
    # (loss, logits): what transformers returns with labels
    assert Objective("model", "m")((torch.tensor(2.0), logits), None) == 2.0
    # DataParallel gathers one loss per GPU into a vector: the batch's loss is their mean
    assert Objective("model", "m")({"loss": torch.tensor([1.0, 3.0])}, None) == 2.0
    assert Objective("auto", "m")((torch.tensor([1.0, 3.0]), logits), None) == 2.0


def test_token_cross_entropy_skips_ignored_labels_like_transformers():
    torch.manual_seed(0)
    logits, ids = torch.randn(2, 6, 11), torch.randint(0, 11, (2, 6))
    labels = torch.full_like(ids, -100)
    labels[:, :-1] = ids[:, 1:]
    ours = Objective("token-cross-entropy", "m")(logits, labels)
    theirs = nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 11), ids[:, 1:].reshape(-1))
    assert torch.allclose(ours, theirs)


@pytest.mark.parametrize(
    ("kind", "out", "y", "message"),
    [
        ("cross-entropy", torch.randn(4, 3), torch.randn(4), "integer class labels"),
        ("cross-entropy", torch.randn(4, 5, 3), torch.zeros(4, 5).long(), "token-cross-entropy"),
        ("mse", torch.randn(4, 3), torch.randn(4, 2), "one size"),
        ("model", torch.randn(4, 3), None, "returned no 'loss'"),
        ("cross-entropy", torch.randn(4, 3), None, "needs targets"),
        ("auto", {"a": torch.ones(1), "b": torch.ones(1)}, torch.zeros(4).long(), "no 'logits'"),
    ],
)
def test_a_loss_that_does_not_fit_is_one_line(kind, out, y, message):
    with pytest.raises(DpwiseError, match=message) as err:
        Objective(kind, "m")(out, y)
    assert "\n" not in str(err.value)


# -- inputs that are dicts, items that are dicts --------------------------------------------------
def test_dict_inputs_and_dict_items_are_sliced_by_row(userpkg):
    import shapes_pkg

    source = BatchSource(shapes_pkg.dict_data(0, 10), "d")
    x, y = source.get(torch.tensor([3, 1]))
    assert set(x) == {"input_ids", "attention_mask"} and x["input_ids"].shape == (2, 7)
    assert y.shape == (2,)
    items = BatchSource(shapes_pkg.dict_items(0, 10), "d")
    x, y = items.get(torch.tensor([0, 5, 9]))
    assert y is None and x["labels"].shape == (3,) and x["x"].shape == (3, 6)
    with pytest.raises(DpwiseError, match="different numbers of rows"):
        BatchSource(({"a": torch.ones(3, 2), "b": torch.ones(4, 2)}, torch.ones(3)), "d")


@pytest.mark.parametrize(
    ("model", "data", "loss"),
    [
        ("shapes_pkg:dict_model", "shapes_pkg:dict_data", "auto"),
        ("shapes_pkg:own_loss_model", "shapes_pkg:dict_items", "auto"),
        ("shapes_pkg:own_loss_model", "shapes_pkg:dict_items", "model"),
        ("shapes_pkg:regressor", "synthetic", "mse"),
    ],
)
def test_the_engine_trains_models_that_are_not_x_to_logits(userpkg, model, data, loss):
    data_args = {"shape": 5, "outputs": 2, "samples": 64} if data == "synthetic" else {}
    cfg = TrainConfig(model=model, data=data, data_args=data_args, loss=loss, batch_size=16)
    trained = _train(cfg)
    assert len(trained.result.losses) == 2 * 4
    assert all(torch.isfinite(torch.tensor(trained.result.losses)))
    assert trained.result.losses[-1] < trained.result.losses[0] * 1.5


def test_data_that_does_not_fit_the_model_fails_on_the_first_batch_in_one_line(userpkg):
    cfg = TrainConfig(
        model="shapes_pkg:regressor", data="synthetic", data_args={"shape": 7, "outputs": 2}
    )
    with pytest.raises(DpwiseError, match=r"failed on the first batch \(per sample: 7 float32\)"):
        _train(cfg)


def test_a_model_the_meta_device_cannot_build_is_inspected_on_the_cpu(userpkg):
    w = resolve_workload("shapes_pkg:item_in_init", {}, None, {"samples": 32})
    assert w.synthetic_spec.shape == (6,) and w.synthetic_spec.classes == 3
    given = resolve_workload("shapes_pkg:item_in_init", {}, "synthetic", {"shape": 6, "classes": 3})
    assert given.synthetic_spec.source == "given"
    assert isinstance(w.build_for_inspection(), nn.Module)


def test_out_of_memory_on_the_first_batch_keeps_its_own_error(userpkg):
    w = resolve_workload("shapes_pkg:out_of_memory", {}, "synthetic", {"shape": 6, "classes": 3})
    x, y = w.load_data(0).get(torch.arange(4))
    with pytest.raises(torch.OutOfMemoryError):
        w.loss(w.build_model(), x, y)


# -- synthetic data -------------------------------------------------------------------------------
def test_shapes_and_args_are_parsed_with_one_line_errors():
    assert parse_shape("3x224x224") == (3, 224, 224) and parse_shape(1000) == (1000,)
    assert spec_from_args({"shape": "3×32×32", "classes": 10}).shape == (3, 32, 32)
    for args, message in (
        ({"shape": "3xax2"}, "is not a shape"),
        ({"classes": 0}, "positive integer"),
        ({"colour": "red"}, "unknown --data-arg colour"),
        ({"dtype": "int8"}, "dtype must be one of"),
    ):
        with pytest.raises(DpwiseError, match=message):
            spec_from_args(args)


def test_synthetic_data_is_inferred_from_the_first_and_last_layers():
    cnn = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 7))
    spec = complete(Spec(), cnn)
    assert spec.shape == (3, 224, 224) and spec.classes == 7 and "Conv2d" in spec.source
    mlp = nn.Sequential(nn.Linear(12, 5), nn.ReLU(), nn.Linear(5, 3))
    assert complete(Spec(samples=8), mlp).shape == (12,)
    x, y = generate(complete(Spec(samples=8), mlp), seed=1)
    assert x.shape == (8, 12) and y.max() < 3
    # what is given wins over what is inferred
    assert complete(Spec(shape=(3, 32, 32)), cnn).shape == (3, 32, 32)
    with pytest.raises(DpwiseError, match="cannot infer the model's inputs"):
        complete(Spec(), nn.Sequential(nn.LSTM(3, 3)))


def test_token_inputs_given_without_their_length_take_the_default_length():
    """`--data-arg vocab=50 --data-arg classes=3` without seq_len counted as complete, and
    sizing its data failed with a TypeError (None * int)."""
    given = spec_from_args({"vocab": 50, "classes": 3, "samples": 8})
    assert not is_complete(given)
    spec = complete(given, nn.Sequential(nn.Embedding(50, 4), nn.Linear(4, 3)))
    x, y = generate(spec, seed=0)
    assert x.shape == (8, 32) and y.shape == (8,)


def test_synthetic_data_is_a_function_of_the_seed_and_capped_in_size():
    spec = Spec(shape=(3, 224, 224), classes=10)
    (a, _), (b, _), (c, _) = (generate(spec, s) for s in (1, 1, 2))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.numel() * 4 <= 256 * 1024**2


# -- library shortcuts ----------------------------------------------------------------------------
def test_a_causal_lm_from_a_transformers_model_type_gets_next_token_data():
    w = resolve_workload("transformers:gpt2", TINY_GPT2, None, {"samples": 32})
    model = w.build_model()
    assert type(model).__name__ == "GPT2LMHeadModel" and model.config.n_layer == 2
    assert "next-token targets" in w.data_description()
    assert "inferred" not in w.data_description() or "transformers config" in w.data_description()
    x, y = w.load_data(0).get(torch.arange(4))
    assert set(x) == {"input_ids", "attention_mask"} and y.shape == (4, 16)
    assert torch.equal(y[:, :-1], x["input_ids"][:, 1:]) and (y[:, -1] == -100).all()
    loss = w.loss(model, x, y)
    assert abs(loss.item() - torch.log(torch.tensor(97.0)).item()) < 1.0  # near uniform at init


def test_transformers_classes_tasks_and_refusals():
    bert = resolve_workload(
        "transformers:BertForSequenceClassification",
        {
            "num_hidden_layers": 1,
            "hidden_size": 32,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "num_labels": 5,
            "vocab_size": 50,
        },
        None,
        {},
    )
    assert bert.synthetic_spec.classes == 5 and bert.synthetic_spec.vocab == 50
    vit = resolve_workload(
        "transformers:vit",
        {
            "num_hidden_layers": 1,
            "hidden_size": 32,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "image_size": 32,
            "patch_size": 8,
            "num_labels": 4,
        },
        None,
        {"samples": 8},
    )
    assert type(vit.build_model()).__name__ == "ViTForImageClassification"
    assert vit.synthetic_spec.shape == (3, 32, 32)
    for spec, args, message in (
        ("transformers:no-such-type", {}, "knows no model type"),
        ("transformers:gpt2", {"task": "speech"}, "task='speech' is not one of"),
        ("transformers:gpt2", {"pretrained": True}, "never downloads"),
        ("transformers:gpt2", {"task": "masked-lm"}, "gpt2 has no masked-lm head"),
        ("transformers:gpt2", {"n_embd": 30, "n_head": 4}, "the factory raised ValueError: `embed"),
    ):
        with pytest.raises(DpwiseError, match=message):
            resolve_workload(spec, args, None, {}).build_model()


@pytest.mark.parametrize(("library", "name"), [("torchvision", "resnet18"), ("timm", "resnet18")])
def test_vision_shortcuts_build_or_say_in_one_line_why_not(library, name):
    try:
        importlib.import_module(library)
    except Exception:
        said = f"({library} is not (usable here|installed; pip install)|needs torchvision)"
        with pytest.raises(DpwiseError, match=said) as err:
            resolve_workload(f"{library}:{name}", {}, None, {})
        assert "\n" not in str(err.value)
        return
    w = resolve_workload(f"{library}:{name}", {"num_classes": 6}, None, {"shape": "3x32x32"})
    assert w.synthetic_spec.classes == 6
    with pytest.raises(DpwiseError, match=f"{library} has no model"):
        resolve_workload(f"{library}:no_such_net", {}, None, {}).build_model()


@pytest.mark.slow
def test_a_causal_lm_trains_the_same_under_single_and_ddp(tmp_path, run_here):
    from conftest import load_state, max_abs_diff

    args = ["--model", "transformers:gpt2", "--data-arg", "samples=64", "--batch-size", "16"]
    for key, value in TINY_GPT2.items():
        args += ["--model-arg", f"{key}={value}"]
    states = {}
    for strategy in ("single", "ddp"):
        out = tmp_path / strategy
        proc = run_here("train", *args, "--strategy", strategy, "--epochs", "1", "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        states[strategy] = load_state(out / "final.pt")
    assert "data: synthetic data: 64 sequences of 16 tokens" in proc.stdout
    assert max_abs_diff(states["single"], states["ddp"]) < 1e-5
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**TINY_GPT2))
    model.load_state_dict(states["ddp"])  # no wrapper: final.pt loads into the user's model
