"""Policy rollouts on a LIBERO suite, recorded as a LeRobotDataset v3 in LeRobot's LIBERO layout with success
labels (what the closed loop's ``collect`` appends each round, ``env=libero``).

Episode ``i`` is number ``offset + i`` of the interleaved plan (:class:`~sim.libero.robot.LiberoRobot`:
over the tasks in turn, from initial state ``first_init`` on), so a resumed collection continues it. Per
frame the recorder of :mod:`vla.runtime.subscribers` keeps the executed action, the policy's proposal,
``is_intervention`` (the scripted operator's periods, :mod:`sim.libero.operator`, when ``operator`` is
given), reward and done; per episode: success, takeovers, the task, the initial state and the simulator state
after the reset (``vla-replay env=libero``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from sim.libero.convert import libero_spec
from sim.libero.evaluation import LiberoEvalConfig, LiberoWorker, prepare
from sim.libero.operator import ScriptedPlaceOperator
from sim.workers import run_episodes
from vla.data.schema import IS_INTERVENTION
from vla.runtime.subscribers import FrameRecorder


@dataclass
class LiberoRollout:
    index: int
    task: str
    task_index: int
    init_state: int
    success: bool
    frames: list[dict]
    sim_state: list[float]
    policy_calls: int
    takeovers: int
    triggers: list[str]


class LiberoRecordingWorker(LiberoWorker):
    """A :class:`LiberoWorker` whose episodes come back with their frames, with the scripted operator when
    ``cfg.operator.enabled``."""

    def __init__(self, cfg: LiberoEvalConfig) -> None:
        super().__init__(cfg)
        self.operator = ScriptedPlaceOperator(cfg.operator) if cfg.operator.enabled else None

    def run(self, index: int) -> LiberoRollout:  # type: ignore[override]
        recorder = FrameRecorder(self.robot.cameras)
        record, result = self.play(index, [recorder], teleop=self.operator)
        assert self.robot.init_state is not None
        return LiberoRollout(
            index=index,
            task=record.task,
            task_index=record.task_index,
            init_state=record.init_state,
            success=record.success,
            frames=recorder.frames,
            sim_state=self.robot.init_state.tolist(),
            policy_calls=record.policy_calls,
            takeovers=result.takeovers,
            triggers=list(self.operator.triggers) if self.operator else [],
        )


def collect_libero(cfg: LiberoEvalConfig, out: str | Path) -> dict[str, Any]:
    """Roll out ``cfg.episodes`` episodes of the interleaved plan and append them to the dataset ``out``, in
    index order as they finish (the writer is crash-safe); returns counts of this call's episodes."""
    from vla.data.writer import EpisodeWriter

    cfg, _ = prepare(replace(cfg, videos=0, interleaved=True))
    assert cfg.image_size is not None
    n = cfg.episodes
    root = Path(out)
    spec = libero_spec(dict.fromkeys(cfg.camera_names or ("image", "image2"), cfg.image_size))
    counts = {"episodes": 0, "successes": 0, "takeovers": 0, "episodes_with_takeover": 0}
    counts |= {"intervention_frames": 0, "frames": 0}
    pending: dict[int, LiberoRollout] = {}
    bar = tqdm(total=n, desc=f"rollout {cfg.suite}", unit="ep", disable=not cfg.progress)
    with EpisodeWriter(root, spec, resume=root.is_dir() and any(root.iterdir())) as writer:
        for ep in run_episodes(LiberoRecordingWorker, cfg, n, min(cfg.workers, n), cfg.runner, cfg.ray):
            pending[ep.index] = ep
            while counts["episodes"] in pending:
                e = pending.pop(counts["episodes"])
                human = sum(bool(f[IS_INTERVENTION][0]) for f in e.frames)
                for frame in e.frames:
                    writer.add_frame(frame)
                writer.end_episode(
                    success=e.success,
                    source="policy",
                    extra={
                        "seed": cfg.offset + e.index,  # the plan's episode number (the closed loop's seed)
                        "task_name": cfg.suite,
                        "libero_suite": cfg.suite,
                        "libero_task": e.task_index,
                        "libero_init": e.init_state,
                        "libero_state": e.sim_state,
                        "instruction": e.frames[0]["task"] if e.frames else "",
                        "checkpoint": str(cfg.checkpoint),
                        "policy_calls": e.policy_calls,
                        "takeovers": e.takeovers,
                        "intervention_frames": human,
                        "triggers": e.triggers,
                    },
                )
                counts["episodes"] += 1
                counts["takeovers"] += e.takeovers
                counts["episodes_with_takeover"] += e.takeovers > 0
                counts["intervention_frames"] += human
                counts["successes"] += e.success
                counts["frames"] += len(e.frames)
                bar.update(1)
                bar.set_postfix(success=f"{counts['successes']}/{counts['episodes']}")
    bar.close()
    return counts
