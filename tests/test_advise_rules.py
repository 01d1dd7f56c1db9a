"""The decision matrix, row by row, and the cases the guide has no row for."""

import shlex

import pytest

from dpwise import strategies
from dpwise.advise.from_results import from_results
from dpwise.advise.rules import Situation, decide, launch_commands
from dpwise.errors import DpwiseError
from dpwise.strategies.ddp import DDPStrategy
from dpwise.strategies.traits import Traits

GIB = 1024**3
SMALL = {"single": 2 * GIB, "dp": 3 * GIB, "ddp": 3 * GIB, "fsdp": 1 * GIB}  # of 80 GiB
LARGE = {"single": 50 * GIB, "dp": 60 * GIB, "ddp": 55 * GIB, "fsdp": 20 * GIB}
TOO_BIG = {"single": 150 * GIB, "dp": 160 * GIB, "ddp": 155 * GIB, "fsdp": 40 * GIB}
DDP_OVER = {"single": 70 * GIB, "dp": 80 * GIB, "ddp": 75 * GIB, "fsdp": 30 * GIB}
DP_OVER = {"single": 30 * GIB, "dp": 75 * GIB, "ddp": 35 * GIB, "fsdp": 20 * GIB}
HOPELESS = {"single": 900 * GIB, "dp": 900 * GIB, "ddp": 900 * GIB, "fsdp": 300 * GIB}


class PairTest(DDPStrategy):
    """A process-per-device strategy advise does not know by name."""

    traits = Traits(name="pair-test", summary="test", multiprocess=True, process_group=True)
    name = traits.name


def situation(gpus=2, nodes=1, goal="production", peaks=SMALL, memory=80):
    return Situation(gpus=gpus, nodes=nodes, device_bytes=memory * GIB, goal=goal, peaks=peaks)


CASES = [
    # guide row 1: single node, < 4 GPUs, small model → guide: DataParallel; corrected to DDP
    ("row 1: 2 GPUs, small, production", situation(gpus=2), "ddp", "production-few-gpus", "dp"),
    # guide row 2: single node, > 4 GPUs or large model → DDP (holds)
    ("row 2: 8 GPUs", situation(gpus=8), "ddp", "single-node-4-plus-gpus", "fsdp"),
    ("row 2: large model", situation(gpus=2, peaks=LARGE), "ddp", "large-model", "fsdp"),
    ("gap: exactly 4 GPUs", situation(gpus=4), "ddp", "single-node-4-plus-gpus", "fsdp"),
    # guide row 3: multi-node → DDP (holds; FSDP also spans nodes)
    ("row 3: 2 nodes", situation(gpus=8, nodes=2), "ddp", "multi-node", "fsdp"),
    # guide row 4: rapid prototyping → DataParallel (holds for a small model on < 4 GPUs)
    ("row 4: prototype", situation(gpus=2, goal="prototype"), "dp", "prototype-few-gpus", "ddp"),
    (
        "row 4 but 4 GPUs",
        situation(gpus=4, goal="prototype"),
        "ddp",
        "single-node-4-plus-gpus",
        "fsdp",
    ),
    # guide row 5: production, high throughput → DDP (holds)
    ("row 5: production, 3 GPUs", situation(gpus=3), "ddp", "production-few-gpus", "dp"),
    # beyond the matrix
    (
        "too big for one device",
        situation(gpus=8, peaks=TOO_BIG),
        "fsdp",
        "model-does-not-fit",
        None,
    ),
    (
        "too big, multi-node",
        situation(gpus=8, nodes=4, peaks=TOO_BIG),
        "fsdp",
        "model-does-not-fit",
        None,
    ),
    (
        "single fits, ddp buckets do not",
        situation(gpus=2, peaks=DDP_OVER),
        "fsdp",
        "model-does-not-fit",
        None,
    ),
    (
        "too big for the only GPU",
        situation(gpus=1, peaks=TOO_BIG),
        "single",
        "model-does-not-fit-one-gpu",
        None,
    ),
    (
        "prototype, dp device 0 overflows",
        situation(gpus=2, goal="prototype", peaks=DP_OVER),
        "ddp",
        "production-few-gpus",
        "dp",
    ),
    ("CPU only", situation(gpus=0), "single", "cpu-only", "ddp"),
    ("one GPU", situation(gpus=1), "single", "single-gpu", None),
    ("unknown model size", situation(gpus=2, peaks=None), "ddp", "production-few-gpus", "dp"),
]


@pytest.mark.parametrize(("name", "s", "strategy", "rule", "runner_up"), CASES)
def test_rules(name, s, strategy, rule, runner_up):
    answer = decide(s)
    assert (answer.strategy, answer.rule, answer.runner_up) == (strategy, rule, runner_up), name
    assert answer.reasons and answer.changes and answer.launch


def test_answers_carry_the_numbers_they_used():
    answer = decide(situation(gpus=8, peaks=TOO_BIG))
    assert "ddp needs 155.00 GiB of 80.00 GiB per device" in answer.reasons[0]
    assert "40.00 GiB of 80.00 GiB each" in answer.reasons[1]
    assert "172.22 GiB" in answer.changes[0]
    assert answer.world_size == 8 and "fully_shard" in answer.launch[0]


def test_a_model_that_does_not_fit_even_sharded_says_what_to_do():
    answer = decide(situation(gpus=8, peaks=HOPELESS))
    assert answer.strategy == "fsdp" and "activation checkpointing" in answer.reasons[-1]


def test_multi_node_launch_uses_a_rendezvous():
    answer = decide(situation(gpus=8, nodes=2))
    assert answer.launch[0].startswith("torchrun --nproc_per_node 8 --nnodes 2 --rdzv-backend c10d")
    assert answer.world_size == 16


def test_fsdp_launches_with_dpwise_own_command():
    workload = ("--model", "transformer", "--batch-size", "64")
    s = Situation(
        gpus=8, nodes=1, device_bytes=80 * GIB, goal="production", peaks=TOO_BIG,
        workload_args=workload,
    )  # fmt: skip
    answer = decide(s)
    assert answer.strategy == "fsdp"
    assert answer.launch[0].startswith("torchrun --nproc_per_node 8 train.py")
    assert shlex.split(answer.launch[1]) == [
        "dpwise", "train", "--strategy", "fsdp", "--nproc", "8", *workload,
    ]  # fmt: skip
    across = launch_commands("fsdp", 8, 4, workload)
    assert across[1] == (
        "dpwise train --strategy fsdp --nproc 8 --nnodes 4 --rdzv-endpoint HOST:29400 "
        + " ".join(workload)
    )


def test_launch_lines_follow_traits_not_names():
    strategies.register("pair-test", PairTest, compared_by_default=False)
    try:
        one, many = launch_commands("pair-test", 4, 2)
    finally:
        strategies.unregister("pair-test")
    assert one.startswith("torchrun --nproc_per_node 4 --nnodes 2 --rdzv-backend c10d")
    assert many == (
        "dpwise train --strategy pair-test --nproc 4 --nnodes 2 --rdzv-endpoint HOST:29400"
    )


def test_measurements_take_precedence_over_the_rules():
    results = {
        "recommendation": {
            "strategy": "single",
            "world_size": 1,
            "run": "single",
            "runner_up": "ddp-2",
            "reasons": ["single trains at 70,000 samples/s"],
        },
        "runs": [
            {
                "id": "single",
                "label": "single",
                "memory": {"per_device": [{"peak_bytes": 5 * 2**20}]},
            }
        ],
    }
    answer = from_results(results, situation(gpus=8))  # the rules alone would say ddp
    assert (answer.strategy, answer.rule, answer.runner_up) == (
        "single",
        "measured-results",
        "ddp-2",
    )
    assert answer.reasons[0].startswith("measured by dpwise compare")
    assert "5.00 MiB" in answer.reasons[-1]


def _parts(dp_batch: int, buckets: int) -> dict:
    return {"dp": {"dp_full_batch_inputs": dp_batch}, "ddp": {"ddp_buckets": buckets}}


@pytest.mark.parametrize("gpus", [2, 8])
def test_dataparallel_device0_text_follows_the_numbers(gpus):
    below = {**SMALL, "dp": 3 * GIB, "ddp": 4 * GIB}
    s = Situation(gpus, 1, 80 * GIB, "production", below, _parts(GIB // 2, GIB + GIB // 2))
    text = " ".join(decide(s).reasons)
    assert "DataParallel's device 0 needs 3.00 GiB, no more than ddp's 4.00 GiB" in text
    assert "bucket copy of the gradients (1.50 GiB)" in text and "(512.00 MiB)" in text
    assert "carries the optimizer" not in text and "loads device 0" not in text
    above = {**SMALL, "dp": 5 * GIB, "ddp": 4 * GIB}
    s = Situation(gpus, 1, 80 * GIB, "production", above, _parts(2 * GIB, GIB))
    text = " ".join(decide(s).reasons)
    assert "DataParallel's device 0 needs 5.00 GiB, more than ddp's 4.00 GiB" in text
    assert "gathered outputs (2.00 GiB)" in text


def test_launch_lines_keep_the_users_workload_shell_quoted():
    workload = ("--model", "pkg.mod:net", "--model-arg", "name=a b", "--data-arg", "path=$HOME/x")
    s = Situation(2, 1, 80 * GIB, "production", SMALL, workload_args=workload)
    launch = decide(s).launch
    assert launch[1].startswith("dpwise train --strategy ddp --nproc 2 --model pkg.mod:net")
    assert shlex.split(launch[1])[-6:] == list(workload)
    assert "'name=a b'" in launch[1] and "'path=$HOME/x'" in launch[1]
    cpu = decide(Situation(0, 1, 80 * GIB, "production", SMALL, workload_args=workload))
    assert shlex.split(cpu.launch[1]) == ["dpwise", "train", "--strategy", "single", *workload]


def _results(**rec) -> dict:
    return {
        "workload": {"tolerance": 1e-4},
        "checks": [{"name": "convergence", "summary": "ddp × 2 differ from single by up to 3e-02"}],
        "recommendation": {
            "strategy": "ddp",
            "world_size": 2,
            "run": "ddp-2",
            "runner_up": "single",
            "reasons": ["ddp × 2 trains at 9,000 samples/s"],
            **rec,
        },
        "runs": [
            {"id": "single", "label": "single", "losses": [2.3, 2.2], "memory": {"per_device": []}},
            {
                "id": "ddp-2",
                "label": "ddp × 2",
                "losses": [2.3, 2.2],
                "max_param_diff_vs_single": 1e-8,
                "memory": {"per_device": [{"peak_bytes": 2**20}]},
            },
        ],
    }


def test_inconclusive_measurements_are_passed_on_with_their_reason():
    why = "single's repeats spread 2.49–6.46 s: the runs cannot be told apart"
    results = _results(status="inconclusive", inconclusive_reason=why)
    answer = from_results(results, situation(gpus=0))
    assert (answer.strategy, answer.rule) == ("single", "cpu-only")  # the rules' answer
    assert answer.measurement_status == "inconclusive" and answer.inconclusive_reason == why
    assert "inconclusive" in answer.reasons[0] and why in answer.reasons[0]
    assert not any("take precedence" in r for r in answer.reasons)


def test_results_without_a_status_are_conclusive():
    answer = from_results(_results(), situation(gpus=0))
    assert (answer.strategy, answer.rule) == ("ddp", "measured-results")
    assert answer.measurement_status == "recommended" and answer.warnings == []


def test_a_run_that_diverged_is_refused_and_one_that_failed_convergence_is_warned_of():
    results = _results()
    results["runs"][1]["losses"] = [2.3, float("nan")]
    with pytest.raises(DpwiseError, match=r"ddp × 2 diverged .*recommends nothing"):
        from_results(results, situation(gpus=0))
    results["runs"][1]["losses"] = [2.3, None]  # how results.json writes a NaN
    with pytest.raises(DpwiseError, match="ddp × 2 diverged"):
        from_results(results, situation(gpus=0))
    results = _results()
    results["runs"][0]["diverged"] = {"step": 3, "cause": "non-finite inputs"}
    (warning,) = from_results(results, situation(gpus=0)).warnings  # ddp × 2 is recommended
    assert "single's loss diverged in the compared run" in warning
    results = _results()
    results["runs"][1]["max_param_diff_vs_single"] = 3e-2
    (warning,) = from_results(results, situation(gpus=0)).warnings
    assert "did not reproduce the single-process run" in warning and "3.0e-02" in warning
    assert "tolerance 1.0e-04" in warning and "convergence check" in warning


def test_the_answer_carries_every_field_of_the_rules_recommendation_in_its_order():
    from dataclasses import asdict, fields

    from dpwise.advise.rules import Recommendation, RecommendationFields

    rec = Recommendation("ddp", "r", ["why"], "dp", ["more GPUs"], ["dpwise train"], 4, None)
    assert list(RecommendationFields.__annotations__) == [f.name for f in fields(Recommendation)]
    assert rec.answer() == asdict(rec) and list(rec.answer()) == list(asdict(rec))
