"""The formula's per-device memory against the simulation's (`dpwise advise --simulate`: PyTorch's
own DDP, ZeroRedundancyOptimizer and FSDP2 on a fake process group), for the busiest rank of ddp,
ddp+zero1 and fsdp, on built-in and library models at 8, 64 and 1,024 ranks. Each model and
rank count is one `dpwise advise --gpus N --device-memory 80 --model M --simulate --json`
(global batch 256, AdamW, fp32); a model the simulation cannot run says why.

Run: .venv/bin/python bench/simulate_scale.py [--ranks 8,64,1024] [--models simple,cnn]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

MODELS: list[tuple[str, list[str]]] = [
    ("simple", []),
    ("cnn", []),
    ("transformer", []),
    ("transformers:gpt2", ["n_layer=2", "n_embd=128", "n_head=4"]),
    (
        "transformers:llama",
        [
            "num_hidden_layers=2",
            "hidden_size=128",
            "intermediate_size=256",
            "num_attention_heads=4",
            "num_key_value_heads=2",
        ],
    ),
    (
        "transformers:bert",
        [
            "num_hidden_layers=2",
            "hidden_size=128",
            "intermediate_size=256",
            "num_attention_heads=4",
        ],
    ),
    ("transformers:t5", ["num_layers=2", "d_model=128", "d_ff=256", "num_heads=4", "d_kv=32"]),
    (
        "transformers:vit",
        [
            "num_hidden_layers=2",
            "hidden_size=128",
            "intermediate_size=256",
            "num_attention_heads=4",
            "image_size=64",
            "patch_size=16",
        ],
    ),
]


def advise(model: str, args: list[str], ranks: int) -> dict:
    flags = [a for arg in args for a in ("--model-arg", arg)]
    cmd = [sys.executable, "-W", "ignore", "-m", "dpwise", "advise", "--gpus", str(ranks),
           "--device-memory", "80", "--model", model, *flags, "--simulate", "--json"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        return {"why_not": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    sims: dict = json.loads(done.stdout)["simulated"]
    return sims


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", default="8,64,1024")
    parser.add_argument("--models", default="", help="only these (comma-separated; default all)")
    given = parser.parse_args()
    sizes = [int(n) for n in given.ranks.split(",")]
    only = set(filter(None, given.models.split(",")))
    print(f"{'model':<22}{'case':<11}{'ranks':>6}{'simulated MiB':>15}{'formula MiB':>13}"
          f"{'formula off':>13}{'tensors':>9}{'s':>6}")  # fmt: skip
    worst: dict[str, float] = {}
    for model, args in (m for m in MODELS if not only or m[0] in only):
        for n in sizes:
            start = time.perf_counter()
            sims = advise(model, args, n)
            took = time.perf_counter() - start
            if "why_not" in sims:
                print(f"{model:<22}{n:>6}  advise failed: {sims['why_not']}")
                continue
            for case, sim in sims.items():
                worst[case] = max(worst.get(case, 0.0), _line(model, case, n, sim, took))
    for case, off in worst.items():
        print(f"{case}: worst |formula − simulation| / simulation: {off:.0%}")


def _line(model: str, case: str, n: int, sim: dict, took: float) -> float:
    """Prints one case's line; its |formula − simulation| / simulation (0 where unknown)."""
    if sim.get("peak_bytes") is None:
        print(f"{model:<22}{case[:10]:<11}{n:>6}  not simulated: {sim.get('why_not')}")
        return 0.0
    off = sim["formula_off_by"]
    said = "–" if off is None else f"{off:+.0%}"
    formula = "–" if sim["formula_bytes"] is None else f"{sim['formula_bytes'] / 2**20:,.2f}"
    print(f"{model:<22}{case[:10]:<11}{n:>6}{sim['peak_bytes'] / 2**20:>15,.2f}{formula:>13}"
          f"{said:>13}{sim['tensors']:>9}{took:>6.0f}")  # fmt: skip
    return 0.0 if off is None else abs(off)


if __name__ == "__main__":
    main()
