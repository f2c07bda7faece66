"""Flow-matching math shared by every flow policy: the time draw, the one integrator, real-time chunking.

Policies supply only their velocity field; :func:`integrate` turns it into a chunk, whatever the policy's
time convention (:data:`DATA_AT_ONE`, ours: t = 0 noise, t = 1 data; :data:`NOISE_AT_ONE`, LeRobot's and
openpi's: t = 1 noise, t = 0 data), with Euler steps of our own or diffusers' flow-matching schedulers
(:data:`INTEGRATORS`), and with real-time chunking's guidance (:class:`RTCGuide`) for any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from vla.sharding import draw


def sample_beta(n: int, a: float, b: float, generator: torch.Generator | None = None) -> Tensor:
    """s ~ Beta(a, b), [n]. With a generator (reproducible), Beta(a, 1) and Beta(1, b) are drawn by
    inverting their CDFs (s = u^(1/a), s = 1 - u^(1/b)), per row of the global batch
    (:func:`vla.sharding.draw`); other shapes use torch's global RNG."""
    if generator is not None and b == 1.0:
        return draw(torch.rand, (n,), generator) ** (1.0 / a)
    if generator is not None and a == 1.0:
        return 1.0 - draw(torch.rand, (n,), generator) ** (1.0 / b)
    return torch.distributions.Beta(a, b).sample((n,))


# ---- real-time chunking (RTC): guided inpainting of the committed prefix --------------------------------
RTC_SCHEDULES = ("exp", "linear", "ones", "zeros")


def rtc_prefix_weights(chunk_size: int, delay: int, horizon: int, schedule: str = "exp") -> Tensor:
    """W [H]: 1 over the first ``delay`` actions (executed while this chunk is computed), decaying to 0
    at ``horizon`` (the end of the previous chunk's committed actions), 0 after it.

    ``exp`` (Black et al. 2025): c_i = (horizon - i) / (horizon - delay + 1), W_i = c_i (e^c_i - 1)/(e - 1);
    ``linear``: W_i = c_i; ``ones``: 1 up to ``horizon``; ``zeros``: 1 over the first ``delay`` only
    (LeRobot's four schedules, the same weights as its ``RTCProcessor.get_prefix_weights``).
    """
    if schedule not in RTC_SCHEDULES:
        raise ValueError(f"rtc schedule={schedule!r}: use one of {', '.join(RTC_SCHEDULES)}")
    horizon = max(0, min(horizon, chunk_size))
    delay = max(0, min(delay, horizon))
    i = torch.arange(chunk_size, dtype=torch.float32)
    c = ((horizon - i) / max(1, horizon - delay + 1)).clamp(0.0, 1.0)
    w = {
        "exp": c * (torch.exp(c) - 1) / (torch.e - 1),
        "linear": c,
        "ones": torch.ones_like(c),
        "zeros": torch.zeros_like(c),
    }[schedule]
    w = torch.where(i < delay, torch.ones_like(w), w)
    return torch.where(i >= horizon, torch.zeros_like(w), w)


def rtc_guided_velocity(
    velocity: Callable[[Tensor], Tensor],
    x: Tensor,
    tau: float,
    target: Tensor,
    weights: Tensor,
    beta_max: float,
) -> Tensor:
    """One RTC denoising step (t = 1 is data):

        x1_hat = x + (1 - t) v(x),  e = W * (Y - x1_hat),  g = e^T d x1_hat / d x  (a VJP),
        v <- v + min(beta_max, (1 - t) / (t r2)) g,  r2 = (1 - t)^2 / (t^2 + (1 - t)^2).

    x, target [B, H, A] (target = the previous chunk's committed actions, zero-padded); weights [H].

    The VJP goes through the network, as in the paper. LeRobot's ``RTCProcessor`` evaluates v before it
    lets x require gradients, so its correction is e itself (d x1_hat / d x taken as the identity); the
    adapters' RTC, which went through it, now takes the full step.
    """
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        v = velocity(x)
        x1_hat = x + (1.0 - tau) * v
        err = weights.to(x.device)[None, :, None] * (target - x1_hat)
        (g,) = torch.autograd.grad(x1_hat, x, grad_outputs=err)
    if tau <= 0.0:
        w = beta_max
    else:
        r2 = (1.0 - tau) ** 2 / (tau**2 + (1.0 - tau) ** 2)
        w = min(beta_max, (1.0 - tau) / (tau * r2)) if r2 > 0 else beta_max
    return (v + w * g).detach()


@dataclass(frozen=True)
class RTCGuide:
    """Real-time chunking's guidance of every integration step (:func:`rtc_guided_velocity`): ``target``
    [B, H, A] the previous chunk's committed actions in the model's action space (zero-padded to H),
    ``weights`` [H] from :func:`rtc_prefix_weights`, ``beta_max`` the guidance clip."""

    target: Tensor
    weights: Tensor
    beta_max: float


# ---- the one integrator ------------------------------------------------------------------------------------
DATA_AT_ONE = "data_at_one"  # ours: x_t = t x_data + (1 - t) noise, integrated from t = 0 to 1
NOISE_AT_ONE = "noise_at_one"  # LeRobot's / openpi's: x_t = t noise + (1 - t) x_data, from t = 1 to 0
CONVENTIONS = (DATA_AT_ONE, NOISE_AT_ONE)
INTEGRATORS = ("euler", "diffusers_euler", "diffusers_heun")
Velocity = Callable[[Tensor, float], Tensor]  # (x [B, H, A], t in the model's own convention) -> v


def integrate(
    velocity: Velocity,
    noise: Tensor,
    num_steps: int,
    *,
    convention: str = DATA_AT_ONE,
    integrator: str = "euler",
    rtc: RTCGuide | None = None,
) -> Tensor:
    """Integrate the flow from ``noise`` to a chunk in ``num_steps`` steps of ``integrator``.

    The velocity is turned into ours once: with tau = 1 - t and v(x, tau) = -v_model(x, 1 - tau) for
    :data:`NOISE_AT_ONE`, so every step below, and RTC, is in one convention (tau: 0 noise, 1 data)::

        euler:            x <- x + v(x, i/K) / K                          i = 0 .. K-1
        diffusers_euler:  FlowMatchEulerDiscreteScheduler on sigmas 1 - i/K (the same steps)
        diffusers_heun:   FlowMatchHeunDiscreteScheduler on the same sigmas (2 evaluations a step, Euler
                          on the last)

    (diffusers' schedulers take the velocity of sigma = 1 - tau, i.e. -v.) With ``rtc`` each evaluation
    is guided towards the committed prefix (:func:`rtc_guided_velocity`).
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"time convention {convention!r}: use one of {', '.join(CONVENTIONS)}")
    if integrator not in INTEGRATORS:
        raise ValueError(f"integrator={integrator!r}: use one of {', '.join(INTEGRATORS)}")
    if num_steps < 1:
        raise ValueError(f"num_steps={num_steps} must be >= 1")

    def ours(x: Tensor, tau: float) -> Tensor:
        return velocity(x, tau) if convention == DATA_AT_ONE else -velocity(x, 1.0 - tau)

    def guided(x: Tensor, tau: float) -> Tensor:
        if rtc is None:
            return ours(x, tau)
        return rtc_guided_velocity(lambda xx: ours(xx, tau), x, tau, rtc.target, rtc.weights, rtc.beta_max)

    x = noise
    if integrator == "euler":
        for i in range(num_steps):
            x = x + guided(x, i / num_steps) / num_steps
        return x
    return _diffusers(guided, x, num_steps, integrator)


def _diffusers(velocity: Velocity, x: Tensor, k: int, integrator: str) -> Tensor:
    try:
        from diffusers import FlowMatchEulerDiscreteScheduler, FlowMatchHeunDiscreteScheduler
    except ImportError as exc:  # pragma: no cover - a dependency
        raise ImportError(f"integrator={integrator} needs diffusers (pip install diffusers)") from exc
    import numpy as np

    cls: Any = (
        FlowMatchEulerDiscreteScheduler if integrator == "diffusers_euler" else FlowMatchHeunDiscreteScheduler
    )
    scheduler = cls(num_train_timesteps=1000, shift=1.0)
    sigmas = (1.0 - np.arange(k) / k).astype(np.float32)
    if integrator == "diffusers_euler":
        scheduler.set_timesteps(sigmas=sigmas, device=x.device)
    else:  # Heun's set_timesteps takes no sigmas: the same schedule through its timesteps
        scheduler.set_timesteps(num_inference_steps=k, device=x.device)
        scheduler.timesteps, scheduler.sigmas = _heun_schedule(sigmas, x.device)
    for t in scheduler.timesteps:
        sigma = float(t) / scheduler.config.num_train_timesteps
        model_output = -velocity(x, 1.0 - sigma)  # d x / d sigma
        x = scheduler.step(model_output, t, x, return_dict=False)[0]
    return x


def _heun_schedule(sigmas: Any, device: Any) -> tuple[Tensor, Tensor]:
    """Heun's interleaved timesteps and sigmas for ``sigmas`` (then 0), as its ``set_timesteps`` has them."""
    import numpy as np

    s = torch.from_numpy(np.append(sigmas, 0.0).astype(np.float32)).to(device)
    timesteps = s[:-1] * 1000
    timesteps = torch.cat([timesteps[:1], timesteps[1:].repeat_interleave(2)])
    s = torch.cat([s[:1], s[1:-1].repeat_interleave(2), s[-1:]])
    return timesteps, s
