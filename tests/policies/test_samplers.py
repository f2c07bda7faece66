"""The one integrator (vla.flow.integrate): both time conventions give the same chunk, diffusers' Euler is
ours, Heun is more accurate per step, every policy samples through it, and RTC matches LeRobot's."""

import math

import pytest
import torch

from policies.flow_matching import FlowMatchingPolicy, debug_config
from vla.batch import IMAGE_PREFIX, STATE, TASK
from vla.flow import DATA_AT_ONE, NOISE_AT_ONE, RTCGuide, integrate, rtc_prefix_weights

TARGET = torch.linspace(-1.0, 1.0, 24).reshape(1, 4, 6)


def field(x: torch.Tensor, tau: float) -> torch.Tensor:
    """A nonlinear flow towards TARGET (ours: tau 0 noise, 1 data): Euler is not exact on it."""
    return (TARGET - x) * (1.0 + math.sin(3.0 * tau)) + 0.3 * torch.tanh(x) * tau


def noise() -> torch.Tensor:
    return torch.randn(1, 4, 6, generator=torch.Generator().manual_seed(0))


def exact() -> torch.Tensor:  # a fine-step reference solution
    return integrate(field, noise(), 2000)


def test_the_two_time_conventions_give_the_same_chunk():
    ours = integrate(field, noise(), 7, convention=DATA_AT_ONE)
    lerobots = integrate(lambda x, t: -field(x, 1.0 - t), noise(), 7, convention=NOISE_AT_ONE)
    torch.testing.assert_close(ours, lerobots, rtol=0, atol=1e-6)


@pytest.mark.parametrize("k", [1, 4, 10])
def test_diffusers_euler_is_our_euler(k):
    torch.testing.assert_close(
        integrate(field, noise(), k, integrator="diffusers_euler"),
        integrate(field, noise(), k),
        rtol=0,
        atol=1e-5,
    )


def test_heun_is_closer_to_the_flow_than_euler_at_the_same_steps():
    ref = exact()
    for k in (4, 10):
        euler = (integrate(field, noise(), k) - ref).abs().max()
        heun = (integrate(field, noise(), k, integrator="diffusers_heun") - ref).abs().max()
        assert heun < 0.5 * euler, (k, float(heun), float(euler))
    e4, e10 = ((integrate(field, noise(), k) - ref).abs().max() for k in (4, 10))
    assert e10 < e4  # Euler converges too


def test_rtc_guidance_pulls_the_committed_prefix_for_every_integrator():
    prefix = torch.full((1, 4, 6), 0.5)
    guide = RTCGuide(prefix, rtc_prefix_weights(4, 2, 3, "exp"), beta_max=5.0)
    for integrator in ("euler", "diffusers_euler", "diffusers_heun"):
        free = integrate(field, noise(), 10, integrator=integrator)
        held = integrate(field, noise(), 10, integrator=integrator, rtc=guide)
        assert (held[:, :2] - 0.5).abs().max() < 0.5 * (free[:, :2] - 0.5).abs().max(), integrator


def test_bad_integrator_and_convention_are_named():
    with pytest.raises(ValueError, match="integrator='rk4'"):
        integrate(field, noise(), 3, integrator="rk4")
    with pytest.raises(ValueError, match="time convention 'sideways'"):
        integrate(field, noise(), 3, convention="sideways")
    with pytest.raises(ValueError, match="integrator='rk4'"):
        debug_config(integrator="rk4")


def test_our_policy_samples_the_same_chunk_through_diffusers_euler():
    torch.manual_seed(0)
    policy = FlowMatchingPolicy(debug_config()).eval()
    other = FlowMatchingPolicy(debug_config(integrator="diffusers_euler")).eval()
    other.load_state_dict(policy.state_dict())
    b = 2
    obs = {IMAGE_PREFIX + c: torch.rand(b, 3, 32, 32) for c in ("agentview", "wrist")}
    obs |= {STATE: torch.randn(b, 8), TASK: ["reach the red cube"] * b}
    eps = torch.randn(b, 8, 8, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(
        other.sample_chunk(obs, noise=eps), policy.sample_chunk(obs, noise=eps), rtol=0, atol=1e-5
    )
