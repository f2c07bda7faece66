"""Real-time chunking: the frozen prefix is (nearly) kept, the rest is blended into the policy's own chunk."""

import sys
from pathlib import Path

import pytest
import torch

from policies.flow_matching import FlowMatchingPolicy, debug_config
from vla.flow import rtc_prefix_weights

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_flow_matching import make_batch, obs_of


def test_prefix_weights_schedule():
    w = rtc_prefix_weights(10, delay=3, horizon=7, schedule="linear")
    assert torch.equal(w[:3], torch.ones(3)) and torch.equal(w[7:], torch.zeros(3))
    assert bool((w[3:7].diff() < 0).all()) and 0 < w[6] < w[3] <= 1
    we = rtc_prefix_weights(10, 3, 7, "exp")
    assert bool((we[3:7] <= w[3:7] + 1e-6).all())  # exp decays faster than linear


def test_rtc_keeps_the_frozen_prefix_and_blends_the_rest():
    torch.manual_seed(0)
    cfg = debug_config(chunk_size=12, num_steps=10)
    policy = FlowMatchingPolicy(cfg).eval()
    obs = obs_of(make_batch(cfg, b=2))
    noise = torch.randn(2, 12, cfg.action_dim, generator=torch.Generator().manual_seed(1))
    free = policy.sample_chunk(obs, noise=noise)
    prev = free[:, :8] + 0.8  # a committed prefix the policy would not produce on its own
    guided = policy.sample_chunk(obs, noise=noise, prefix=prev, prefix_delay=4)
    err_frozen = (guided[:, :4] - prev[:, :4]).abs().mean()
    err_free = (free[:, :4] - prev[:, :4]).abs().mean()
    assert err_frozen < 0.1 * err_free  # the first `delay` actions follow the committed ones
    # beyond the committed prefix the chunk is the policy's own again (not pulled onto the prefix offset)
    assert (guided[:, 10:] - free[:, 10:]).abs().mean() < (guided[:, :4] - free[:, :4]).abs().mean()
    # in between it blends: closer to the prefix than the free chunk, but not onto it
    mid_to_prev = (guided[:, 5:7] - prev[:, 5:7]).abs().mean()
    assert err_frozen < mid_to_prev < (free[:, 5:7] - prev[:, 5:7]).abs().mean()


@pytest.mark.parametrize("schedule", ["zeros", "ones", "linear", "exp"])
@pytest.mark.parametrize(("delay", "horizon"), [(0, 5), (2, 6), (3, 3), (4, 10)])
def test_prefix_weights_are_lerobots(schedule, delay, horizon):
    """The adapters' RTC runs through vla.flow now: its prefix weights are LeRobot's RTCProcessor's."""
    from lerobot.configs import RTCAttentionSchedule
    from lerobot.policies.rtc.configuration_rtc import RTCConfig
    from lerobot.policies.rtc.modeling_rtc import RTCProcessor

    rtc = RTCProcessor(RTCConfig(prefix_attention_schedule=RTCAttentionSchedule[schedule.upper()]))
    theirs = rtc.get_prefix_weights(delay, horizon, 10)
    torch.testing.assert_close(rtc_prefix_weights(10, delay, horizon, schedule), theirs, rtol=0, atol=1e-6)
