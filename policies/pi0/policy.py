"""``PI0Adapter`` / ``PI05Adapter``: LeRobot's pi0 and pi0.5 behind the :class:`vla.policy.Policy` protocol.

The networks are LeRobot's ``PI0Pytorch`` / ``PI05Pytorch``: their ``embed_prefix``, ``embed_suffix``,
``forward`` and ``denoise_step`` run unchanged. Only construction is ours (:class:`SizedPaliGemmaWithExpert`):
LeRobot's constructors take their sizes from ``get_gemma_config(variant)`` and hard-code the vocabulary and
the SigLIP tower, so they can only build the released multi-billion-parameter models. Ours builds the same
modules under the same names from :class:`policies.pi0.config.PI0AdapterConfig` sizes: at the released
sizes a LeRobot checkpoint loads weight for weight; at tiny sizes the adapter is tested offline on a CPU.

What is pi0's (the shared plumbing is :class:`policies.lerobot_adapter.LeRobotFlowAdapter`):

- images: openpi's ``resize_with_pad_torch`` to the square ``image_size``, then [0, 1] -> [-1, 1];
- prompt: ``task + "\\n"`` (LeRobot's ``Pi0NewLineProcessor``), right-padded to ``tokenizer_max_length``;
- the state is the expert's first suffix token (the indicator goes on the H action tokens after it).

pi0.5 differs in three places: the normalised state is discretised into 256 bins and written into the
prompt (``"Task: <task>, State: <bins>;\\nAction: "``, LeRobot's ``Pi05PrepareStateTokenizerProcessorStep``),
the expert conditions on time through adaRMS norms (its suffix is the H action tokens only), and state and
action are quantile-normalised by default.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lerobot.policies.common.vla_utils import (
    make_att_2d_masks,
    prepare_attention_masks_4d,
    resize_with_pad_torch,
)
from lerobot.policies.pi0.configuration_pi0 import PI0Config
from lerobot.policies.pi0.modeling_pi0 import PaliGemmaWithExpertModel, PI0Pytorch
from lerobot.policies.pi05.configuration_pi05 import PI05Config
from lerobot.policies.pi05.modeling_pi05 import PI05Pytorch
from lerobot.policies.pi_gemma import PaliGemmaForConditionalGenerationWithPiGemma, PiGemmaForCausalLM
from torch import Tensor, nn

from policies.lerobot_adapter import IndicatorSlot, LeRobotFlowAdapter
from policies.lerobot_preprocess import FlowInputs
from policies.pi0.config import PI0AdapterConfig, PI05AdapterConfig
from vla.checkpoint import Stats
from vla.policy import POLICIES

TOKENIZER_DIR = "tokenizer"  # the tokenizer's files, copied into each checkpoint
STATE_BINS = 256  # pi0.5's state discretisation


class SizedPaliGemmaWithExpert(PaliGemmaWithExpertModel):
    """LeRobot's ``PaliGemmaWithExpertModel`` (same modules, same parameter names, same forward) built from
    explicit sizes instead of variant names, a fixed vocabulary and a fixed SigLIP tower."""

    def __init__(self, cfg: PI0AdapterConfig, use_adarms: tuple[bool, bool]) -> None:
        from transformers.models.auto import CONFIG_MAPPING

        nn.Module.__init__(self)
        self.freeze_vision_encoder = cfg.freeze_vision_encoder
        self.train_expert_only = cfg.train_expert_only
        vlm, expert, vision = cfg.vlm_size(), cfg.expert_size(), cfg.vision
        hf = CONFIG_MAPPING["paligemma"]()
        hf._vocab_size = cfg.vocab_size
        hf.image_token_index = cfg.vocab_size
        text = hf.text_config
        text.hidden_size, text.intermediate_size = vlm.width, vlm.mlp_dim
        text.num_attention_heads, text.num_key_value_heads = vlm.num_heads, vlm.num_kv_heads
        text.head_dim, text.num_hidden_layers = vlm.head_dim, vlm.depth
        text.hidden_activation, text.dtype, text.vocab_size = "gelu_pytorch_tanh", "float32", cfg.vocab_size
        text.use_adarms, text.adarms_cond_dim = use_adarms[0], vlm.width if use_adarms[0] else None
        v = hf.vision_config
        v.image_size, v.patch_size = cfg.image_size[0], vision.patch_size
        v.hidden_size, v.intermediate_size = vision.hidden_size, vision.intermediate_size
        v.num_hidden_layers, v.num_attention_heads = vision.num_hidden_layers, vision.num_attention_heads
        v.projection_dim, v.projector_hidden_act, v.dtype = vlm.width, "gelu_fast", "float32"
        expert_hf = CONFIG_MAPPING["gemma"](
            head_dim=expert.head_dim,
            hidden_size=expert.width,
            intermediate_size=expert.mlp_dim,
            num_attention_heads=expert.num_heads,
            num_hidden_layers=expert.depth,
            num_key_value_heads=expert.num_kv_heads,
            vocab_size=cfg.vocab_size,
            hidden_activation="gelu_pytorch_tanh",
            dtype="float32",
            use_adarms=use_adarms[1],
            adarms_cond_dim=expert.width if use_adarms[1] else None,
        )
        self.paligemma = PaliGemmaForConditionalGenerationWithPiGemma(config=hf)
        self.gemma_expert = PiGemmaForCausalLM(config=expert_hf)
        self.gemma_expert.model.embed_tokens = None
        self.to_bfloat16_for_selected_params(cfg.dtype)
        self._set_requires_grad()


def _init_pi_network(
    net: Any, cfg: PI0AdapterConfig, lerobot_config: Any, use_adarms: tuple[bool, bool]
) -> int:
    """What the PI0Pytorch and PI05Pytorch constructors share, at cfg's sizes; returns the expert width."""
    nn.Module.__init__(net)
    net.config = lerobot_config
    net.rtc_processor = None
    net.gradient_checkpointing_enabled = False
    net.paligemma_with_expert = SizedPaliGemmaWithExpert(cfg, use_adarms=use_adarms)
    w = cfg.expert_size().width
    net.action_in_proj = nn.Linear(cfg.max_action_dim, w)
    net.action_out_proj = nn.Linear(w, cfg.max_action_dim)
    return w


class IndicatorPI0(IndicatorSlot, PI0Pytorch):
    """``PI0Pytorch`` at any size, plus the advantage indicator on its action tokens."""

    def __init__(self, cfg: PI0AdapterConfig) -> None:
        w = _init_pi_network(self, cfg, PI0Config(**cfg.lerobot_kwargs()), use_adarms=(False, False))
        self.state_proj = nn.Linear(cfg.max_state_dim, w)
        self.action_time_mlp_in = nn.Linear(2 * w, w)
        self.action_time_mlp_out = nn.Linear(w, w)
        self.init_indicator(w)

    def embed_suffix(self, state: Tensor, noisy_actions: Tensor, timestep: Tensor) -> tuple[Tensor, ...]:
        embs, pad, att, adarms = super().embed_suffix(state, noisy_actions, timestep)  # [state, H actions]
        return self.with_indicator(embs, self.config.chunk_size), pad, att, adarms


class IndicatorPI05(IndicatorSlot, PI05Pytorch):
    """``PI05Pytorch`` at any size, plus the advantage indicator on its action tokens."""

    def __init__(self, cfg: PI0AdapterConfig) -> None:
        w = _init_pi_network(self, cfg, PI05Config(**cfg.lerobot_kwargs()), use_adarms=(False, True))
        self.time_mlp_in = nn.Linear(w, w)
        self.time_mlp_out = nn.Linear(w, w)
        self.init_indicator(w)

    def embed_suffix(self, noisy_actions: Tensor, timestep: Tensor) -> tuple[Tensor, ...]:
        embs, pad, att, adarms = super().embed_suffix(noisy_actions, timestep)  # [H actions]
        return self.with_indicator(embs, self.config.chunk_size), pad, att, adarms


@POLICIES.register("pi0")
class PI0Adapter(LeRobotFlowAdapter):
    """pi0 as a chunking policy (see :class:`LeRobotFlowAdapter` for the loss, the sampler, CFG and RTC)."""

    config_class: type[PI0AdapterConfig] = PI0AdapterConfig
    asset_dir = TOKENIZER_DIR
    asset_field = "tokenizer_path"
    lerobot_types = ("pi0",)
    network: type[nn.Module] = IndicatorPI0
    config: PI0AdapterConfig

    def __init__(self, config: PI0AdapterConfig, stats: Stats | None = None) -> None:
        from transformers import AutoTokenizer

        folder = Path(config.tokenizer_path)
        if not folder.is_dir() or not any(folder.glob("tokenizer*")):
            raise FileNotFoundError(
                f"tokenizer_path={config.tokenizer_path!r} is not a local tokenizer folder "
                "(nothing is downloaded at run time)"
            )
        super().__init__(config, stats, self.network(config), AutoTokenizer.from_pretrained(str(folder)))

    # ---- LeRobot checkpoints -----------------------------------------------------------------------
    def _fix_lerobot_keys(self, state: dict[str, Tensor]) -> dict[str, Tensor]:
        """LeRobot's ``_fix_pytorch_state_dict_keys`` (openpi layouts): ``time_mlp_*`` ->
        ``action_time_mlp_*`` for pi0, plain norm weights dropped where the expert uses adaRMS, a lone
        ``lm_head`` also fills the (tied) token embedding."""
        adarms = getattr(self.model.paligemma_with_expert.gemma_expert.config, "use_adarms", False)
        norm = re.compile(
            r"(model\.)?paligemma_with_expert\.gemma_expert\.model\."
            r"(layers\.\d+\.(input_layernorm|post_attention_layernorm)|norm)\.weight$"
        )
        out: dict[str, Tensor] = {}
        for key, value in state.items():
            if adarms and norm.match(key):
                continue
            new = key
            if not adarms and re.match(r"(model\.)?time_mlp_(in|out)\.", key):
                new = key.replace("time_mlp_", "action_time_mlp_")
            if key.removeprefix("model.") == "paligemma_with_expert.paligemma.lm_head.weight":
                out["model.paligemma_with_expert.paligemma.model.language_model.embed_tokens.weight"] = value
            out[new] = value
        return out

    # ---- hooks -------------------------------------------------------------------------------------
    def _image(self, img: Tensor) -> Tensor:
        size = self.config.image_size
        hwc = img.permute(0, 2, 3, 1)  # openpi resizes channels-last
        if tuple(hwc.shape[1:3]) != tuple(size):
            hwc = resize_with_pad_torch(hwc, size[0], size[1])
        return (hwc * 2.0 - 1.0).permute(0, 3, 1, 2)

    def _prompts(self, tasks: Sequence[str], state: Tensor) -> list[str]:
        return [t if t.endswith("\n") else f"{t}\n" for t in tasks]  # LeRobot's Pi0NewLineProcessor

    def _flow_losses(self, x: FlowInputs, actions: Tensor, eps: Tensor, t: Tensor) -> Tensor:
        return self.model(x.images, x.img_masks, x.tokens, x.token_mask, x.state, actions, eps, t)

    def _prefix(self, x: FlowInputs) -> tuple[Tensor, Any, Tensor]:
        """As LeRobot's ``sample_actions``: the prefix through PaliGemma once, eager attention, KV cache."""
        pwe = self.model.paligemma_with_expert
        embs, pad, att = self.model.embed_prefix(x.images, x.img_masks, x.tokens, x.token_mask)
        pwe.paligemma.model.language_model.config._attn_implementation = "eager"
        out, cache = pwe.forward(
            attention_mask=prepare_attention_masks_4d(make_att_2d_masks(pad, att)),
            position_ids=torch.cumsum(pad, dim=1) - 1,
            past_key_values=None,
            inputs_embeds=[embs, None],
            use_cache=True,
        )
        return pad, cache, out[0]

    def _denoise(self, x: FlowInputs, prefix_pad: Tensor, cache: Any, x_t: Tensor, t: Tensor) -> Tensor:
        # denoise_step clones the cache before the expert appends to it, so it is shared safely.
        return self.model.denoise_step(
            state=x.state, prefix_pad_masks=prefix_pad, past_key_values=cache, x_t=x_t, timestep=t
        )


@POLICIES.register("pi05")
class PI05Adapter(PI0Adapter):
    """pi0.5: state in the prompt, adaRMS time conditioning, quantile normalisation."""

    config_class = PI05AdapterConfig
    lerobot_types = ("pi05",)
    network = IndicatorPI05

    def _prompts(self, tasks: Sequence[str], state: Tensor) -> list[str]:
        """LeRobot's ``Pi05PrepareStateTokenizerProcessorStep``: the normalised state, 256 bins of [-1, 1]."""
        bins = np.linspace(-1, 1, STATE_BINS + 1)[:-1]
        digits = np.digitize(state.detach().cpu().numpy(), bins=bins) - 1
        prompts = []
        for task, row in zip(tasks, digits, strict=True):
            text = task.strip().replace("_", " ").replace("\n", " ")
            prompts.append(f"Task: {text}, State: {' '.join(map(str, row))};\nAction: ")
        return prompts

    def _flow_losses(self, x: FlowInputs, actions: Tensor, eps: Tensor, t: Tensor) -> Tensor:
        return self.model(x.images, x.img_masks, x.tokens, x.token_mask, actions, eps, t)

    def _denoise(self, x: FlowInputs, prefix_pad: Tensor, cache: Any, x_t: Tensor, t: Tensor) -> Tensor:
        return self.model.denoise_step(
            prefix_pad_masks=prefix_pad, past_key_values=cache, x_t=x_t, timestep=t
        )
