"""A checkpoint's deployment defaults: how it was validated, so that it deploys the same way.

``deploy.yaml`` beside ``config.yaml`` holds the execution horizon h, the advantage indicator the policy
is conditioned on, the classifier-free guidance scale and the sampler's integration steps. ``vla-train``
writes it from the resolved training config: ``deploy.horizon`` (the horizon its preset evaluates at, e.g.
3 in ``experiment=sft_reach``; a post-training run without one keeps its base checkpoint's), the
policy's ``inference_cond`` / ``inference_guidance`` (set by RECAP-style post-training), its
``num_steps``, and the training data's most frequent instruction (the ROS node's default instruction).

:func:`resolve` picks each value once, in the one deployment assembly
(:func:`~vla.runtime.deployment.deploy_checkpoint`), so ``vla-eval``, ``vla-rollout``, the benchmarks and
the ROS node all get it: an explicit argument (not None) wins, else the checkpoint's value, else the
built-in default (the whole chunk, unconditioned, no guidance, the policy's own steps). A checkpoint
without ``deploy.yaml`` falls back to its ``config.yaml`` (``inference_cond``, ``inference_guidance``,
``num_steps``) and executes whole chunks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import yaml

from vla.checkpoint import read_config
from vla.errors import InputError
from vla.runtime.config import DeployConfig

DEFAULTS_FILE = "deploy.yaml"
ARGUMENT, CHECKPOINT, DEFAULT = "argument", "checkpoint", "default"


@dataclass(frozen=True)
class DeployDefaults:
    """What a checkpoint deploys with unless told otherwise (``deploy.yaml``; None: not set)."""

    horizon: int | None = None  # h, policy actions executed per chunk (None: the whole chunk)
    cond: int | None = None  # advantage indicator the policy is conditioned on (None: unconditioned)
    guidance: float | None = None  # classifier-free guidance scale (None: no guidance)
    num_steps: int | None = None  # the sampler's integration steps (None: the policy's own)
    instruction: str | None = None  # the training data's most frequent instruction (None: not recorded)

    def __post_init__(self) -> None:
        if self.instruction is not None and not (isinstance(self.instruction, str) and self.instruction):
            raise ValueError(f"instruction={self.instruction!r} must be a non-empty string or null")
        if self.horizon is not None and self.horizon < 1:
            raise ValueError(f"horizon={self.horizon} must be >= 1")
        if self.cond not in (None, 0, 1):
            raise ValueError(f"cond={self.cond} must be 0, 1 or null")
        if self.num_steps is not None and self.num_steps < 1:
            raise ValueError(f"num_steps={self.num_steps} must be >= 1")

    def save(self, checkpoint: str | Path) -> Path:
        """Write ``<checkpoint>/deploy.yaml``."""
        path = Path(checkpoint) / DEFAULTS_FILE
        head = "# how this checkpoint deploys unless told otherwise (vla.runtime.defaults); null: not set\n"
        path.write_text(head + yaml.safe_dump(asdict(self), sort_keys=False))
        return path

    @classmethod
    def load(cls, checkpoint: str | Path) -> DeployDefaults | None:
        """``<checkpoint>/deploy.yaml``, or None when the checkpoint has none.

        Raises:
            InputError: The file is not a mapping of the known fields, or a value is out of range.
        """
        path = Path(checkpoint) / DEFAULTS_FILE
        if not path.is_file():
            return None
        fix = "fix it or delete it (the checkpoint then deploys with its config.yaml's defaults)"
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise InputError(f"{path}: not YAML ({exc}); {fix}") from exc
        known = {f.name for f in fields(cls)}
        if not isinstance(raw, dict) or set(raw) - known:
            extra = sorted(set(raw) - known) if isinstance(raw, dict) else type(raw).__name__
            raise InputError(f"{path}: unknown field(s) {extra}; known: {sorted(known)}; {fix}")
        try:
            return cls(**raw)
        except (TypeError, ValueError) as exc:
            raise InputError(f"{path}: {exc}; {fix}") from exc


def checkpoint_defaults(checkpoint: str | Path) -> DeployDefaults:
    """The checkpoint's defaults: ``deploy.yaml``, each unset value filled from ``config.yaml`` (the
    policy's ``inference_cond``, ``inference_guidance`` and ``num_steps``, where it has them)."""
    config = read_config(checkpoint)
    saved = DeployDefaults.load(checkpoint) or DeployDefaults()
    return DeployDefaults(
        horizon=saved.horizon,
        cond=_first(saved.cond, config.get("inference_cond")),
        guidance=_first(saved.guidance, config.get("inference_guidance")),
        num_steps=_first(saved.num_steps, config.get("num_steps")),
    )


@dataclass(frozen=True)
class DeploySettings:
    """The values a deployment runs with, and where each came from (``argument``, ``checkpoint`` or
    ``default``)."""

    horizon: int | None  # None: the whole chunk
    cond: int | None
    guidance: float | None
    num_steps: int | None  # None: the policy's own
    sources: dict[str, str]
    chunk_size: int | None = None  # H of the checkpoint's policy (where its config.yaml says)

    def apply(self, cfg: DeployConfig) -> DeployConfig:
        """``cfg`` with the resolved execution horizon."""
        return replace(cfg, horizon=self.horizon)

    def describe(self) -> str:
        """One line: ``deploy: horizon=3 (checkpoint), cond=none (default), ...``."""
        whole = "whole chunk" if self.chunk_size is None else f"{self.chunk_size}, the whole chunk"
        shown = {
            "horizon": whole if self.horizon is None else self.horizon,
            "cond": self.cond,
            "guidance": self.guidance,
            "num_steps": "the policy's" if self.num_steps is None else self.num_steps,
        }
        parts = [f"{k}={'none' if v is None else v} ({self.sources[k]})" for k, v in shown.items()]
        return "deploy: " + ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {k: {"value": getattr(self, k), "source": s} for k, s in self.sources.items()}


def resolve(
    checkpoint: str | Path,
    deploy: DeployConfig,
    *,
    cond: int | None = None,
    guidance: float | None = None,
    num_steps: int | None = None,
) -> DeploySettings:
    """Each deployment value: the argument when given (not None), else the checkpoint's, else the default.

    ``deploy.horizon`` is the horizon's argument; temporal ensembling (``executor.temporal_ensemble``)
    samples every step, so it sets h = 1 and the checkpoint's horizon does not apply.

    Raises:
        InputError: ``deploy.yaml`` is unreadable, or its horizon is longer than the policy's chunks.
    """
    ckpt = checkpoint_defaults(checkpoint)
    chunk = read_config(checkpoint).get("chunk_size")
    chunk_size = int(chunk) if isinstance(chunk, int) else None
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    given = {"cond": cond, "guidance": guidance, "num_steps": num_steps}
    if deploy.executor.temporal_ensemble is not None and deploy.horizon is None:
        given["horizon"] = 1
    else:
        given["horizon"] = deploy.horizon
    for name in ("horizon", "cond", "guidance", "num_steps"):
        arg, own = given[name], getattr(ckpt, name)
        values[name], sources[name] = (
            (arg, ARGUMENT) if arg is not None else (own, CHECKPOINT) if own is not None else (None, DEFAULT)
        )
    h = values["horizon"]
    if sources["horizon"] == CHECKPOINT and chunk_size is not None and h > chunk_size:
        raise InputError(
            f"{Path(checkpoint) / DEFAULTS_FILE}: horizon={h} is longer than the policy's chunks "
            f"(chunk_size={chunk_size}); fix the file or pass deploy.horizon=<h>"
        )
    return DeploySettings(**values, sources=sources, chunk_size=chunk_size)


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)
