"""PowerSGD (torch's ``powerSGD_hook``) with a state a checkpoint can hold and give back.

The hook's state is more than settings: its step count (the first two steps are plain
all-reduces), the random generator that seeds each bucket's first Q, and per gradient bucket the
warm-start matrices P and Q and each process's own error feedback (what compression left out,
added to the next step's gradients). Without them a resumed run is another run (8.8e-4 apart
after 78 steps of the default workload).

The hook keys its matrices by bucket index, and which parameters a bucket holds is DDP's choice,
which changes: DDP rebuilds its buckets after its first step, in the order gradients became
ready, and a resumed run's first step runs in the unrebuilt order. So the state is kept, saved
and carried across a change of buckets per parameter: each parameter's slice of its bucket's
flat error and of P and Q (a bucket's tensors in order, the compressed ones in P and Q), taken
back into whichever bucket holds the parameter next.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook

RANK = 1  # rank-1 approximations
PLAIN_STEPS = 2  # plain all-reduces first (torch's minimum: DDP rebuilds its buckets after step 1)
PIECES = ("error", "p", "q")
LegacyRandomState = tuple[str, np.ndarray, int, int, float]
"""numpy's RandomState.get_state(legacy=True): its MT19937 keys, position and Gaussian cache."""


class PowerSGD:
    """torch's PowerSGDState, kept per parameter across bucket changes and checkpoints."""

    def __init__(self, model: nn.Module) -> None:
        self.state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=RANK, start_powerSGD_iter=PLAIN_STEPS
        )
        self.index = {id(p): i for i, p in enumerate(model.parameters())}
        self.layout: dict[int, list[tuple[int, torch.Size]]] = {}  # bucket → its parameters
        self.pool: dict[int, dict[str, torch.Tensor]] = {}  # per parameter, in no bucket yet

    def run(self, bucket: Any) -> torch.futures.Future[torch.Tensor]:
        index = bucket.index()
        params = [(self.index[id(p)], p.shape) for p in bucket.parameters()]
        if self.layout.get(index, params) != params:  # DDP rebuilt its buckets
            self.pool.update(self._pieces())
            self._clear()
        if index not in self.layout and self.pool:
            self._install(index, params, bucket.buffer())
        self.layout[index] = params
        return powerSGD_hook.powerSGD_hook(self.state, bucket)

    def state_dict(self) -> dict[str, Any]:
        """This process's state, on the CPU, per parameter (see the module's doc)."""
        pieces = {**self.pool, **self._pieces()}
        # legacy=True (the default): the tuple ("MT19937", keys, pos, has_gauss, gauss)
        _, keys, pos, has_gauss, gauss = cast(LegacyRandomState, self.state.rng.get_state())
        rng = {"keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
               "has_gauss": int(has_gauss), "gauss": float(gauss)}  # fmt: skip
        cpu = {i: {k: t.detach().cpu().clone() for k, t in d.items()} for i, d in pieces.items()}
        # numpy's MT19937 as tensors and numbers: the checkpoint is read with weights_only
        return {"iter": int(self.state.iter), "rng": rng, "params": cpu}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        rng = saved["rng"]
        keys = rng["keys"].numpy().astype(np.uint32)
        self.state.rng.set_state(("MT19937", keys, rng["pos"], rng["has_gauss"], rng["gauss"]))
        self.state.iter = int(saved["iter"])
        self._clear()
        self.pool = {int(i): dict(d) for i, d in saved["params"].items()}

    def _held(self) -> dict[str, dict[int, torch.Tensor]]:
        """The hook's own dicts, by piece: bucket index → flat tensor."""
        state = self.state
        return {"error": state.error_dict, "p": state.p_memory_dict, "q": state.q_memory_dict}

    def _clear(self) -> None:
        for held in self._held().values():
            held.clear()
        self.layout.clear()

    def _pieces(self) -> dict[int, dict[str, torch.Tensor]]:
        """Every bucket's state cut into its parameters' slices."""
        held = self._held()
        out: dict[int, dict[str, torch.Tensor]] = {}
        for index, params in self.layout.items():
            rate = self.state.min_compression_rate
            sizes = [_sizes(shape, rate) for _, shape in params]
            for k, (name, flat) in enumerate((n, held[n].get(index)) for n in PIECES):
                if flat is None:
                    continue
                lengths = [s[k] for s in sizes]
                if sum(lengths) != flat.numel():
                    raise ValueError(
                        f"PowerSGD's {name} of bucket {index} holds {flat.numel()} values, its "
                        f"parameters {sum(lengths)}"
                    )
                for (param, _), piece in zip(params, flat.split(lengths), strict=True):
                    out.setdefault(param, {})[name] = piece
        return out

    def _install(self, index: int, params: list[tuple[int, torch.Size]], buffer: torch.Tensor
                 ) -> None:  # fmt: skip
        """Give bucket ``index`` its parameters' state from the pool (all of it, or none)."""
        mine = [self.pool.get(param) for param, _ in params]
        held = self._held()
        for name in PIECES:
            if all(d is not None and name in d for d in mine):
                pieces = [d[name].to(buffer.device, buffer.dtype) for d in mine if d is not None]
                held[name][index] = torch.cat(pieces) if pieces else buffer.new_empty(0)
        for param, _ in params:
            self.pool.pop(param, None)


def _sizes(shape: torch.Size, rate: float) -> tuple[int, int, int]:
    """(error, P, Q) lengths of one parameter in its bucket, as powerSGD_hook lays them out."""
    numel = shape.numel()
    n = shape[0] if len(shape) else 1
    m = numel // n if n else 0
    rank = min(n, m, RANK)
    compressed = powerSGD_hook._should_compress(n, m, rank, rate)[0]
    return (numel, n * rank, m * rank) if compressed else (numel, 0, 0)


def powersgd(tracker, bucket):
    """The hook DDP calls (its state: a PowerSGD). Not annotated: DDP checks a hook's
    annotations against its own types, and these would be strings here."""
    return tracker.run(bucket)
