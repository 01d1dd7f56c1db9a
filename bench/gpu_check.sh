#!/usr/bin/env bash
# The CUDA paths on the GPUs of this machine, in one pass: what torch sees, the GPU tests
# (tests/test_gpu.py: single, dp and ddp agree on CUDA; ddp uses nccl; peak memory per GPU),
# a refusal of more ddp workers than GPUs, and two `dpwise compare` runs (the embedded default
# model, and torchvision's resnet50 in bf16 when torchvision imports), then the guide's
# dp_train.py migrated by `dpwise migrate` and run on the GPU (alone and under torchrun with
# nccl) and verified (on the CPU). Each step has a time
# limit; a step that fails is reported and the next one still runs.
#
#   bench/gpu_check.sh OUTDIR        (PYTHON=... to choose the interpreter; default python3)
#
# OUTDIR gets log.txt and runs.tgz (the reports, metrics and results, without checkpoints).
set -u
out=${1:?usage: bench/gpu_check.sh OUTDIR}
py=${PYTHON:-python3}
mkdir -p "$out/runs"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

step() {  # step NAME SECONDS CMD...: run CMD under a time limit, print its exit status and time
    local name=$1 limit=$2 t0=$SECONDS
    shift 2
    echo "== $name"
    timeout "$limit" "$@"
    echo "== $name: rc=$? in $((SECONDS - t0)) s"
}

{
    step machine 30 nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
    step torch 60 "$py" -c 'import torch, torch.distributed as d
print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count(),
      "nccl", torch.cuda.nccl.version() if d.is_nccl_available() else None)'
    gpus=$("$py" -c 'import torch; print(torch.cuda.device_count())')
    step "dpwise env" 60 "$py" -m dpwise env
    step "GPU tests" 180 "$py" -m pytest -q -p no:cacheprovider -rs tests/test_gpu.py
    step "ddp with more workers than GPUs (exit 2 expected)" 60 \
        "$py" -m dpwise train --strategy ddp --nproc $((gpus + 1)) --quiet --out "$out/runs/toomany"
    step "compare, default model" 150 "$py" -m dpwise compare --quiet --out "$out/runs/simple"
    cat "$out/runs/simple/report.md" 2>/dev/null
    if "$py" -c 'import torchvision' 2>/dev/null; then
        step "compare, torchvision resnet50 bf16" 150 "$py" -m dpwise compare --quiet \
            --model torchvision:resnet50 --model-arg num_classes=10 \
            --data-arg shape=3x224x224 --data-arg samples=1024 --batch-size 64 \
            --precision bf16 --epochs 2 --repeats 3 --out "$out/runs/resnet50"
        cat "$out/runs/resnet50/report.md" 2>/dev/null
    else
        echo "== torchvision does not import here: resnet50 compare skipped"
    fi
    mig="$out/runs/migrate"
    mkdir -p "$mig"
    cp tests/lint_cases/guide/dp_train.py tests/lint_cases/guide/common.py "$mig/"
    step "migrate the guide's dp_train.py" 60 \
        "$py" -m dpwise migrate "$mig/dp_train.py" -o "$mig/ddp_train.py"
    step "the original on the GPU (DataParallel)" 120 bash -c "cd '$mig' && '$py' dp_train.py"
    step "the migrated script alone" 120 bash -c "cd '$mig' && '$py' ddp_train.py"
    step "the migrated script under torchrun ($gpus process(es), nccl)" 120 bash -c \
        "cd '$mig' && '$py' -m torch.distributed.run --standalone --nproc_per_node=$gpus ddp_train.py"
    step "migrate --verify here (it runs on the CPU, gloo)" 150 \
        "$py" -m dpwise migrate "$mig/dp_train.py" --verify -o "$mig/verified.py"
} 2>&1 | tee "$out/log.txt"
tar -czf "$out/runs.tgz" --exclude='*.pt' -C "$out" runs && rm -rf "$out/runs"
