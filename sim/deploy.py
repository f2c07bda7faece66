"""A policy checkpoint deployed on the MuJoCo arm: policy -> ``PolicyRunner`` -> deployment stack ->
``SimRobot``, assembled once per worker process and reused across its episodes. Evaluation
(``sim.evaluation``) and rollouts with interventions (``sim.rollout``) both run their episodes through it,
and through :func:`vla.runtime.loop.run_episode`, the loop that also runs on hardware."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from hardware.profiles import PROFILES
from sim.env import DEFAULT_IMAGE_SIZE, EnvConfig, TabletopEnv, with_task
from sim.robostress import StressConfig, apply_stress
from sim.robot import SimRobot
from sim.workers import RUNNERS, RayConfig
from vla.checkpoint import read_config
from vla.errors import InputError
from vla.robot import Teleoperator
from vla.runtime.config import DeployConfig
from vla.runtime.deployment import deploy_checkpoint
from vla.runtime.loop import EpisodeResult, Subscriber, run_episode


@dataclass
class SimDeployConfig:
    """A checkpoint on a task, and how it is deployed (the fields ``vla-eval`` and ``vla-rollout`` share)."""

    # a checkpoint folder (config.yaml naming the policy type, model.safetensors); with deploy.remote it may
    # be left unset (the served checkpoint's settings are fetched from the server)
    checkpoint: str | None = None
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
    runner: str = "process"  # where the episodes run: process (this machine's processes) or ray
    ray: RayConfig = field(default_factory=RayConfig)  # runner=ray: the cluster (ray.address=)

    def __post_init__(self) -> None:
        if self.runner not in RUNNERS:
            raise ValueError(f"runner={self.runner!r}: use one of {', '.join(RUNNERS)}")
        if not self.checkpoint and not self.deploy.remote:
            raise ValueError("checkpoint=<folder> is required (or deploy.remote=<host:port> of a vla-serve)")
        if self.cond not in (None, 0, 1):
            raise ValueError(f"cond={self.cond} must be 0, 1 or null")
        self.env = with_task(self.env, self.task)
        PROFILES.get(self.robot)  # raises with the registered names


def match_policy_images[C: SimDeployConfig](cfg: C) -> tuple[C, str | None]:
    """Render at the image size the checkpoint's policy was trained on (``image_size`` in its config.yaml).

    An unset ``env.image_size`` takes the checkpoint's (the returned line says so, e.g.
    ``env.image_size=[96, 96] (checkpoint)``; None when the checkpoint's value did not decide), else 96 x 96.

    Raises:
        InputError: ``env.image_size`` was set to another size than the checkpoint's.
    """
    size = read_config(cfg.checkpoint).get("image_size")
    own = None if size is None else tuple(int(v) for v in size)
    given = cfg.env.image_size
    if given is not None and own is not None and tuple(given) != own:
        raise InputError(
            f"env.image_size={list(given)} differs from the checkpoint's image_size={list(own)} "
            f"({cfg.checkpoint}/config.yaml), the size its policy reads: leave env.image_size unset"
        )
    if given is not None:
        return cfg, None
    cfg = replace(cfg, env=replace(cfg.env, image_size=own or DEFAULT_IMAGE_SIZE))
    return cfg, None if own is None else f"env.image_size={list(own)} (checkpoint)"


class SimDeployment:
    """One worker's policy, robot and stack; :meth:`run` plays episode ``index`` (seed ``seed + index``)."""

    def __init__(self, cfg: SimDeployConfig, *, realtime: bool = False) -> None:
        self.cfg = cfg
        env = apply_stress(TabletopEnv(cfg.env), cfg.stress)
        self.robot = SimRobot(env, PROFILES.get(cfg.robot), realtime=realtime)
        d = deploy_checkpoint(
            cfg.checkpoint,
            self.robot.profile,
            cfg.deploy,
            available_cameras=cfg.env.cameras,
            cameras=cfg.cameras,
            device=cfg.device,
            cond=cfg.cond,
            guidance=cfg.guidance,
            num_steps=cfg.num_steps,
            imports=cfg.imports,
            dt=env.dt,
        )
        self.policy, self.runner, self.stack = d.policy, d.runner, d.stack

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
        if hasattr(self.runner, "close"):  # a RemoteSampler's channel
            self.runner.close()
