"""A policy checkpoint deployed on the MuJoCo arm: policy -> ``PolicyRunner`` -> deployment stack ->
``SimRobot``, assembled once per worker process and reused across its episodes. Evaluation
(``sim.evaluation``) and rollouts with interventions (``sim.rollout``) both run their episodes through it,
and through :func:`vla.runtime.loop.run_episode`, the loop that also runs on hardware."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from omegaconf import MISSING

from hardware.profiles import PROFILES
from sim.env import EnvConfig, TabletopEnv
from sim.robostress import StressConfig, apply_stress
from sim.robot import SimRobot
from vla.checkpoint import read_config
from vla.policy import import_policy_modules, load_policy
from vla.robot import Teleoperator
from vla.runtime import PolicyRunner
from vla.runtime.config import DeployConfig
from vla.runtime.loop import EpisodeResult, Subscriber, run_episode
from vla.runtime.stack import build_stack
from vla.runtime.upcycling import UPCYCLING_FILE


@dataclass
class SimDeployConfig:
    """A checkpoint on a task, and how it is deployed (the fields ``vla-eval`` and ``vla-rollout`` share)."""

    checkpoint: str = MISSING  # a checkpoint folder (config.yaml naming the policy type, model.safetensors)
    task: str = "reach"
    seed: int = 0  # episode i uses seed + i
    device: str = "cpu"
    cameras: list[str] | None = None  # the policy's; default: policy.config.cameras, else the env's
    imports: list[str] = field(default_factory=lambda: ["policies"])  # modules that register policies
    robot: str = "panda"  # the profile whose limits the safety layer enforces (a 7-joint arm: panda, fr3)
    # sampling (vla.runtime.PolicyRunner): advantage indicator 0/1, CFG scale, integration steps (None:
    # the checkpoint's inference defaults)
    cond: int | None = None
    guidance: float | None = None
    num_steps: int | None = None
    env: EnvConfig = field(default_factory=EnvConfig)
    stress: StressConfig = field(default_factory=StressConfig)  # RoboStress execution errors
    deploy: DeployConfig = field(default_factory=DeployConfig)

    def __post_init__(self) -> None:
        if not self.checkpoint or self.checkpoint == MISSING:
            raise ValueError("checkpoint=<folder> is required")
        if self.cond not in (None, 0, 1):
            raise ValueError(f"cond={self.cond} must be 0, 1 or null")
        self.env = EnvConfig(**{**vars(self.env), "task": self.task})  # validates the task name
        PROFILES.get(self.robot)  # raises with the registered names


def match_policy_images[C: SimDeployConfig](cfg: C) -> C:
    """Render at the image size the checkpoint's policy was trained on (``image_size`` in its config)."""
    size = read_config(cfg.checkpoint).get("image_size")
    if size is not None and tuple(size) != tuple(cfg.env.image_size):
        cfg = replace(cfg, env=replace(cfg.env, image_size=tuple(int(v) for v in size)))
    return cfg


class SimDeployment:
    """One worker's policy, robot and stack; :meth:`run` plays episode ``index`` (seed ``seed + index``)."""

    def __init__(self, cfg: SimDeployConfig, *, realtime: bool = False) -> None:
        import_policy_modules(cfg.imports)
        self.cfg = cfg
        self.policy = load_policy(cfg.checkpoint, cfg.device)
        env = apply_stress(TabletopEnv(cfg.env), cfg.stress)
        self.robot = SimRobot(env, PROFILES.get(cfg.robot), realtime=realtime)
        if self.policy.action_dim != self.robot.profile.action_dim:
            raise ValueError(
                f"{cfg.checkpoint}: the policy outputs {self.policy.action_dim}-d actions; "
                f"task {cfg.task!r} takes {self.robot.profile.action_dim}-d actions"
            )
        # the policy's cameras: explicit, else its config's (if it says), else every env camera
        cameras = list(cfg.cameras or getattr(getattr(self.policy, "config", None), "cameras", None) or [])
        cameras = cameras or list(cfg.env.cameras)
        if not set(cameras) <= set(cfg.env.cameras):
            raise ValueError(f"the policy reads cameras {cameras}; the env renders {list(cfg.env.cameras)}")
        self.runner = PolicyRunner(
            self.policy,
            cameras=cameras,
            device=cfg.device,
            cond=cfg.cond,
            guidance=cfg.guidance,
            num_steps=cfg.num_steps,
            rtc_beta_max=cfg.deploy.rtc.beta_max if cfg.deploy.rtc.enabled else None,
        )
        calib_file = Path(cfg.checkpoint) / UPCYCLING_FILE
        if cfg.deploy.upcycling.enabled and not calib_file.is_file():
            raise FileNotFoundError(
                f"upcycling.enabled needs {calib_file} (written by vla-train from the demos)"
            )
        calibration = json.loads(calib_file.read_text()) if calib_file.is_file() else None
        self.stack = build_stack(
            cfg.deploy,
            self.runner,
            profile=self.robot.profile,
            chunk_size=self.runner.chunk_size,
            calibration=calibration,
            dt=env.dt,
        )

    def run(
        self,
        index: int,
        subscribers: Sequence[Subscriber] = (),
        teleop: Teleoperator | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> EpisodeResult:
        seed = self.cfg.seed + index
        self.runner.reseed(int(np.random.SeedSequence([seed, 1]).generate_state(1)[0]))  # its own stream
        return run_episode(
            self.robot, self.stack, seed=seed, teleop=teleop, subscribers=subscribers, stop=stop
        )

    def close(self) -> None:
        self.stack.close()
        self.robot.close()
