"""The model probe: random layers found by behaviour, unused parameters by missing gradients."""

import random

import pytest
import torch

from dpwise.diagnosis import Layer, group, probe_workload
from dpwise.workload.spec import resolve_workload

THREADS = torch.get_num_threads()


def probe(factory: str, **model_args):
    workload = resolve_workload(f"randomlayers:{factory}", model_args, "userpkg:tiny_data", {})
    return probe_workload(workload, seed=0)


def names(layers):
    return [(layer.name, layer.kind) for layer in layers]


def test_a_home_made_random_layer_is_named_by_behaviour(userpkg):
    found = probe("jitter_model")
    assert found.skipped is None and found.rows == 2
    assert names(found.stochastic) == [("1", "Jitter")]


def test_a_drop_path_layer_is_named_not_the_block_around_it(userpkg):
    found = probe("droppath_model")
    assert names(found.stochastic) == [("1.drop_path", "SampleDrop"), ("2.drop_path", "SampleDrop")]


def test_a_layer_after_a_barely_random_branch_is_not_named(userpkg):
    """A LayerNorm whose input differs by 1e-6 (a scaled drop-path branch) is not itself random."""
    found = probe("layerscale_model")
    assert names(found.stochastic) == [("1.drop_path", "SampleDrop")]


def test_attention_dropout_drawn_functionally_inside_multihead_attention_is_found(userpkg):
    assert names(probe("attention_model").stochastic) == [("attn", "MultiheadAttention")]
    assert probe("attention_model", dropout=0.0).stochastic == []


def test_a_deterministic_model_has_no_random_layers_or_unused_parameters(userpkg):
    found = probe("plain_model")
    assert found.skipped is None
    assert found.stochastic == [] and not found.unused


def test_batchnorm_is_not_mistaken_for_randomness():
    found = probe_workload(resolve_workload("cnn", {}, None, {}), seed=0)
    assert found.skipped is None and found.stochastic == []


def test_a_block_skipped_at_random_has_parameters_unused_in_some_passes(userpkg):
    found = probe("skip_model")
    assert names(found.unused.sometimes) == [("1", "RandomSkip")]
    assert found.unused.always == []
    assert ("1", "RandomSkip") in names(found.stochastic)  # the skip is drawn at random


def test_a_dead_branch_is_unused_in_every_pass(userpkg):
    found = probe("dead_branch_model")
    assert names(found.unused.always) == [("unused_head", "Linear")]
    assert found.unused.sometimes == [] and found.stochastic == []


def test_the_probe_leaves_the_global_generators_as_they_were(userpkg):
    torch.manual_seed(7)
    random.seed(7)
    expected = (torch.rand(3), random.random())
    torch.manual_seed(7)
    random.seed(7)
    probe("jitter_model")
    assert torch.equal(torch.rand(3), expected[0]) and random.random() == expected[1]


def test_a_model_that_cannot_run_on_the_cpu_is_skipped_with_the_reason(userpkg):
    found = probe("wrong_width_model")
    assert found.skipped is not None and "did not run on the CPU" in found.skipped
    assert "failed on the first batch" in found.skipped
    assert found.stochastic == [] and not found.unused
    assert torch.get_num_threads() == THREADS  # the probe's one thread is given back


@pytest.mark.parametrize(
    ("layers", "text"),
    [
        ([Layer("drop", "Dropout")], "1 Dropout layer: drop"),
        (
            [Layer(f"features.{i}.1", "BatchNorm2d") for i in range(49)]
            + [Layer("head.drop", "Dropout")],
            "49 BatchNorm2d layers, e.g. features.0.1, features.1.1, features.2.1, …; "
            "1 Dropout layer: head.drop",
        ),
        ([Layer("a", "X"), Layer("b", "X"), Layer("c", "X")], "3 X layers: a, b, c"),
        ([Layer("", "Net")], "1 Net layer: the model's own forward"),
        ([], ""),
    ],
)
def test_names_are_grouped_by_type_with_a_count_and_three_examples(layers, text):
    assert group(layers) == text
