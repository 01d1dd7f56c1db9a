"""Models dpwise's authors did not tune it to, run as a new user would: compare, then advise.

For each model (home-made traps from tests/fixtures/trapmodels.py, and transformers models used
as-is when transformers is installed): `dpwise compare` of single, ddp × 2 and fsdp × 2 (a few
steps), then `dpwise advise --gpus 8`, whose `dpwise train` line is run as printed (on 2 CPU
processes instead of 8 GPUs, 2 steps). It prints one row per model: each run's parameter and
buffer difference from single, the convergence check's status and the cause it names, advise's
answer and runner-up, and whether the printed command ran.

Run: .venv/bin/python bench/new_user_models.py [--steps 8] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
TRAPS = [
    "ema_model",
    "running_norm_model",
    "bf16_model",
    "branching_model",
    "reentrant_model",
    "tied_pair_model",
    "sparse_model",
    "syncbn_model",
    "view_model",
]
TINY_GPT2 = ["n_layer=2", "n_embd=32", "n_head=2", "vocab_size=256", "n_positions=64"]
TINY_T5 = ["d_model=32", "d_ff=64", "num_layers=1", "num_heads=2", "d_kv=16", "vocab_size=256"]
TINY_BERT = ["dim=32", "hidden_dim=64", "n_layers=2", "n_heads=2", "vocab_size=256"]
TINY_LLAMA = ["hidden_size=32", "intermediate_size=64", "num_hidden_layers=2"]
TINY_LLAMA += ["num_attention_heads=2", "num_key_value_heads=2", "vocab_size=256"]
TINY_VIT = ["hidden_size=32", "num_hidden_layers=2", "num_attention_heads=2"]
TINY_VIT += ["intermediate_size=64", "image_size=32", "patch_size=8", "num_labels=4"]
LIBRARY = {
    "transformers:gpt2 (tied)": ("transformers:gpt2", TINY_GPT2),
    "transformers:t5": ("transformers:t5", TINY_T5),
    "transformers:distilbert": ("transformers:DistilBertForSequenceClassification", TINY_BERT),
    "transformers:llama": ("transformers:llama", TINY_LLAMA),
    "transformers:vit": ("transformers:ViTForImageClassification", TINY_VIT),
    # the same with dropout off: what equivalence needs (each process draws its own masks)
    "gpt2, dropout off": (
        "transformers:gpt2",
        [*TINY_GPT2, "resid_pdrop=0", "embd_pdrop=0", "attn_pdrop=0"],
    ),
    "t5, dropout off": ("transformers:t5", [*TINY_T5, "dropout_rate=0"]),
    "distilbert, dropout off": (
        "transformers:DistilBertForSequenceClassification",
        [*TINY_BERT, "dropout=0", "attention_dropout=0", "seq_classif_dropout=0"],
    ),
}


def dpwise(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(FIXTURES), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "dpwise", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def model_flags(model: str, args: list[str]) -> list[str]:
    return ["--model", model] + [a for arg in args for a in ("--model-arg", arg)]


def compare(flags: list[str], steps: int, out: Path) -> dict:
    proc = dpwise(
        "compare", *flags, "--strategies", "single,ddp,fsdp", "--world-sizes", "2",
        "--epochs", "2", "--repeats", "1", "--max-steps", str(steps), "--quiet",
        "--out", str(out),
    )  # fmt: skip
    if proc.returncode == 2:
        return {"refused": proc.stderr.strip().removeprefix("dpwise: error: ")}
    if not (out / "results.json").exists():
        return {"failed": proc.stderr.strip().splitlines()[-1][:200]}
    results = json.loads((out / "results.json").read_text())
    check = results["checks"][0]
    runs = {
        r["id"]: (r["max_param_diff_vs_single"], r.get("max_buffer_diff_vs_single"))
        for r in results["runs"]
    }
    return {"runs": runs, "status": check["status"], "summary": check["summary"],
            "explanation": check["explanation"]}  # fmt: skip


def advise(flags: list[str]) -> dict:
    proc = dpwise("advise", "--gpus", "8", "--json", *flags, "--optimizer", "sgd")
    if proc.returncode != 0:
        return {"failed": proc.stderr.strip()[:200]}
    answer = json.loads(proc.stdout)
    line = next(c for c in answer["launch"] if c.startswith("dpwise train"))
    args = shlex.split(line)[1:]
    if "--nproc" in args:
        args[args.index("--nproc") + 1] = "2"  # 2 CPU processes stand in for 8 GPUs
    ran = dpwise(*args, "--epochs", "1", "--max-steps", "2", "--quiet")
    error = "" if ran.returncode == 0 else ran.stderr.strip().splitlines()[-1][:160]
    if ran.returncode == 2 and "on the CPU" in error:
        error = "needs the GPUs it was asked for (refused on the CPU in one line)"
    return {
        "strategy": answer["strategy"],
        "runner_up": answer["runner_up"],
        "line": line,
        "ran": ran.returncode == 0,
        "error": error,
    }


def diff(found: dict, run_id: str) -> str:
    p, b = found.get("runs", {}).get(run_id, (None, None))
    if p is None:
        return "—"
    return f"{p:.1e} / {'—' if b is None else f'{b:.1e}'}"


def cause(found: dict) -> str:
    """The cause the check names, in a few words."""
    text = found.get("explanation", "")
    found = [
        words
        for key, words in (
            ("BatchNorm layers (", "BatchNorm"),
            ("no update in any run", "untrained parameters"),
            ("The loss reads", "buffer read by the loss"),
            ("not read by the loss", "buffer not read by the loss"),
            (", read by the loss", "buffer read by the loss"),
            ("used on some batches", "parameters used on some batches"),
            ("held in bf16", "bf16 rounding"),
            ("Random layers", "random layers"),
            ("no known cause", "none found"),
        )
        if key in text
    ]
    return ", ".join(dict.fromkeys(found)) or "—"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    cases = {name: (f"trapmodels:{name}", []) for name in TRAPS}
    if importlib.util.find_spec("transformers"):
        cases.update(LIBRARY)
    if args.only:
        cases = {k: v for k, v in cases.items() if k in args.only}
    print(
        "| model | ddp × 2 Δparam / Δbuffer | fsdp × 2 Δparam / Δbuffer | convergence | cause "
        "named | advise (runner-up) | its train line ran |"
    )
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as root:
        for i, (name, (model, margs)) in enumerate(cases.items()):
            flags = model_flags(model, margs)
            found = compare(flags, args.steps, Path(root) / str(i))
            answer = advise(flags)

            if "refused" in found:
                status, named = "refused (exit 2)", found["refused"][:120]
            elif "failed" in found:
                status, named = "FAILED", found["failed"]
            else:
                status, named = found["status"], cause(found)
            ran = (
                "yes" if answer.get("ran") else f"NO: {answer.get('error') or answer.get('failed')}"
            )
            print(
                f"| {name} | {diff(found, 'ddp-2')} | {diff(found, 'fsdp-2')} | {status} | "
                f"{named} | "
                f"{answer.get('strategy', '—')} ({answer.get('runner_up') or '—'}) | {ran} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
