"""A checkpoint deployed on an arm: policy -> :class:`~vla.runtime.runner.PolicyRunner` -> deployment stack.

The one assembly that the simulator's deployment (``sim.deploy``) and the ROS 2 node (``ros2_ws``) share:
load the policy, check it against the robot's profile (action size, cameras), resolve the deployment
values against the checkpoint's defaults (:mod:`vla.runtime.defaults`: execution horizon, conditioning,
guidance, sampler steps), read the checkpoint's upcycling calibration when upcycling is on, and build the
stack of a :class:`DeployConfig`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vla.policy import import_policy_modules, load_policy
from vla.robot import RobotProfile
from vla.runtime.config import DeployConfig
from vla.runtime.defaults import DeploySettings, resolve
from vla.runtime.remote import RemoteSampler
from vla.runtime.runner import PolicyRunner
from vla.runtime.stack import DeploymentStack, build_stack
from vla.runtime.upcycling import UPCYCLING_FILE

log = logging.getLogger(__name__)


@dataclass
class Deployment:
    policy: Any  # None when the policy runs in a vla-serve (deploy.remote)
    runner: PolicyRunner | RemoteSampler
    stack: DeploymentStack
    cameras: list[str]  # the cameras the policy reads
    settings: DeploySettings  # horizon, cond, guidance, num_steps and where each came from

    def warm_up(self, state: np.ndarray, image_size: tuple[int, int]) -> float:
        """One inference on a blank observation, so the first control period does not pay for lazy
        initialisation (measured: the first call of a small policy takes ~0.4 s, later ones ~5 ms);
        returns its seconds."""
        blank = np.zeros((*image_size, 3), dtype=np.uint8)
        obs = {**{c: blank for c in self.cameras}, "state": np.asarray(state, np.float32), "instruction": ""}
        t0 = time.perf_counter()
        self.runner(obs)
        return time.perf_counter() - t0


def policy_cameras(
    own: Sequence[str] | None, available: Sequence[str], explicit: Sequence[str] | None = None
) -> list[str]:
    """The cameras the policy reads: ``explicit``, else its config's (``own``, when it names them), else
    all ``available``. Raises when the policy needs a camera the robot does not have."""
    cameras = list(explicit or own or []) or list(available)
    if not set(cameras) <= set(available):
        raise ValueError(f"the policy reads cameras {cameras}; the robot provides {list(available)}")
    return cameras


def deploy_checkpoint(
    checkpoint: str | Path,
    profile: RobotProfile,
    cfg: DeployConfig,
    *,
    available_cameras: Sequence[str],
    cameras: Sequence[str] | None = None,
    device: str = "cpu",
    cond: int | None = None,
    guidance: float | None = None,
    num_steps: int | None = None,
    imports: Sequence[str] = ("policies",),
    dt: float | None = None,
) -> Deployment:
    """Load ``checkpoint`` and assemble its deployment on ``profile`` (control period ``dt``, default the
    profile's). With ``cfg.remote`` the policy runs in that ``vla-serve`` and ``checkpoint`` need only hold
    its settings (:func:`vla.runtime.remote.served_checkpoint`). ``cfg.horizon`` and ``cond``,
    ``guidance``, ``num_steps``: overrides; None takes the checkpoint's default
    (:func:`vla.runtime.defaults.resolve`; ``Deployment.settings`` says which values were used and where
    each came from, also logged at INFO).

    Raises:
        InputError: The checkpoint's ``deploy.yaml`` is unreadable or does not fit its policy.
        ValueError: The policy's action size or cameras do not fit the robot.
        FileNotFoundError: Upcycling is on and the checkpoint has no calibration.
    """
    settings = resolve(checkpoint, cfg, cond=cond, guidance=guidance, num_steps=num_steps)
    cfg = settings.apply(cfg)
    log.info("%s: %s", checkpoint, settings.describe())
    sampling: dict[str, Any] = {
        "cond": settings.cond,
        "guidance": settings.guidance,
        "num_steps": settings.num_steps,
    }
    beta = cfg.rtc.beta_max if cfg.rtc.enabled else None
    runner: PolicyRunner | RemoteSampler
    if cfg.remote:
        policy = None
        runner = RemoteSampler(cfg.remote, **sampling, rtc_beta_max=beta, timeout_s=cfg.remote_timeout_s)
        own = runner.info.get("cameras")
        runner.cameras = used = policy_cameras(own, available_cameras, cameras)
    else:
        import_policy_modules(imports)
        policy = load_policy(checkpoint, device)
        used = policy_cameras(
            getattr(getattr(policy, "config", None), "cameras", None), available_cameras, cameras
        )
        runner = PolicyRunner(policy, cameras=used, device=device, **sampling, rtc_beta_max=beta)
    if runner.action_dim != profile.action_dim:
        raise ValueError(
            f"{checkpoint}: the policy outputs {runner.action_dim}-d actions; robot {profile.name} takes "
            f"{profile.action_dim} ({', '.join(profile.action_names)})"
        )
    calib_file = Path(checkpoint) / UPCYCLING_FILE
    if cfg.upcycling.enabled and not calib_file.is_file():
        raise FileNotFoundError(f"upcycling.enabled needs {calib_file} (written by vla-train from the demos)")
    calibration = json.loads(calib_file.read_text()) if calib_file.is_file() else None
    stack = build_stack(
        cfg, runner, profile=profile, chunk_size=runner.chunk_size, calibration=calibration, dt=dt
    )
    return Deployment(policy, runner, stack, used, settings)
