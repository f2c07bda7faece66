"""Data-parallel training across processes: `vla-train` unchanged under `torchrun` / `accelerate launch`.

    torchrun --nproc_per_node 4 -m training.scripts.train experiment=... steps=...

``torchrun`` (and ``accelerate launch``) start one process per device with ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK`` and the rendezvous address in the environment; :func:`init` joins the process group from them
(NCCL on CUDA, gloo on the CPU) and the :class:`~training.loop.Trainer` then trains data-parallel:

- every process holds the whole policy (and critic); ``batch_size`` is the *global* batch: each step every
  process draws the same global batch from the shared data generator and keeps rows ``rank::size``
  (:func:`shard_rows`), so the ranks never see the same row in a step; the per-row noise and flow time are
  drawn for the global batch and sliced the same way (:mod:`vla.sharding`);
- the one optimiser step (:func:`training.optim.optimizer_step`, used by every algorithm and critic, their
  ensembles and target networks included) averages the gradients over the ranks before clipping
  (:func:`average_gradients`): with each rank's loss the mean over its rows, the step is the one process's
  step on the global batch (DDP's semantics, without wrapping modules whose loss is not their ``forward``);
- the finiteness of each loss and the time budget are agreed by all ranks (:func:`all_agree`), so no rank
  stops alone and leaves the others waiting;
- rank 0 alone writes checkpoints, ``train.log``, TensorBoard and W&B, holds the run folder's lock and runs
  the evaluations; the logged metrics are the ranks' means. A checkpoint holds the global batch's
  generator, so it resumes at any world size on the same draws.

A critic's fitting before actor training runs on every rank (the same draws, so the same critic); its steps
average identical gradients.

``fsdp=true`` (:func:`shard`, FSDP2's ``fully_shard``) shards the policy instead: each linear layer, then
the rest, so that each process holds 1/size of the weights, gradients and optimiser moments and gathers a
linear layer's weights only while it runs (the rest while the policy's ``loss``/``sample_chunk``/``features``
runs). FSDP averages the policy's gradients itself (reduce-
scatter); the critics stay whole on every rank. Checkpoints hold whole tensors (:func:`full`, gathered by
every rank at the same steps), so they deploy as any other and resume at any world size, sharded again on
load (:func:`reshard_optimizer`).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from vla.batch import Batch
from vla.errors import InputError

try:
    from torch.distributed.tensor import DTensor
except ImportError:  # a torch without distributed
    DTensor = type("DTensor", (), {})  # type: ignore[misc,assignment]

# a rank waits in a collective while rank 0 evaluates or saves: long enough for a full evaluation
TIMEOUT = datetime.timedelta(hours=6)


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def launched() -> bool:
    """Whether this process was started by a launcher with more than one process."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def world() -> World:
    """This process's place: from the process group once :func:`init` joined it, else one process."""
    if dist.is_available() and dist.is_initialized():
        return World(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))
    return World()


def init(device: str) -> World:
    """Join the launcher's process group (once; no-op for one process): NCCL for CUDA, gloo on the CPU."""
    if not launched():
        return World()
    if not dist.is_initialized():
        backend = "nccl" if device.startswith("cuda") else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend, timeout=TIMEOUT)
    return world()


def device_of(device: str, w: World) -> str:
    """``cuda`` means this rank's GPU (``cuda:<local rank>``) under a launcher."""
    return f"cuda:{w.local_rank}" if device == "cuda" and w.size > 1 else device


def check_batch(batch_size: int, w: World) -> None:
    """``batch_size`` (the global batch) must divide among the processes."""
    if batch_size % w.size:
        raise InputError(
            f"batch_size={batch_size} is the global batch: it must divide among the {w.size} processes "
            f"(a multiple of {w.size})"
        )


def shard_rows(batch: Batch, w: World) -> Batch:
    """Rows ``rank::size`` of every tensor (and list) in the global ``batch``."""
    if w.size == 1:
        return batch
    out: Batch = {}
    for k, v in batch.items():
        out[k] = v[w.rank :: w.size]
    return out


def average_gradients(params: Iterable[Tensor]) -> None:
    """Average the gradients of ``params`` over the ranks (one flat all-reduce; no-op for one process).
    FSDP-sharded parameters (DTensors) are skipped: FSDP has averaged theirs."""
    w = world()
    if w.size == 1:
        return
    grads = [p.grad for p in params if p.grad is not None and not isinstance(p, DTensor)]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= w.size
    at = 0
    for g in grads:
        g.copy_(flat[at : at + g.numel()].view_as(g))
        at += g.numel()


def _device() -> torch.device:
    """Where a collective's tensors live: NCCL reduces CUDA tensors, gloo CPU ones."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_agree(flag: bool) -> bool:
    """True when ``flag`` holds on every rank (``flag`` for one process)."""
    if world().size == 1:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=_device())
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item() > 0)


def mean_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """Each scalar's mean over the ranks (``metrics`` for one process; every rank must call it)."""
    w = world()
    if w.size == 1 or not metrics:
        return metrics
    keys = sorted(metrics)
    t = torch.tensor([float(metrics[k]) for k in keys], dtype=torch.float64, device=_device())
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return {k: float(v) / w.size for k, v in zip(keys, t.tolist(), strict=True)}


def from_main(value: Any) -> Any:
    """Rank 0's ``value`` on every rank (``value`` for one process)."""
    if world().size == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    if world().size > 1:
        dist.barrier()


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


# ---- batch statistics over the global batch (every rank must call these, whatever its rows hold) -----------
def global_sum(x: Tensor) -> Tensor:
    """``x`` summed over the ranks (detached; ``x`` itself for one process)."""
    if world().size == 1:
        return x.detach()
    t = x.detach().to(_device(), copy=True)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.to(x.device)


def global_mean(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """The mean of ``x`` (over ``mask``) across the global batch (detached; 0 where nothing is masked in)."""
    m = torch.ones_like(x) if mask is None else mask.to(x.dtype)
    return global_sum((x * m).sum()) / global_sum(m.sum()).clamp(min=1e-12)


def weighted_mean(values: Tensor, weights: Tensor) -> Tensor:
    """sum_i w_i v_i / sum_i w_i over the global batch, with gradient through ``values``: each rank returns
    its share times the world size, so the ranks' averaged gradients are the global batch's."""
    total = global_sum(weights.sum()).clamp(min=1e-8)
    return (weights * values).sum() * world().size / total


# ---- FSDP: the policy sharded across the ranks ----------------------------------------------------------
FORWARD_METHODS = ("loss", "sample_chunk", "features")  # what algorithms and critics call on a policy


def shard_units(module: torch.nn.Module) -> list[torch.nn.Module]:
    """FSDP's units: ``module``'s linear layers, which every model calls through their ``forward`` (a
    transformer block may not be: ours computes its cross-attention keys with a method of the block, and
    LeRobot's SmolVLA runs its layers' projections one by one), except those of ``nn.MultiheadAttention``
    (which reads its projection's weight directly)."""
    inside_mha = {id(m.out_proj) for m in module.modules() if isinstance(m, torch.nn.MultiheadAttention)}
    return [m for m in module.modules() if isinstance(m, torch.nn.Linear) and id(m) not in inside_mha]


def shard(policy: torch.nn.Module) -> int:
    """Shard ``policy`` across the ranks with FSDP2 (each unit of :func:`shard_units`, then the whole, whose
    ``loss``/``sample_chunk``/``features`` gather its weights as its ``forward`` would); returns the units.
    Call before the optimiser is built, on every rank."""
    from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

    units = shard_units(policy)
    for unit in units:
        fully_shard(unit)
    # resharded after every call, also the root (FSDP keeps a root's weights whole until its backward,
    # which a no-grad call, e.g. a critic reading the policy's features, never runs)
    fully_shard(policy, reshard_after_forward=True)
    for name in FORWARD_METHODS:
        if callable(getattr(policy, name, None)):
            register_fsdp_forward_method(policy, name)
    return len(units)


def full(obj: Any) -> Any:
    """``obj`` (a state dict, nested dicts/lists) with every DTensor gathered whole (on the CPU); every rank
    must call it, in the same order. Plain tensors and other values pass through."""
    if isinstance(obj, DTensor):
        return obj.full_tensor().cpu()
    if isinstance(obj, dict):
        return {k: full(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(full(v) for v in obj)
    return obj


def reshard_optimizer(optimizer: torch.optim.Optimizer) -> None:
    """After ``optimizer.load_state_dict`` of whole tensors: each moment of a sharded parameter sharded as
    the parameter is (the checkpoint may come from another world size)."""
    from torch.distributed.tensor import distribute_tensor

    for group in optimizer.param_groups:
        for p in group["params"]:
            if not isinstance(p, DTensor) or p not in optimizer.state:
                continue
            for k, v in optimizer.state[p].items():
                if isinstance(v, Tensor) and not isinstance(v, DTensor) and tuple(v.shape) == tuple(p.shape):
                    optimizer.state[p][k] = distribute_tensor(v.to(p.device), p.device_mesh, p.placements)


def shard_like(tensors: dict[str, Tensor], reference: dict[str, Tensor]) -> dict[str, Tensor]:
    """Whole ``tensors`` laid out as ``reference``'s DTensors of the same key are (the others as given)."""
    from torch.distributed.tensor import distribute_tensor

    out = dict(tensors)
    for k, ref in reference.items():
        if isinstance(ref, DTensor) and k in out and not isinstance(out[k], DTensor):
            out[k] = distribute_tensor(out[k].to(ref.device), ref.device_mesh, ref.placements)
    return out
