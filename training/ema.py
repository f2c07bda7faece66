"""Exponential moving average of a policy's weights (evaluated and saved instead of the raw weights)."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class EMA:
    """theta_ema <- d theta_ema + (1 - d) theta, with d = min(decay, (1 + n) / (10 + n)) after n updates."""

    def __init__(self, module: nn.Module, decay: float) -> None:
        self.decay = decay
        self.updates = 0
        self.shadow = {k: v.detach().clone() for k, v in module.state_dict().items()}

    @torch.no_grad()
    def update(self, module: nn.Module) -> None:
        d = min(self.decay, (1 + self.updates) / (10 + self.updates))
        for k, v in module.state_dict().items():
            if v.dtype.is_floating_point:
                self.shadow[k].mul_(d).add_(v.detach(), alpha=1 - d)
            else:
                self.shadow[k].copy_(v)
        self.updates += 1

    def swap(self, module: nn.Module) -> dict[str, Tensor]:
        """Load the EMA weights into ``module``; return the raw weights (to restore with load_state_dict)."""
        raw = {k: v.detach().clone() for k, v in module.state_dict().items()}
        module.load_state_dict(self.shadow)
        return raw

    def state_dict(self) -> dict:
        return {"shadow": self.shadow, "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.shadow = {k: v.clone() for k, v in state["shadow"].items()}
        self.updates = int(state["updates"])
