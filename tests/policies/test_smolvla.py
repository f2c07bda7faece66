"""SmolVLA adapter, what only SmolVLA does: a frozen VLM, causal action tokens, parity with LeRobot's own
``SmolVLAPolicy`` and its processors, and its config checks. The checks every adapter shares are in
``test_adapters.py``.

Everything runs offline on a tiny SmolVLM backbone built by the test (``tiny_smolvlm.py``).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pathlib import Path

import pytest
import torch
from tiny_smolvlm import build_tiny_smolvlm, make_batch, make_tiny_smolvla, save_lerobot_smolvla

from policies.smolvla import SmolVLAAdapter, SmolVLAAdapterConfig

torch.set_num_threads(1)

H, A, S = 8, 4, 6


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("smolvla")
    build_tiny_smolvlm(root / "tiny_smolvlm")  # the tiny backbone, built once per module
    return root


@pytest.fixture(scope="module")
def policy(root: Path) -> SmolVLAAdapter:  # read only: no test changes it
    torch.manual_seed(0)
    return make_tiny_smolvla(root, chunk_size=H, action_dim=A, state_dim=S).eval()


def test_trains_the_expert_not_the_vlm(policy: SmolVLAAdapter) -> None:
    trainable = [n for n, p in policy.named_parameters() if p.requires_grad]
    assert any(n.startswith("model.vlm_with_expert.lm_expert.") for n in trainable)
    assert not any(n.startswith("model.vlm_with_expert.vlm.") for n in trainable)


def test_padded_steps_do_not_reach_the_loss(policy: SmolVLAAdapter) -> None:
    """SmolVLA's action tokens attend causally, so a padded tail changes no valid step's error (pi0's
    attend to each other)."""
    b = make_batch(2, chunk_size=H, action_dim=A, state_dim=S)
    n = torch.randn(2, H, A, generator=torch.Generator().manual_seed(1))
    tau = torch.tensor([0.3, 0.8])
    padded = dict(b, action_is_pad=torch.arange(H).expand(2, H) >= 3)  # only steps 0..2 count
    changed = dict(padded, action=b["action"].clone())
    changed["action"][:, 3:] += 10.0
    loss = policy.loss(padded, noise=n, time=tau)
    assert torch.allclose(loss, policy.loss(changed, noise=n, time=tau))
    assert not torch.allclose(
        loss, policy.loss(dict(changed, action_is_pad=b["action_is_pad"]), noise=n, time=tau)
    )


def test_from_lerobot_pretrained_matches_lerobot(root: Path, tmp_path: Path) -> None:
    """LeRobot's own policy and processors on a folder it wrote (state/action padded to max dims): our chunk
    and per-sample loss are theirs."""
    theirs, pre, post = save_lerobot_smolvla(tmp_path / "lerobot", root / "tiny_smolvlm")
    ours = SmolVLAAdapter.from_lerobot_pretrained(tmp_path / "lerobot")
    assert ours.config.cameras == ["front"] and (ours.action_dim, ours.config.max_action_dim) == (A, 6)
    b = make_batch(2, chunk_size=H, action_dim=A, state_dim=S, cameras=("front",), seed=4)
    b["action_is_pad"][0, 5:] = True
    n = torch.randn(2, H, 6, generator=torch.Generator().manual_seed(2))  # LeRobot's [B, H, max_action_dim]
    obs = {k: v for k, v in b.items() if k not in ("action", "action_is_pad")}
    expected = post(theirs.predict_action_chunk(pre(dict(obs)), noise=n))
    assert torch.allclose(ours.sample_chunk(obs, noise=n), expected, atol=1e-5)
    t = torch.tensor([0.2, 0.7])  # LeRobot's flow time (1 = noise) is 1 - ours
    their_loss, _ = theirs.forward(pre(dict(b)), noise=n, time=t, reduction="none")
    assert torch.allclose(ours.loss(b, noise=n, time=1.0 - t), their_loss, atol=1e-5)


def test_config_is_checked(root: Path) -> None:
    folder = str(root / "tiny_smolvlm")
    for bad in (
        dict(action_dim=40),
        dict(n_action_steps=60),
        dict(cameras=[]),
        dict(cond_dropout=1.5),
        dict(action_norm="unit"),
        dict(vlm_model_name=""),
    ):
        with pytest.raises(ValueError):
            SmolVLAAdapterConfig(**{"vlm_model_name": folder, **bad})
    with pytest.raises(FileNotFoundError, match="local SmolVLM folder"):
        SmolVLAAdapter(SmolVLAAdapterConfig(vlm_model_name=str(root / "nowhere")))
