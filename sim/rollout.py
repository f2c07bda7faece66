"""Policy rollouts in sim with simulated interventions, recorded as a LeRobotDataset v3 (``vla-rollout``).

Each episode runs through :func:`vla.runtime.loop.run_episode` with the simulated operator as the
teleoperator (takeover semantics: :class:`vla.runtime.takeover.Takeover`) and the intervention recorder
(:class:`vla.runtime.subscribers.FrameRecorder`) as a subscriber. Per frame: the executed action, the
policy's proposal (``complementary_info.policy_action``; it keeps proposing while the operator drives),
``complementary_info.is_intervention``, the reward and done flag; per episode: success, number of
takeovers, seed and initial physics state (for replay). The whole deployment stack applies (safety,
self-compensation, async inference...), as on a robot. Episodes run in parallel worker processes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from hardware.profiles import PROFILES
from sim.collect import episode_spec
from sim.deploy import SimDeployConfig, SimDeployment, match_policy_images
from sim.evaluation import check_checkpoint, resolve_deployment
from sim.teleop import SimulatedTeleop, TeleopConfig
from sim.workers import run_episodes
from vla.checks import check_dataset
from vla.data.schema import IS_INTERVENTION
from vla.runtime.subscribers import FrameRecorder


@dataclass
class RolloutConfig(SimDeployConfig):
    """``vla-rollout`` options: a deployed checkpoint plus the operator; ``out`` is the dataset folder."""

    episodes: int = 10
    workers: int = 2
    out: str | None = None
    teleop: TeleopConfig = field(default_factory=TeleopConfig)
    resume: bool = False  # append to an existing dataset in ``out``
    progress: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.out:
            raise ValueError("out=<dataset folder> is required")
        if self.episodes < 1 or self.workers < 0:
            raise ValueError(f"episodes={self.episodes} >= 1 and workers={self.workers} >= 0 required")
        if self.teleop.device != "simulated" and self.workers != 0:
            raise ValueError(
                f"teleop.device={self.teleop.device}: a person operates in this process; set workers=0"
            )


@dataclass
class RolloutEpisode:
    index: int
    seed: int
    success: bool
    takeovers: int
    intervention_frames: int
    policy_calls: int
    frames: list[dict]
    instruction: str
    init_state: list[float]
    triggers: list[str]
    wall_s: float
    fault: str | None = None


class RolloutWorker:
    """One worker's deployment plus the simulated operator on the same env."""

    def __init__(self, cfg: RolloutConfig) -> None:
        self.cfg = cfg
        human = cfg.teleop.device != "simulated"
        self.deployment = SimDeployment(cfg, realtime=human)  # a person needs the sim in real time
        self.viewer = None
        self.stop = None
        if human:
            from sim.teleop_devices import make_device_teleoperator, open_viewer

            t = cfg.teleop
            options = {"port": t.port} if t.port else {}
            self.teleop = make_device_teleoperator(
                t.device, self.deployment.robot, delta_scale=t.delta_scale, **options
            )
            self.stop = self.teleop.terminate_requested
            self.viewer = open_viewer(self.deployment.robot)
        else:
            self.teleop = SimulatedTeleop(self.deployment.robot.env, cfg.teleop, seed=cfg.seed)

    def run(self, index: int) -> RolloutEpisode:
        t0 = time.perf_counter()
        recorder = FrameRecorder(self.cfg.env.cameras)
        subscribers = [recorder] if self.viewer is None else [recorder, self.viewer]
        r = self.deployment.run(index, subscribers, teleop=self.teleop, stop=self.stop)
        robot = self.deployment.robot
        assert robot.init_state is not None
        return RolloutEpisode(
            index=index,
            seed=self.cfg.seed + index,
            success=bool(r.success),
            takeovers=r.takeovers,
            intervention_frames=sum(bool(f[IS_INTERVENTION][0]) for f in recorder.frames),
            policy_calls=r.policy_calls,
            frames=recorder.frames,
            instruction=r.instruction,
            init_state=robot.init_state.tolist(),
            triggers=list(getattr(self.teleop, "triggers", [])) if self.cfg.teleop.enabled else [],
            wall_s=round(time.perf_counter() - t0, 3),
            fault=r.fault,
        )

    def close(self) -> None:
        self.deployment.close()


@dataclass
class RolloutSummary:
    out: Path
    episodes: int
    successes: int
    takeovers: int
    episodes_with_takeover: int
    intervention_frames: int
    frames: int
    holds: int = 0

    def table(self) -> str:
        return (
            "| episodes | success | with takeover | takeovers | intervention frames | safety holds |\n"
            "|---|---|---|---|---|---|\n"
            f"| {self.episodes} | {self.successes}/{self.episodes} | {self.episodes_with_takeover} "
            f"| {self.takeovers} | {self.intervention_frames}/{self.frames} | {self.holds} |"
        )


def rollout(cfg: RolloutConfig, worker: type[RolloutWorker] | None = None) -> RolloutSummary:
    """Run ``cfg.episodes`` episodes (seeds ``seed + i``) and append them to the dataset ``cfg.out``.

    Episodes are written in index order as they complete (the writer is crash-safe: an interrupted run
    keeps every finished episode). Unset deployment values take the checkpoint's defaults
    (:mod:`vla.runtime.defaults`); the line saying which is printed when ``cfg.progress``. ``worker``: the
    class that plays episodes in each worker (default :class:`RolloutWorker`).
    """
    worker = worker or RolloutWorker
    cfg, _ = check_checkpoint(cfg)
    cfg, settings = resolve_deployment(cfg)  # the checkpoint's defaults where cfg leaves a value unset
    cfg, size_note = match_policy_images(cfg)
    if cfg.progress:
        print("\n".join(filter(None, [settings.describe(), size_note])), flush=True)
    root = Path(cfg.out)  # type: ignore[arg-type]
    if root.exists() and any(root.iterdir()) and not cfg.resume:
        raise FileExistsError(f"{root} exists; pass resume=true to append to it or choose another out=")
    if root.is_dir() and any(root.iterdir()):  # the episodes to append to
        check_dataset(root, resuming=True, profiles=PROFILES)
    from sim.env import TabletopEnv

    probe = TabletopEnv(cfg.env)
    spec = episode_spec(probe)
    probe.close()
    from vla.data.writer import EpisodeWriter  # imports lerobot (~9 s): not for --help

    writer = EpisodeWriter(root, spec, resume=root.exists() and any(root.iterdir()))
    pending: dict[int, RolloutEpisode] = {}
    s = RolloutSummary(root, 0, 0, 0, 0, 0, 0)
    bar = tqdm(total=cfg.episodes, desc=f"rollout {cfg.task}", unit="ep", disable=not cfg.progress)
    try:
        for ep in run_episodes(
            worker, cfg, cfg.episodes, min(cfg.workers, cfg.episodes), cfg.runner, cfg.ray
        ):
            pending[ep.index] = ep
            while s.episodes in pending:  # write in index order
                e = pending.pop(s.episodes)
                for frame in e.frames:
                    writer.add_frame(frame)
                writer.end_episode(
                    success=e.success,
                    source="policy",
                    extra={
                        "seed": e.seed,
                        "task_name": cfg.task,
                        "instruction": e.instruction,
                        "control_hz": cfg.env.control_hz,
                        "init_state": e.init_state,
                        "checkpoint": str(cfg.checkpoint),
                        "takeovers": e.takeovers,
                        "intervention_frames": e.intervention_frames,  # the operator's frames
                        "triggers": e.triggers,
                        "policy_calls": e.policy_calls,
                        "fault": e.fault,
                    },
                )
                s.successes += e.success
                s.takeovers += e.takeovers
                s.episodes_with_takeover += e.takeovers > 0
                s.intervention_frames += e.intervention_frames
                s.frames += len(e.frames)
                s.holds += e.fault is not None
                s.episodes += 1
                bar.update(1)
                bar.set_postfix(success=f"{s.successes}/{s.episodes}", takeovers=s.takeovers)
    finally:
        bar.close()
        writer.close()
    return s
