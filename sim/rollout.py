"""Policy rollouts in sim with simulated interventions, recorded as a LeRobotDataset v3 (``vla-rollout``).

Per frame: the executed action, the policy's proposal (``complementary_info.policy_action``; it keeps
proposing while the operator drives), ``complementary_info.is_intervention``, the reward and done flag;
per episode: success, number of takeovers, seed and initial physics state (for replay). Episodes run
in parallel worker processes through the shared runtime, as in ``vla-eval``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from sim.collect import episode_spec, make_frame
from sim.evaluation import EpisodeRunner, EvalConfig, check_checkpoint, match_policy_images, run_episodes
from sim.teleop import SimulatedTeleop, TeleopConfig
from vla.data.schema import IS_INTERVENTION, POLICY_ACTION
from vla.data.writer import EpisodeWriter


@dataclass
class RolloutConfig(EvalConfig):
    """``vla-rollout`` options: those of ``vla-eval`` plus the operator; ``out`` is the dataset folder."""

    teleop: TeleopConfig = field(default_factory=TeleopConfig)
    videos: int = 0
    resume: bool = False  # append to an existing dataset in ``out``

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.out:
            raise ValueError("out=<dataset folder> is required")
        # the rollout loop records the policy's proposals and the operator's commands as executed; it does
        # not run the deployment layers between them (stress, upcycling and the executor options do apply)
        for name in ("compensation", "safety"):
            if getattr(self, name):
                raise ValueError(
                    f"vla-rollout: {name}={getattr(self, name)!r} is not supported (vla-eval only)"
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


class RolloutRunner(EpisodeRunner):
    """One worker's env + policy + executor, plus the simulated operator."""

    def __init__(self, cfg: RolloutConfig) -> None:
        super().__init__(cfg)
        self.teleop = SimulatedTeleop(self.env, cfg.teleop, seed=cfg.seed)

    def run(self, index: int) -> RolloutEpisode:  # type: ignore[override]
        cfg: RolloutConfig = self.cfg  # type: ignore[assignment]
        seed = cfg.seed + index
        t0 = time.perf_counter()
        obs, _ = self.env.reset(seed=seed)
        init_state = self.env.get_state()
        self.teleop.reset(seed, init_state)
        self.executor.reset()
        self.runner.reseed(int(np.random.SeedSequence([seed, 1]).generate_state(1)[0]))
        frames: list[dict] = []
        calls, success, was_human, triggers = 0, False, False, []
        while True:
            proposal = self.executor.act(obs)
            human = self.teleop.act()
            if human is not None and not was_human:
                triggers.append(self.teleop.last_trigger)
            action = proposal if human is None else human
            nobs, reward, terminated, truncated, info = self.env.step(action)
            success = success or bool(info["success"])
            end = terminated or truncated
            frame = make_frame(obs, action, reward, end, self.env.cfg.cameras)
            frame[POLICY_ACTION] = np.asarray(proposal, dtype=np.float32)
            frame[IS_INTERVENTION] = np.array([human is not None])
            frames.append(frame)
            if human is not None and not self.teleop.in_control:  # handed back after this step
                calls += self.executor.policy_calls
                self.executor.reset()  # the policy replans from the state the operator left
            was_human = human is not None
            self.teleop.observe(success)
            obs = nobs
            if end:
                break
        return RolloutEpisode(
            index=index,
            seed=seed,
            success=success,
            takeovers=self.teleop.takeovers,
            intervention_frames=sum(bool(f[IS_INTERVENTION][0]) for f in frames),
            policy_calls=calls + self.executor.policy_calls,
            frames=frames,
            instruction=self.env.instruction,
            init_state=init_state.tolist(),
            triggers=triggers,
            wall_s=round(time.perf_counter() - t0, 3),
        )


@dataclass
class RolloutSummary:
    out: Path
    episodes: int
    successes: int
    takeovers: int
    episodes_with_takeover: int
    intervention_frames: int
    frames: int

    def table(self) -> str:
        return (
            "| episodes | success | with takeover | takeovers | intervention frames |\n"
            "|---|---|---|---|---|\n"
            f"| {self.episodes} | {self.successes}/{self.episodes} | {self.episodes_with_takeover} "
            f"| {self.takeovers} | {self.intervention_frames}/{self.frames} |"
        )


def rollout(cfg: RolloutConfig) -> RolloutSummary:
    """Run ``cfg.episodes`` episodes (seeds ``seed + i``) and append them to the dataset ``cfg.out``.

    Episodes are written in index order as they complete (the writer is crash-safe: an interrupted run
    keeps every finished episode).
    """
    check_checkpoint(cfg)
    cfg = match_policy_images(cfg)
    root = Path(cfg.out)  # type: ignore[arg-type]
    if root.exists() and any(root.iterdir()) and not cfg.resume:
        raise FileExistsError(f"{root} exists; pass resume=true to append to it or choose another out=")
    from sim.env import TabletopEnv

    probe = TabletopEnv(cfg.env)
    spec = episode_spec(probe)
    probe.close()
    writer = EpisodeWriter(root, spec, resume=root.exists() and any(root.iterdir()))
    pending: dict[int, RolloutEpisode] = {}
    nxt, n_ok, n_take, n_with, n_int, n_frames = 0, 0, 0, 0, 0, 0
    bar = tqdm(total=cfg.episodes, desc=f"rollout {cfg.task}", unit="ep", disable=not cfg.progress)
    try:
        for ep in run_episodes(RolloutRunner, cfg, cfg.episodes, min(cfg.workers, cfg.episodes)):
            pending[ep.index] = ep
            while nxt in pending:  # write in index order
                e = pending.pop(nxt)
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
                        "triggers": e.triggers,
                        "policy_calls": e.policy_calls,
                    },
                )
                n_ok += e.success
                n_take += e.takeovers
                n_with += e.takeovers > 0
                n_int += e.intervention_frames
                n_frames += len(e.frames)
                nxt += 1
                bar.update(1)
                bar.set_postfix(success=f"{n_ok}/{nxt}", takeovers=n_take)
    finally:
        bar.close()
        writer.close()
    return RolloutSummary(root, nxt, n_ok, n_take, n_with, n_int, n_frames)
