"""`dpwise compare` and `dpwise advise` on real models from torchvision, timm and transformers.

For each model that imports here: a small compare (single, dp, ddp × 1, ddp × 2) on synthetic data
inferred from the model, the convergence check's status and the cause it named, the run's wall
time; then `dpwise advise --model … --json` at the same batch, its single-process estimate against
the single run's measured peak (live tensor bytes under torch.profiler, as compare measures it).
Target: the right convergence cause for every model, the estimate within 25 % of the measurement.

Models are built from configs with fresh weights; nothing is downloaded. Libraries that do not
import are reported and skipped. Run with the Python whose torch the libraries match:

    python bench/real_models.py [--only NAME …] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

IMG = ["--data-arg", "shape=3x32x32", "--data-arg", "samples=256"]
NO_DROPOUT_GPT2 = [f"--model-arg={k}=0.0" for k in ("resid_pdrop", "embd_pdrop", "attn_pdrop")]
GPT2 = ["--model-arg=n_layer=2", "--model-arg=n_embd=128", "--model-arg=n_head=4"]
BERT = ["--model-arg=num_hidden_layers=2", "--model-arg=hidden_size=128"]
BERT += ["--model-arg=num_attention_heads=4", "--model-arg=intermediate_size=256"]
TEXT = ["--model-arg=vocab_size=2000", "--data-arg=samples=256"]

# name, library, --model, extra args, the cause the convergence check must name ("" for a pass)
MODELS = [
    (
        "resnet18",
        "torchvision",
        "torchvision:resnet18",
        ["--model-arg=num_classes=10", *IMG],
        "BatchNorm",
    ),
    (
        "mobilenet_v3_small",
        "torchvision",
        "torchvision:mobilenet_v3_small",
        ["--model-arg=num_classes=10", *IMG],
        "BatchNorm",
    ),
    (
        "efficientnet_b0",
        "torchvision",
        "torchvision:efficientnet_b0",
        ["--model-arg=num_classes=10", *IMG],
        "BatchNorm",
    ),
    (
        "vit_tiny (drop_path 0.1)",
        "timm",
        "timm:vit_tiny_patch16_224",
        [
            "--model-arg=img_size=32",
            "--model-arg=patch_size=8",
            "--model-arg=num_classes=10",
            "--model-arg=drop_path_rate=0.1",
            "--data-arg=samples=256",
        ],
        "DropPath",
    ),
    (
        "convnext_atto (drop_path 0.1)",
        "timm",
        "timm:convnext_atto",
        ["--model-arg=num_classes=10", "--model-arg=drop_path_rate=0.1", *IMG],
        "DropPath",
    ),
    (
        "gpt2, 2 layers, dropout 0",
        "transformers",
        "transformers:gpt2",
        [*GPT2, *NO_DROPOUT_GPT2, *TEXT],
        "",
    ),
    ("gpt2, 2 layers, dropout 0.1", "transformers", "transformers:gpt2", [*GPT2, *TEXT], "Dropout"),
    (
        "bert (sequence classification)",
        "transformers",
        "transformers:BertForSequenceClassification",
        [*BERT, *TEXT],
        "Dropout",
    ),
]


def usable(library: str) -> str | None:
    try:
        importlib.import_module(library)
    except Exception as exc:  # a library can fail to import in any way
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def dpwise(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dpwise", *args], capture_output=True, text=True, timeout=timeout
    )


def compare(model: str, extra: list[str], batch: int, repeats: int, out: Path) -> dict:
    start = time.perf_counter()
    proc = dpwise(
        "compare",
        "--model",
        model,
        *extra,
        "--batch-size",
        str(batch),
        "--epochs",
        "2",
        "--repeats",
        str(repeats),
        "--out",
        str(out),
        "--quiet",
    )
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1], "wall_s": wall}
    results = json.loads((out / "results.json").read_text())
    conv = next(c for c in results["checks"] if c["name"] == "convergence")
    single = results["runs"][0]
    return {
        "wall_s": wall,
        "convergence": conv["status"],
        "explanation": conv["explanation"],
        "summary": conv["summary"],
        "parameters": results["workload"]["parameters"],
        "measured_peak": max(d["peak_bytes"] or 0 for d in single["memory"]["per_device"]),
        "recommendation": results["recommendation"].get("headline"),
    }


def advise(model: str, extra: list[str], batch: int) -> dict:
    start = time.perf_counter()
    proc = dpwise(
        "advise",
        "--model",
        model,
        *extra,
        "--batch-size",
        str(batch),
        "--optimizer",
        "sgd",
        "--json",
    )
    if proc.returncode != 0:
        return {"advise_error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    answer = json.loads(proc.stdout)
    return {
        "estimate": answer["memory"]["single"]["peak_bytes"],
        "method": (answer.get("model") or {}).get("method"),
        "advise_s": time.perf_counter() - start,
    }


def cause_named(row: dict, cause: str) -> bool:
    """A model without per-device randomness passes; one with it has the cause named, whether
    the runs moved apart beyond the tolerance (fail) or not yet (pass, with the layers named)."""
    if not cause:
        return row["convergence"] == "pass" and "random layers" not in row["explanation"].lower()
    return cause.lower() in row["explanation"].lower()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", help="substrings of model names to run")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--json", type=Path, help="write the rows here")
    args = p.parse_args()
    import torch

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, library, model, extra, cause in MODELS:
            if args.only and not any(o in name for o in args.only):
                continue
            why = usable(library)
            if why:
                print(f"{name:<32} skipped: {library} does not import ({why})", flush=True)
                continue
            out = Path(tmp) / name.replace(" ", "_").replace(",", "")
            row = {"model": name, "library": library, "expected_cause": cause or "none"}
            row.update(compare(model, extra, args.batch_size, args.repeats, out))
            if "error" not in row:
                row.update(advise(model, extra, args.batch_size))
                row["cause_ok"] = cause_named(row, cause)
            rows.append(row)
            print(render(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    ok = [r for r in rows if r.get("cause_ok")]
    print(f"{len(ok)} of {len(rows)} models: the convergence check named the expected cause")


def render(r: dict) -> str:
    if "error" in r:
        return f"{r['model']:<32} compare failed after {r['wall_s']:.0f} s: {r['error']}"
    est = r.get("estimate")
    err = "" if not est else f"{(est - r['measured_peak']) / r['measured_peak']:+.1%}"
    return (
        f"{r['model']:<32} {r['parameters'] / 1e6:6.2f} M  convergence {r['convergence']:<4} "
        f"(expected {r['expected_cause']}: {'ok' if r['cause_ok'] else 'WRONG'})  "
        f"compare {r['wall_s']:5.0f} s  estimate {0 if not est else est / 2**20:7.1f} MiB vs "
        f"measured {r['measured_peak'] / 2**20:7.1f} MiB {err} "
        f"{r.get('advise_error', '')}"
    )


if __name__ == "__main__":
    main()
