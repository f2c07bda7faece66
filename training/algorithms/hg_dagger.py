"""HG-DAgger as a post-training algorithm: behaviour cloning on the operator's takeovers and the policy's
successful episodes (Kelly et al., "HG-DAgger: Interactive Imitation Learning with Human Experts",
ICRA 2019), the iterated intervention baseline of the closed loop (``loop.rounds``)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from training.algorithms.base import ALGORITHMS, GradientAlgorithm, require_labels
from vla.batch import ACTION, ACTION_IS_PAD, Batch

KEPT = "hg_dagger_kept"  # labels column [N, H]: step j of frame i's chunk is a kept frame


def kept_frames(data: Any) -> Tensor:  # [N] bool
    """The frames HG-DAgger trains on:

    - every human frame (``is_intervention``) of a policy episode, whatever its outcome: HG-DAgger's
      aggregated data is the expert's actions at the states the learner reached [paper];
    - every frame of a successful policy episode without a takeover [the common variant, not in Kelly et
      al.: the learner's successful autonomous rollouts are kept, as filtered BC keeps them];
    - every frame of a successful demonstration (``source`` not ``policy``) [ours: the paper's D starts from
      the expert's demonstrations, which it assumes correct; a demo recorded as failed is not expert data,
      so the demos are filtered as filtered BC filters them].

    Dropped: the policy's own frames of an episode with a takeover (before, between and after takeovers,
    whatever the outcome), failed autonomous episodes and failed demonstrations.
    """
    kept = torch.zeros(len(data), dtype=torch.bool)
    for e, meta in enumerate(data.episodes):
        sl = data.episode_frames(e)
        human = data.is_intervention[sl]
        if meta.source == "policy":
            kept[sl] = human | bool(meta.success and not human.any())
        else:
            kept[sl] = bool(meta.success)
    return kept


def kept_steps(data: Any, kept: Tensor) -> Tensor:  # [N, H] bool
    """Whether each step of each frame's chunk (frame i + j, ``ChunkDataset.get``'s steps) is a kept frame:
    a chunk starting at a takeover's last frames runs into the policy's frames after the handback."""
    steps = torch.arange(len(data))[:, None] + torch.arange(data.H)[None]  # [N, H]
    return kept[torch.minimum(steps, data.episode_end[:, None] - 1)]  # past the end: padding anyway


@ALGORITHMS.register("hg_dagger")
class HGDAgger(GradientAlgorithm):
    """Behaviour cloning (the flow-matching loss of ``sft``) on the kept frames (:func:`kept_frames`) only:

        L(theta) = E_{(o, A) ~ D_kept, tau, eps} sum_j m_j e_j / sum_j m_j,
        e_j = || v_theta(tau A + (1 - tau) eps, tau, o)_j - (A - eps)_j ||^2,

    with D_kept drawn uniformly over the kept frames and m_j = 1 where chunk step j is a kept frame and not
    padding (the policy's actions after a handback are treated as padding: :meth:`loss`). Kelly et al.
    aggregate the expert's interventions over rounds; here each round trains on the demos and every round's
    rollouts so far (``loop.rounds``), so the aggregation is the data's.
    """

    @classmethod
    def label_needs(cls, config: dict[str, Any]) -> tuple[bool, bool]:
        return True, True  # successful episodes and the operator's takeovers

    def prepare(self, data: Any, out: Any, progress: bool = True) -> dict[str, float]:
        require_labels(data, "hg_dagger", success=True, interventions=True)
        kept = kept_frames(data)
        if not kept.any():
            raise ValueError(
                f"hg_dagger: no kept frames in {list(data.cfg.roots)}: it needs human takeovers "
                "(complementary_info.is_intervention), successful autonomous episodes or successful demos"
            )
        data.sampling_weights = kept.float()
        data.labels[KEPT] = kept_steps(data, kept)
        takeover = kept & data.is_intervention
        return {"kept": float(kept.sum()), "takeover": float(takeover.sum()), "dropped": float((~kept).sum())}

    def loss(self, batch: Batch) -> Tensor:  # [B]
        """SFT's per-sample loss over the chunk steps that are kept frames. The others are treated as padding
        is: out of the loss, and their actions replaced by the last kept step's (as past an episode's end),
        so the policy's own actions after a handback reach neither the target nor the noised input."""
        kept = batch[KEPT] & ~batch[ACTION_IS_PAD]  # [B, H]; step 0 is always kept (the frame is drawn)
        steps = torch.arange(kept.shape[1], device=kept.device)
        last = torch.where(kept, steps, 0).cummax(-1).values  # [B, H] the latest kept step so far
        actions = batch[ACTION].gather(1, last[..., None].expand_as(batch[ACTION]))  # [B, H, A]
        return self.policy.loss({**batch, ACTION: actions, ACTION_IS_PAD: ~kept}, generator=self.generator)

    def update(self, batch: Batch) -> dict[str, float]:
        return self.step(self.loss(batch).mean())
