"""What every critic shares: frame features (the policy's, stop-gradient, or its own encoder), MLP heads,
the critic fitting loop, checkpoints, and the ``CRITICS`` registry.

A critic is built on a :class:`~training.data.ChunkDataset` (episodes in memory, with their structure),
computes its regression targets from the episodes once, is fitted on per-sample losses, and then
``label()``-s every frame with the column the post-training algorithm reads (``cond`` for the RECAP
indicator, ``weight`` for advantage weights) plus diagnostics (``value``, ``advantage``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import yaml
from safetensors.torch import load_file, save_file
from torch import Tensor, nn
from tqdm import tqdm

from policies.flow_matching.encoders import CNNEncoder
from training.critics.targets import RewardConfig
from training.data import ChunkDataset
from training.optim import optimizer_step
from vla.batch import IMAGE_PREFIX, STATE, Batch
from vla.registry import Registry

CRITIC_FILE = "critic.safetensors"
_FIX = "critic fitting stopped, nothing saved: lower critic.lr or check the data's rewards"
CRITIC_CONFIG = "critic.yaml"


@dataclass
class CriticConfig:
    """Shared critic fields; each critic's own constants live in its subclass of this config."""

    encoder: str = (
        "policy"  # "policy": the policy's pooled prefix features, stop-gradient; "own": a small CNN
    )
    hidden: int = 256
    layers: int = 2
    lr: float = 1e-3
    weight_decay: float = 1e-4
    steps: int = 2000
    batch_size: int = 256
    feature_batch: int = 256  # frames per no-grad pass when caching policy features / samples
    seed: int = 0
    reward: RewardConfig = field(default_factory=RewardConfig)

    def __post_init__(self) -> None:
        if isinstance(self.reward, dict):
            self.reward = RewardConfig(**self.reward)
        if self.encoder not in ("policy", "own"):
            raise ValueError(f"critic.encoder={self.encoder!r}: use 'policy' or 'own'")
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError(f"critic.steps={self.steps} and batch_size={self.batch_size} must be >= 1")


def mlp(d_in: int, hidden: int, layers: int, d_out: int) -> nn.Sequential:
    mods: list[nn.Module] = []
    d = d_in
    for _ in range(layers):
        mods += [nn.Linear(d, hidden), nn.LayerNorm(hidden), nn.GELU()]
        d = hidden
    mods.append(nn.Linear(d, d_out))
    return nn.Sequential(*mods)


# ---- frame features ---------------------------------------------------------------------------------------
class PolicyFeatures(nn.Module):
    """The policy's pooled prefix features of every frame, computed once without gradient (stop-gradient)
    and looked up by index; ``encode(obs)`` does the same for new observations."""

    def __init__(self, policy: nn.Module, data: ChunkDataset, batch: int, progress: bool = True) -> None:
        super().__init__()
        if not hasattr(policy, "features"):
            raise TypeError(f"{type(policy).__name__} has no features(obs): use critic.encoder=own")
        self.policy = [policy]  # not a submodule: its weights are not the critic's
        n = len(data)
        chunks = []
        with torch.no_grad():
            was_training = policy.training
            policy.eval()
            for s in tqdm(range(0, n, batch), desc="critic features", disable=not progress, unit="batch"):
                idx = torch.arange(s, min(s + batch, n))
                chunks.append(policy.features(data.observations(idx)).float().cpu())
            policy.train(was_training)
        self.register_buffer("table", torch.cat(chunks), persistent=False)  # [N, d]
        self.dim = int(self.table.shape[1])

    def forward(self, idx: Tensor) -> Tensor:  # [B, d]
        return self.table[idx]

    @torch.no_grad()
    def encode(self, obs: Batch) -> Tensor:
        return self.policy[0].features(obs).float().cpu()


class OwnEncoder(nn.Module):
    """A small CNN per camera (mean-pooled) + a state projection, trained with the critic. Reads images
    and proprio state, not the instruction (one task per critic)."""

    def __init__(self, data: ChunkDataset, dim: int = 128) -> None:
        super().__init__()
        self.data = [data]
        size = list(data.images[data.cameras[0]].shape[1:3])
        self.cams = nn.ModuleDict({c: CNNEncoder([16, 32, 64], dim, size) for c in data.cameras})
        self.state = nn.Linear(data.state.shape[1], dim)
        mean, std = data.state.mean(0), data.state.std(0).clamp(min=1e-3)
        self.register_buffer("s_mean", mean)
        self.register_buffer("s_std", std)
        self.dim = dim * (len(data.cameras) + 1)

    def forward(self, idx: Tensor) -> Tensor:
        return self.encode(self.data[0].observations(idx))

    def encode(self, obs: Batch) -> Tensor:  # [B, dim]
        parts = [enc(obs[IMAGE_PREFIX + c]).mean(1) for c, enc in self.cams.items()]
        parts.append(self.state((obs[STATE].float() - self.s_mean) / self.s_std))
        return torch.cat(parts, dim=-1)


# ---- the critic base --------------------------------------------------------------------------------------
class Critic(nn.Module):
    """Subclasses set ``config_class``, build heads in ``__init__``, and implement ``loss`` and ``label``."""

    config_class: ClassVar[type[CriticConfig]] = CriticConfig
    name: ClassVar[str] = "critic"

    def __init__(
        self, cfg: CriticConfig, data: ChunkDataset, policy: nn.Module | None, progress: bool = True
    ) -> None:
        super().__init__()
        self.cfg, self.data, self.progress = cfg, data, progress
        self.generator = torch.Generator().manual_seed(cfg.seed)
        if cfg.encoder == "policy":
            if policy is None:
                raise ValueError("critic.encoder=policy needs the policy")
            self.features: nn.Module = PolicyFeatures(policy, data, cfg.feature_batch, progress)
        else:
            self.features = OwnEncoder(data)
        self.train_frames = torch.arange(len(data))  # frames the loss samples from; subclasses narrow it
        a = data.action
        self.register_buffer("a_mean", a.mean(0))
        self.register_buffer("a_std", a.std(0).clamp(min=1e-3))

    # ---- helpers ------------------------------------------------------------------------------------
    def chunks(self, idx: Tensor, horizon: int) -> Tensor:
        """Normalised dataset chunks a_{t:t+H} of frames ``idx`` (the last action repeated past the end)."""
        steps = idx[:, None] + torch.arange(horizon)[None]
        steps = torch.minimum(steps, self.data.episode_end[idx][:, None] - 1)
        return (self.data.action[steps] - self.a_mean) / self.a_std  # [B, H, A]

    def per_frame(self, fn, batch: int = 4096) -> Tensor:
        """``fn(idx)`` over every frame in batches, without gradient: [N, ...]."""
        out = []
        with torch.no_grad():
            for s in range(0, len(self.data), batch):
                out.append(fn(torch.arange(s, min(s + batch, len(self.data)))))
        return torch.cat(out)

    # ---- the interface ----------------------------------------------------------------------------------
    def loss(self, idx: Tensor) -> Tensor:  # [B]
        raise NotImplementedError

    def after_step(self) -> None:
        """Called after each optimiser step (Polyak target updates)."""

    def label(self) -> dict[str, Tensor]:
        """Per-frame columns [N] for the post-training algorithm and for plots."""
        raise NotImplementedError

    def fit(self, log: Callable[[dict[str, float], int], None] | None = None) -> list[float]:
        """Fit the critic: ``steps`` AdamW steps on minibatches of ``train_frames``; returns the losses.
        ``log({"critic/loss": ..., "critic/grad_norm": ...}, step)`` after each step (e.g. TensorBoard)."""
        cfg = self.cfg
        params = [p for p in self.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        history: list[float] = []
        bar = tqdm(range(cfg.steps), desc=f"critic {self.name}", disable=not self.progress, unit="step")
        self.train()
        for i in bar:
            pick = torch.randint(len(self.train_frames), (cfg.batch_size,), generator=self.generator)
            loss = self.loss(self.train_frames[pick]).mean()
            # a fixed safety clip: raw returns
            norm = optimizer_step(loss, params, opt, 10.0, what=f"critic {self.name}: step {i + 1}", fix=_FIX)
            self.after_step()
            history.append(loss.item())
            if log is not None:
                log({"critic/loss": history[-1], "critic/grad_norm": norm}, i + 1)
            if len(history) % 50 == 0:
                bar.set_postfix(loss=f"{np.mean(history[-50:]):.4f}")
        self.eval()
        return history

    # ---- checkpoints ------------------------------------------------------------------------------------
    def save(self, directory: str | Path, extra: dict[str, Any] | None = None) -> Path:
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        state = {k: v.contiguous() for k, v in self.state_dict().items()}
        save_file(state, str(out / CRITIC_FILE))
        meta = {"type": self.name, "config": dataclasses.asdict(self.cfg), **(extra or {})}
        (out / CRITIC_CONFIG).write_text(yaml.safe_dump(meta, sort_keys=False))
        return out


def critic_config(name: str, fields: dict[str, Any] | CriticConfig | None) -> CriticConfig:
    """The typed config of the critic registered as ``name`` from ``algo.critic``'s fields (a config
    already typed is returned as it is).

    Raises:
        KeyError: A field (or ``reward.*`` field) the critic's config does not have: one line naming it
            and the known ones.
    """
    cls = CRITICS.get(name).config_class
    if isinstance(fields, CriticConfig):
        if not isinstance(fields, cls):
            raise TypeError(
                f"algo.critic: a {type(fields).__name__} for critic {name}, which reads {cls.__name__}"
            )
        return fields
    fields = dict(fields or {})
    _check_fields(cls, fields, f"algo.critic ({name})")
    if isinstance(fields.get("reward"), dict):
        _check_fields(RewardConfig, fields["reward"], "algo.critic.reward")
    return cls(**fields)


def _check_fields(cls: type, fields: dict[str, Any], where: str) -> None:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(fields) - names)
    if unknown:
        raise KeyError(f"{where}: unknown field(s) {unknown} for {cls.__name__}; known: {sorted(names)}")


def read_critic_config(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / CRITIC_CONFIG
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: not a critic checkpoint folder")
    return yaml.safe_load(path.read_text())


def load_critic_weights(critic: Critic, directory: str | Path) -> Critic:
    state = load_file(str(Path(directory) / CRITIC_FILE))
    missing, unexpected = critic.load_state_dict(state, strict=False)
    bad = [k for k in missing if not k.startswith("features.table")] + list(unexpected)
    if bad:
        raise KeyError(f"{directory}: critic weights do not match {type(critic).__name__}: {bad[:5]}")
    return critic


CRITICS: Registry[type[Critic]] = Registry("critic")
