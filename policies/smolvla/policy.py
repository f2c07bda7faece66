"""``SmolVLAAdapter``: LeRobot's SmolVLA (``VLAFlowMatching``) behind the :class:`vla.policy.Policy` protocol.

The network is LeRobot's ``VLAFlowMatching`` unchanged (SmolVLM prefix, KV-cached cross-attending action
expert), so LeRobot SmolVLA checkpoints load weight for weight (``from_lerobot_pretrained``; LeRobot's
config is translated by :class:`policies.smolvla.config.SmolVLAAdapterConfig`). The shared plumbing
(normalisation, indicator, CFG, RTC, checkpoints) is :class:`policies.lerobot_adapter.LeRobotFlowAdapter`;
what is SmolVLA's: images resized with padding by LeRobot's ``resize_with_pad``, the prompt ``task + "\\n"``
(LeRobot's ``NewLineTaskProcessorStep``) tokenised with the backbone's tokenizer, and the state as the last
prefix token.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from lerobot.policies.common.vla_utils import make_att_2d_masks, resize_with_pad
from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig
from lerobot.policies.smolvla.modeling_smolvla import VLAFlowMatching
from torch import Tensor

from policies.lerobot_adapter import IndicatorSlot, LeRobotFlowAdapter
from policies.lerobot_preprocess import FlowInputs
from policies.smolvla.config import SmolVLAAdapterConfig
from vla.checkpoint import Stats
from vla.policy import POLICIES

BACKBONE_DIR = "backbone"  # the backbone's config/tokenizer/processor files, copied into each checkpoint

__all__ = ["BACKBONE_DIR", "IndicatorFlowMatching", "SmolVLAAdapter"]


class IndicatorFlowMatching(IndicatorSlot, VLAFlowMatching):
    """``VLAFlowMatching`` plus the advantage-indicator embedding, added to the expert's input tokens."""

    def __init__(self, config: SmolVLAConfig) -> None:
        VLAFlowMatching.__init__(self, config)
        self.init_indicator(self.vlm_with_expert.expert_hidden_size)

    def embed_suffix(self, noisy_actions: Tensor, timestep: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        embs, pad_masks, att_masks = super().embed_suffix(noisy_actions, timestep)  # embs [B, H, d_expert]
        return self.with_indicator(embs, self.config.chunk_size), pad_masks, att_masks


@POLICIES.register("smolvla")
class SmolVLAAdapter(LeRobotFlowAdapter):
    """SmolVLA as a chunking policy (see :class:`LeRobotFlowAdapter` for the loss and the sampler)."""

    config_class = SmolVLAAdapterConfig
    asset_dir = BACKBONE_DIR
    asset_field = "vlm_model_name"
    lerobot_types = ("smolvla",)
    config: SmolVLAAdapterConfig

    def __init__(self, config: SmolVLAAdapterConfig, stats: Stats | None = None) -> None:
        folder = Path(config.vlm_model_name)
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(
                f"vlm_model_name={config.vlm_model_name!r} is not a local SmolVLM folder with config.json "
                "(nothing is downloaded at run time)"
            )
        model = IndicatorFlowMatching(SmolVLAConfig(**config.lerobot_kwargs()))
        super().__init__(config, stats, model, model.vlm_with_expert.processor.tokenizer)

    # ---- hooks -------------------------------------------------------------------------------------
    def _image(self, img: Tensor) -> Tensor:
        img = resize_with_pad(img, self.config.image_size[0], self.config.image_size[1], pad_value=0)
        return img * 2.0 - 1.0  # SigLIP range

    def _prompts(self, tasks: Sequence[str], state: Tensor) -> list[str]:
        return [t if t.endswith("\n") else f"{t}\n" for t in tasks]  # LeRobot's NewLineTaskProcessorStep

    def _flow_losses(self, x: FlowInputs, actions: Tensor, eps: Tensor, t: Tensor) -> Tensor:
        return self.model(x.images, x.img_masks, x.tokens, x.token_mask, x.state, actions, eps, t)

    def _prefix(self, x: FlowInputs) -> tuple[Tensor, Any, Tensor]:
        m = self.model
        embs, pad, att = m.embed_prefix(x.images, x.img_masks, x.tokens, x.token_mask, state=x.state)
        out, cache = m.vlm_with_expert.forward(
            attention_mask=make_att_2d_masks(pad, att),
            position_ids=torch.cumsum(pad, dim=1) - 1,
            past_key_values=None,
            inputs_embeds=[embs, None],
            use_cache=True,
        )
        return pad, cache, out[0]

    def _denoise(self, x: FlowInputs, prefix_pad: Tensor, cache: Any, x_t: Tensor, t: Tensor) -> Tensor:
        # denoise_step crops the cache back to the prefix after each call, so it can be reused.
        return self.model.denoise_step(
            prefix_pad_masks=prefix_pad, past_key_values=cache, x_t=x_t, timestep=t
        )
