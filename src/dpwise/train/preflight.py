"""What `dpwise train` checks before any worker starts, each next to what it checks: the model
against the strategy, the optimizer, a static graph and a communication hook (check_run, on one
Inspection); a --resume checkpoint against the run, the --out folder, and the lock that keeps
one run at a time in it."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from dpwise.errors import DpwiseError
from dpwise.infra import outowner
from dpwise.infra.atomic import remove_stale_temporaries
from dpwise.infra.outlock import locked
from dpwise.launch.env import DistEnv
from dpwise.strategies.base import StrategySpec
from dpwise.train import checkpoint, outputs
from dpwise.train.config import TrainConfig
from dpwise.train.inspection import Inspection, meta_model
from dpwise.workload.spec import Workload


def check_model(
    workload: Workload,
    strategy: str,
    device_type: str,
    optimizer: str,
    varying: str = "",
    model: Any = None,
) -> None:
    """What the strategy or the optimizer cannot do with this model, refused in one line before
    any process starts (check_fit). ``model``: the workload's meta-device model where the
    caller built it already."""
    model = meta_model(workload) if model is None else model
    check_fit(model, strategy, device_type, optimizer, varying)


def check_fit(model: Any, strategy: str, device_type: str, optimizer: str, varying: str) -> None:
    """SyncBatchNorm on the CPU under ddp or fsdp, sparse gradients under fsdp or with AdamW,
    parameters used in some steps only (``varying``, from the model probe) under fsdp: refused
    in one line. ``model``: on the meta device; None (it cannot be built there): no check."""
    from dpwise import strategies

    if model is None:
        return
    reason = strategies.refusal(strategy, model, device_type, varying)
    if reason:
        raise DpwiseError(reason)
    check_optimizer(model, optimizer)


def check_run(cfg: TrainConfig, strategy: StrategySpec, seen: Inspection) -> None:
    """Every check of the model this run can make before a worker starts, on the one
    meta-device model and the one probe of ``seen`` (each made only where a check needs it)."""
    from dpwise import strategies

    varying = seen.varying if strategies.traits(strategy.name).shards_model else ""
    check_fit(seen.meta, strategy.name, strategy.device_type, cfg.optimizer, varying)
    if cfg.static_graph:
        check_static_graph(seen.varying)
    if cfg.comm_hook != "none":
        check_comm_hook(seen.meta, cfg.comm_hook, str(strategy.backend), cfg.bucket_cap_mb)
    if cfg.out is not None:
        outputs.check_writable(cfg.out)  # before its lock is taken: the lock is a file in it


def check_static_graph(varying: str) -> None:
    """--static-graph breaks in backward when the used parameters change: catch that up front.
    ``varying``: the layers the probe found used in some steps only."""
    if varying:
        raise DpwiseError(
            f"--static-graph: the parameters of {varying} got a gradient in some passes "
            "of the model and none in others, but a static graph needs the same every step; "
            "use --find-unused-parameters instead"
        )


def check_comm_hook(model: Any, hook: str, backend: str, bucket_cap_mb: float | None) -> None:
    """DDP's communication hooks compress dense buckets: a model with sparse gradients fails in
    them mid-backward (fp16 on gloo: "cadd_sparse" not implemented), refused here in one line;
    so is PowerSGD on gloo with buckets that split the gradients (strategies.ddp). ``model``:
    the meta-device model (None: nothing to check)."""
    from dpwise.diagnosis.layers import sparse_layers
    from dpwise.strategies.hooks import powersgd_bucket

    if model is not None:
        powersgd_bucket(hook, backend, model, bucket_cap_mb)
    sparse = [] if model is None else sparse_layers(model)
    if hook != "none" and sparse:
        raise DpwiseError(
            f"--comm-hook {hook}: {', '.join(s.name for s in sparse[:3])} give sparse gradients, "
            "which DDP's communication hooks cannot compress; drop --comm-hook, or use "
            "sparse=False"
        )


def check_optimizer(model: Any, optimizer: str) -> None:
    """An optimizer that cannot take the model's gradients (sparse ones), refused in one line;
    nothing checked where the model could not be built (None)."""
    from dpwise.diagnosis.layers import sparse_layers

    sparse = [] if model is None else sparse_layers(model)
    if sparse and optimizer in DENSE_ONLY:
        raise DpwiseError(
            f"--optimizer {optimizer}: {', '.join(layer.label for layer in sparse[:3])} "
            f"(sparse=True) give sparse gradients, which {DENSE_ONLY[optimizer]} cannot take; use "
            "--optimizer sgd, or sparse=False"
        )


DENSE_ONLY = {"adamw": "torch.optim.AdamW"}  # optimizers that refuse sparse gradients


def check_resume(
    cfg: TrainConfig, seen: Inspection, header_only: bool = False
) -> checkpoint.Checkpoint | None:
    """Refuse a checkpoint that cannot continue this run before any worker starts. Returns
    the loaded checkpoint for this process to resume from; with ``header_only`` (the workers
    are other processes, which load it themselves) only its header is read, and None returned.
    The model it is checked against is ``seen``'s meta-device one (None: every worker checks)."""
    assert cfg.resume is not None  # the caller resumes
    label = f"--resume {cfg.resume}"
    expected = checkpoint.fingerprint(cfg.to_dict())
    state = checkpoint.load(cfg.resume, expected, label, header_only=header_only)
    if seen.meta is not None:
        checkpoint.check_model(state, label, seen.meta)
    _check_unfinished(cfg, state, label, seen.workload)  # of a checkpoint that fits this run
    return None if header_only else state


class Finished(Exception):
    """--resume of a run that has no step left and whose outputs are in --out: nothing to do,
    nothing written (exit 0). The message says so."""


def _check_unfinished(
    cfg: TrainConfig, state: checkpoint.Checkpoint, label: str, workload: Workload
) -> None:
    """Raise Finished when the checkpoint is at this run's last step and --out already holds
    the run's final.pt and metrics.json. Where they are missing (killed after the last
    checkpoint, or another --out) the run goes on: it trains no step and writes them from the
    checkpoint."""
    if cfg.out is None or not outputs.written(cfg.out):
        return
    done = state["position"]["global_steps"]
    if cfg.max_steps is not None and done == cfg.max_steps:
        limit = f"--max-steps {cfg.max_steps}"
    else:  # the end of the last epoch: how many steps an epoch has depends on the data
        from dpwise.train.engine import steps_per_epoch

        rows = len(workload.load_data(cfg.seed))
        if done != cfg.epochs * steps_per_epoch(rows, cfg.batch_size, cfg.accum_steps):
            return
        limit = f"--epochs {cfg.epochs}"
    raise Finished(
        f"dpwise train: {label} is at step {done}, the end of this run ({limit}): nothing to "
        f"train; {cfg.out}/final.pt and metrics.json are left as they were (raise --epochs or "
        "--max-steps to train further)"
    )


def check_out_contents(cfg: TrainConfig, env: DistEnv) -> None:
    """Under the --out lock (a live run's files are its own, and it is named first): --out
    holds no other command's results, no half-written file of a killed run, and no other run's
    checkpoint unless --resume or --overwrite says what to do with it."""
    if cfg.out is None:
        return
    outowner.check(cfg.out, outowner.TRAIN)  # compare's or tune's results are not mixed in
    remove_stale_temporaries(cfg.out)  # of a write a kill interrupted
    if env.restart_count == 0:  # a worker group restarted by torchrun continues its own run
        outputs.check_checkpoint(cfg.out, cfg.resume is not None, cfg.overwrite)


def check_locked(
    cfg: TrainConfig, env: DistEnv, seen: Inspection, launches: bool
) -> checkpoint.Checkpoint | None:
    """Under the --out lock: what --out holds (check_out_contents), then --resume's checkpoint
    against this run (check_resume: loaded here unless ``launches``, whose workers load it;
    Finished where it has no step left)."""
    check_out_contents(cfg, env)
    return None if cfg.resume is None else check_resume(cfg, seen, header_only=launches)


def out_lock(out: Path | None, env: DistEnv, nnodes: int) -> AbstractContextManager[Any]:
    """The lock on --out, held for the run's life by this process, or by rank 0 of an outer
    launcher's workers (rank 0 writes the files). Not on multi-node runs that dpwise launches:
    every node's command shares the --out, and which node holds rank 0 is decided later."""
    if out is None or env.rank != 0 or (nnodes > 1 and not env.under_launcher):
        return nullcontext()
    return locked(out)
