"""A constant-chunk test policy, registered as ``test_home``: every action is one fixed pose.

Built with the Panda's home pose and an open gripper it never touches anything (reach: 0 successes).
Evaluation workers import it by module name (``EvalConfig.imports=["dummy_policy"]``) with this folder on
their path. ``noise_std`` adds generator-driven noise; ``nan_at_call`` returns a NaN chunk on that call.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from vla.batch import ACTION, Batch, batch_size
from vla.checkpoint import load_model_state, read_config, save_checkpoint
from vla.policy import POLICIES

NAME = "test_home"


@POLICIES.register(NAME)
class HomePolicy(torch.nn.Module):
    def __init__(
        self, pose: Sequence[float], chunk_size: int = 10, noise_std: float = 0.0, nan_at_call: int = 0
    ) -> None:
        super().__init__()
        self.register_buffer("pose", torch.tensor(list(pose), dtype=torch.float32))  # [A]
        self.chunk_size = chunk_size
        self.action_dim = len(pose)
        self.noise_std = noise_std
        self.nan_at_call = nan_at_call  # 1-based; 0: never
        self.calls = 0
        self.last_kwargs: dict = {}

    def loss(self, batch: Batch, *, noise=None, time=None, cond=None) -> Tensor:  # [B]
        return (batch[ACTION] - self.pose).pow(2).mean(dim=(1, 2))

    def sample_chunk(
        self,
        obs: Batch,
        *,
        cond=None,
        noise=None,
        num_steps=None,
        guidance=None,
        prefix=None,
        prefix_delay=0,
        generator=None,
        num_samples=1,
    ) -> Tensor:  # [B * num_samples, H, A]
        self.calls += 1
        self.last_kwargs = {
            "cond": cond,
            "num_steps": num_steps,
            "guidance": guidance,
            "generator": generator,
            "inference_mode": torch.is_inference_mode_enabled(),
        }
        chunk = self.pose.expand(batch_size(obs) * num_samples, self.chunk_size, -1).clone()
        if self.noise_std:
            chunk += self.noise_std * torch.randn(chunk.shape, generator=generator).to(chunk.device)
        if self.calls == self.nan_at_call:
            chunk[:, -1, 0] = float("nan")
        return chunk

    def save(self, directory: str | Path) -> None:
        config = {
            "type": NAME,
            "pose": self.pose.tolist(),
            "chunk_size": self.chunk_size,
            "noise_std": self.noise_std,
            "nan_at_call": self.nan_at_call,
        }
        save_checkpoint(directory, model=dict(self.state_dict()), config=config)

    @classmethod
    def load(cls, directory: str | Path, device: str | torch.device = "cpu") -> HomePolicy:
        c = read_config(directory)
        policy = cls(c["pose"], c["chunk_size"], c["noise_std"], c["nan_at_call"])
        policy.load_state_dict(load_model_state(directory))
        return policy.to(device).eval()
