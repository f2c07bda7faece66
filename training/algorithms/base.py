"""What every gradient-based post-training algorithm shares: AdamW, warmup + cosine schedule, clipping."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from training.optim import optimizer_step
from vla.batch import Batch
from vla.data.schema import IS_INTERVENTION
from vla.errors import InputError
from vla.registry import Registry


@dataclass
class OptimConfig:
    lr: float = 3e-4
    weight_decay: float = 1e-4
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    warmup_steps: int = 200
    schedule: str = "cosine"  # or "constant"
    min_lr_ratio: float = 0.1
    grad_clip: float = 1.0
    # lr multiplier of the advantage-indicator embedding (RECAP). It starts at zero when post-training
    # begins, and at the base lr it barely moves in a short run (measured: norm 0.08 after 1000 steps)
    indicator_lr_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.schedule not in ("cosine", "constant"):
            raise ValueError(f"optim.schedule={self.schedule!r}: use 'cosine' or 'constant'")
        if self.lr <= 0 or self.indicator_lr_scale <= 0:
            raise ValueError(
                f"optim.lr={self.lr} and indicator_lr_scale={self.indicator_lr_scale} must be > 0"
            )


def lr_factor(step: int, cfg: OptimConfig, total: int) -> float:
    """Linear warmup, then cosine decay to ``min_lr_ratio`` (or constant)."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return 1.0
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps))
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


@dataclass
class AlgoConfig:
    """Fields every algorithm accepts (``algo.name`` picks the class; the rest are its config's fields)."""

    name: str = "sft"


def require_labels(data: Any, method: str, *, success: bool = False, interventions: bool = False) -> None:
    """Refuses, in one line naming the dataset and the missing field, data that lacks the labels ``method``
    needs: episode outcomes (``success``: RECAP, AWBC, ALOE, HABC, Flow-DPO critics) or human takeovers
    (``interventions``: APO). Plain LeRobot datasets may have neither (:mod:`training.data`).

    Raises:
        InputError: ``<dataset>: algo=<method> needs ...: <field> missing ...``.
    """
    from training.data import missing_success

    if interventions and data.roots_without_interventions:
        raise InputError(
            f"{data.roots_without_interventions[0]}: algo={method} needs human takeovers: feature "
            f"'{IS_INTERVENTION}' missing from the dataset (record with interventions marked, or use "
            "another algo)"
        )
    if success:
        unknown = [r for r, m in zip(data.episode_roots, data.episodes, strict=True) if m.success is None]
        if unknown:
            raise InputError(missing_success(unknown[0], f"algo={method}"))


def _is_indicator(name: str) -> bool:
    """The RECAP indicator embedding: ``cond_emb`` (our policy) or ``model.indicator`` (LeRobot adapters)."""
    return name.split(".")[-2] in ("cond_emb", "indicator")


class GradientAlgorithm:
    """Owns the optimiser of ``policy``; subclasses implement ``update(batch)`` from the paper's equation.

    Algorithms that need credit first (a critic fitted on the episodes) do it in :meth:`prepare`, which
    the training loop calls once before the first step, and put per-frame columns into ``data.labels``.
    """

    config_class: type[AlgoConfig] = AlgoConfig
    # folders under the run folder that ``prepare`` reads back on a resume (a data-parallel rank other than
    # 0 prepares in a scratch folder with these linked in from rank 0's)
    resume_dirs: tuple[str, ...] = ()

    @classmethod
    def label_needs(cls, config: dict[str, Any]) -> tuple[bool, bool]:
        """``(episode outcomes, human takeovers)`` this algorithm needs in its data, known from its config
        alone, so that ``vla-train`` refuses data without them before any folder is made
        (:func:`training.data.check_labels`); :func:`require_labels` checks the loaded data again."""
        return False, False

    @classmethod
    def make_config(cls, config: dict[str, Any] | None) -> AlgoConfig:
        """The typed config of ``algo.*`` (with its critic's, for a credit algorithm), built once.

        Raises:
            TypeError: A field ``config_class`` does not have.
            KeyError, ValueError: The config class's own checks (e.g. an unknown ``critic.*`` field).
        """
        fields = {"name": "sft", **(config or {})}
        try:
            return cls.config_class(**fields)
        except TypeError as exc:
            raise TypeError(f"algo: {exc} (fields of {cls.config_class.__name__})") from exc

    # where prepare() logs its own fitting, ``scalars({tag: value}, step)`` (the Trainer's TensorBoard)
    scalars: Callable[[dict[str, float], int], None] | None = None

    def __init__(
        self,
        policy: nn.Module,
        optim: OptimConfig,
        total_steps: int,
        seed: int = 0,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.policy = policy
        self.optim = optim
        self.config = self.make_config(config)
        named = [(n, p) for n, p in policy.named_parameters() if p.requires_grad]
        indicator = [p for n, p in named if _is_indicator(n)]
        decay = [p for n, p in named if not _is_indicator(n) and p.ndim >= 2]
        no_decay = [p for n, p in named if not _is_indicator(n) and p.ndim < 2]
        groups = [
            {"params": decay, "weight_decay": optim.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        if indicator:
            groups.append(
                {"params": indicator, "weight_decay": 0.0, "lr": optim.lr * optim.indicator_lr_scale}
            )
        self.optimizer = torch.optim.AdamW(
            groups,
            lr=optim.lr,
            betas=tuple(optim.betas),
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: lr_factor(s, optim, total_steps)
        )
        self.generator = torch.Generator().manual_seed(seed)  # noise / flow time / indicator dropout

    def step(self, loss: Tensor) -> dict[str, float]:
        """One optimiser step on ``loss``.

        Raises:
            NonFiniteError: The loss (before ``backward``) or the gradient norm (before the optimiser
                step) is NaN/inf; no weight, optimiser moment or schedule has moved.
        """
        norm = optimizer_step(loss, self.policy.parameters(), self.optimizer, self.optim.grad_clip)
        self.scheduler.step()
        return {"loss": float(loss.detach()), "grad_norm": norm, "lr": self.scheduler.get_last_lr()[0]}

    def update(self, batch: Batch) -> dict[str, float]:
        raise NotImplementedError

    def prepare(self, data: Any, out: Any, progress: bool = True) -> dict[str, float]:
        """Once before training (and again on resume): fit critics, label ``data``. Returns a summary."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.generator.set_state(state["generator"])


ALGORITHMS: Registry[type[GradientAlgorithm]] = Registry("algorithm")
