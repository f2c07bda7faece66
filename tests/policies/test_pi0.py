"""pi0 / pi0.5 adapters, what only they do: LeRobot's config defaults and the released sizes, the prompt
(pi0.5 writes the state into it), openpi's older weight names, and the config checks. The checks every adapter
shares are in ``test_adapters.py``.

Everything runs offline on tiny networks built by ``policies/pi0/tiny.py`` (LeRobot's PI0Pytorch /
PI05Pytorch modules at toy sizes, a tokenizer trained on a few strings).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pathlib import Path

import pytest
import torch
from tiny_smolvlm import make_batch

from policies.pi0 import PI0Adapter, PI0AdapterConfig, PI05AdapterConfig
from policies.pi0.tiny import (
    TINY_EXPERT,
    TINY_VISION,
    TINY_VLM,
    build_tiny_paligemma_tokenizer,
    make_tiny_pi0,
)

torch.set_num_threads(1)

H, A, S = 8, 4, 6
VARIANTS = ("pi0", "pi05")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pi0")
    build_tiny_paligemma_tokenizer(root / "tiny_paligemma_tokenizer")  # built once per module
    return root


@pytest.fixture(scope="module", params=VARIANTS)
def policy(request: pytest.FixtureRequest, root: Path) -> PI0Adapter:  # read only: no test changes it
    torch.manual_seed(0)
    return make_tiny_pi0(root, variant=request.param, chunk_size=H, action_dim=A, state_dim=S).eval()


@pytest.mark.parametrize("cfg_cls", [PI0AdapterConfig, PI05AdapterConfig])
def test_lerobot_defaults_and_released_sizes(cfg_cls: type[PI0AdapterConfig]) -> None:
    defaults = cfg_cls(tokenizer_path="x")
    expected = {"pi0": ("mean_std", 48), "pi05": ("quantiles", 200)}[defaults.type]
    assert (defaults.action_norm, defaults.tokenizer_max_length) == expected  # LeRobot's defaults
    assert defaults.vlm_size().width == 2048 and defaults.expert_size().width == 1024  # released sizes


def test_prompt_and_state(policy: PI0Adapter) -> None:
    """pi0: the state is a suffix token; pi0.5: it is written into the prompt as 256 bins."""
    obs = {k: v for k, v in make_batch(2, chunk_size=H, action_dim=A, state_dim=S).items() if k != "action"}
    text = policy.tokenizer.decode(policy._inputs(obs).tokens[0], skip_special_tokens=True)
    moved = dict(obs, **{"observation.state": obs["observation.state"] + 0.7})
    if policy.config.type == "pi05":
        assert text.startswith(f"Task: {obs['task'][0]}, State: ") and text.endswith(";\nAction: ")
        assert not torch.equal(policy._inputs(obs).tokens, policy._inputs(moved).tokens)
    else:
        assert text == f"{obs['task'][0]}\n"
        assert torch.equal(policy._inputs(obs).tokens, policy._inputs(moved).tokens)
    n = torch.randn(2, H, A, generator=torch.Generator().manual_seed(1))
    assert not torch.allclose(policy.sample_chunk(obs, noise=n), policy.sample_chunk(moved, noise=n))


def test_openpi_weight_names(policy: PI0Adapter) -> None:
    """LeRobot's ``_fix_pytorch_state_dict_keys``: pi0's ``time_mlp_*`` is ``action_time_mlp_*``, pi0.5's
    adaRMS expert has no plain norm weights, a lone ``lm_head`` also fills the tied token embedding."""
    t = torch.zeros(1)
    expert = "paligemma_with_expert.gemma_expert.model."
    norms = {f"{expert}layers.0.input_layernorm.weight", f"{expert}norm.weight"}
    state = {
        "time_mlp_in.weight": t,
        "paligemma_with_expert.paligemma.lm_head.weight": t,
        **dict.fromkeys(norms, t),
    }
    fixed = set(policy._fix_lerobot_keys(state))
    embed = "model.paligemma_with_expert.paligemma.model.language_model.embed_tokens.weight"
    assert embed in fixed and "paligemma_with_expert.paligemma.lm_head.weight" in fixed
    if policy.config.type == "pi0":
        assert "action_time_mlp_in.weight" in fixed and norms <= fixed
    else:
        assert "time_mlp_in.weight" in fixed and not norms & fixed


def test_config_is_checked(root: Path) -> None:
    tok = str(root / "tiny_paligemma_tokenizer")
    sizes = dict(vlm=TINY_VLM, expert=TINY_EXPERT, vision=TINY_VISION)
    for bad in (
        dict(tokenizer_path=""),
        dict(image_size=[32, 48]),  # PaliGemma: square
        dict(image_size=[36, 36]),  # not a multiple of the patch
        dict(expert={**TINY_EXPERT.__dict__, "head_dim": 16}),  # joint attention: shared head_dim
        dict(paligemma_variant="gemma_7b", vlm=None),
        dict(dtype="float16"),
        dict(type="pi05"),
    ):
        with pytest.raises(ValueError):
            PI0AdapterConfig(**{"tokenizer_path": tok, **sizes, "image_size": [32, 32], **bad})
    with pytest.raises(FileNotFoundError, match="local tokenizer folder"):
        PI0Adapter(PI0AdapterConfig(tokenizer_path=str(root / "nowhere"), **sizes, image_size=[32, 32]))
