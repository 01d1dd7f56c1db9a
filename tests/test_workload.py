import pytest
import torch

from dpwise.errors import DpwiseError
from dpwise.workload.spec import resolve_workload


def test_default_is_the_guides_model_and_data():
    w = resolve_workload("simple", {}, None, {})
    model = w.build_model()
    assert [tuple(p.shape) for p in model.parameters()] == [(512, 1000), (512,), (10, 512), (10,)]
    data = w.load_data(seed=0)
    assert len(data) == 10_000
    x, y = data.get(torch.arange(4))
    assert x.shape == (4, 1000) and x.dtype == torch.float32 and int(y.max()) < 10


def test_data_is_a_function_of_the_seed():
    w = resolve_workload("simple", {}, None, {"samples": 32})
    a, b, c = (w.load_data(seed=s).x for s in (1, 1, 2))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_model_args_size_the_builtins():
    w = resolve_workload("transformer", {"layers": 3, "dim": 32, "heads": 2}, None, {})
    model = w.build_model()
    assert len(model.encoder.layers) == 3 and model.embed.embedding_dim == 32
    x, _ = w.load_data(seed=0).get(torch.arange(2))
    assert model(x).shape == (2, 10)
    cnn = resolve_workload("cnn", {"channels": 4}, None, {"samples": 8})
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in cnn.build_model().modules())


def test_a_seven_billion_parameter_spec_is_expressible():
    args = {"layers": 32, "dim": 4096, "heads": 32, "vocab": 32000}
    w = resolve_workload("transformer", args, None, {})
    with torch.device("meta"):
        model = w.build_model()
    params = sum(p.numel() for p in model.parameters())
    assert 6.0e9 < params < 7.5e9


def test_user_factories(userpkg):
    w = resolve_workload("userpkg:tiny_model", {"width": 3}, "userpkg:pair_dataset", {})
    assert w.build_model()[0].out_features == 3
    assert len(w.load_data(seed=0)) == 64


@pytest.mark.parametrize(
    ("model", "data", "message"),
    [
        ("nosuchpkg.mod:build", "userpkg:tiny_data", "cannot import nosuchpkg.mod"),
        ("userpkg:nope", "userpkg:tiny_data", "userpkg has no attribute 'nope'"),
        ("resnet", None, "neither a built-in"),
    ],
)
def test_bad_specs_name_the_spec(userpkg, model, data, message):
    with pytest.raises(DpwiseError, match=message):
        resolve_workload(model, {}, data, {})


def test_failing_or_wrong_factories_are_one_line_errors(userpkg):
    w = resolve_workload("userpkg:not_a_module", {}, "userpkg:failing_data", {})
    with pytest.raises(DpwiseError, match=r"returned int, expected a torch\.nn\.Module"):
        w.build_model()
    with pytest.raises(DpwiseError, match="the factory raised ValueError: no data here"):
        w.load_data(seed=0)
    bad_arg = resolve_workload("userpkg:tiny_model", {"depth": 2}, "userpkg:tiny_data", {})
    with pytest.raises(
        DpwiseError, match="--model userpkg:tiny_model: the factory raised TypeError"
    ):
        bad_arg.build_model()


def test_a_factory_in_the_current_folder_is_found_as_python_m_would(tmp_path):
    """`dpwise train --model mymodel:build` from the project folder, through the console script
    (whose sys.path lacks the current folder); a local file never hides an installed package."""
    import subprocess
    import sys

    from conftest import child_env

    (tmp_path / "mymodel_here.py").write_text(
        "import torch\n"
        "def build():\n    return torch.nn.Linear(4, 2)\n"
        "def data(seed=0):\n    return torch.randn(32, 4), torch.randint(0, 2, (32,))\n"
    )
    (tmp_path / "json.py").write_text("raise SystemExit('the local json.py was imported')\n")
    code = (
        "import sys; sys.path = [p for p in sys.path if p not in ('', sys.argv[1])]; "
        "from dpwise.cli import main; "
        "raise SystemExit(main(['train', '--model', 'mymodel_here:build', '--data', "
        "'mymodel_here:data', '--batch-size', '8', '--epochs', '1', '--quiet']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
