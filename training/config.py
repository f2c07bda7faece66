"""Typed configuration of ``vla-train`` (one dataclass per Hydra group, registered in the ConfigStore)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from training.algorithms.base import OptimConfig
from training.data import DataConfig


@dataclass
class EvalDuringTraining:
    """Periodic evaluation through a ``vla.evaluation`` runner (``runner=null`` switches it off)."""

    runner: str | None = None  # "sim": MuJoCo episodes through the shared runtime; "libero": a LIBERO suite
    module: str = "sim.runner"  # imported to register the runner (training never imports sim directly)
    task: str | None = None  # None: the data's task (training/presets.py)
    episodes: int = 10
    every: int = 0  # steps between evaluations; 0 = only at the end
    workers: int = 2
    seed: int = 1000  # evaluation seeds differ from the (0-based) collection seeds
    options: dict[str, Any] = field(default_factory=dict)  # the runner's own (env=libero: docs/libero.md)


@dataclass
class TrainDeployConfig:
    """How the trained checkpoint deploys unless told otherwise (its ``deploy.yaml``,
    :mod:`vla.runtime.defaults`); the evaluations during training deploy it so too."""

    # executed actions per chunk (``deploy.horizon``, as in vla-eval and vla-rollout); None: post-training
    # keeps its base checkpoint's, else whole chunks
    horizon: int | None = None

    def __post_init__(self) -> None:
        if self.horizon is not None and self.horizon < 1:
            raise ValueError(f"deploy.horizon={self.horizon} must be >= 1 (or null)")


@dataclass
class EMAConfig:
    enabled: bool = True
    decay: float = 0.999  # with warm-up: min(decay, (1 + step) / (10 + step))


@dataclass
class LoopConfig:
    """Closed-loop rounds (``training/closed_loop.py``): rollouts -> critic -> post-training -> evaluation."""

    rounds: int = 0  # 0: one training run on data.roots; n: n rounds from init_from
    rollout_episodes: int = 50
    rollout_seed: int = 100_000  # round r uses seeds rollout_seed + r * rollout_episodes + i
    teleop: Any = field(default_factory=dict)  # simulated operator fields (sim.teleop.TeleopConfig)
    # round 1's rollouts (made by init_from): runs from the same base pointed at one folder post-train on
    # identical rollouts (the first collects them, the others reuse them; a folder made by another
    # checkpoint is refused). None: <out>/round_1/rollouts. Rounds >= 2 always live in
    # <out>/round_<r>/rollouts, made by this run's own round r-1 checkpoint (training/rounds.py)
    base_rollouts_dir: str | None = None
    evaluate_base: bool = True  # round 0: evaluate the base policy (off when a benchmark evaluates it once)
    # after the last round, collect round R+1's rollouts with its checkpoint: its takeovers per episode
    final_rollouts: bool = True
    # evaluation episodes of the rounds before the last (None: env.episodes, as the last round's); fewer
    # make the intermediate rows cheaper and wider (rounds.json records each row's count)
    round_eval_episodes: int | None = None

    def __post_init__(self) -> None:
        if self.round_eval_episodes is not None and self.round_eval_episodes < 1:
            raise ValueError(f"loop.round_eval_episodes={self.round_eval_episodes}: >= 1, or null")
        if self.rounds < 0 or self.rollout_episodes < 1:
            raise ValueError(
                f"loop.rounds={self.rounds} >= 0 and rollout_episodes={self.rollout_episodes} >= 1"
            )
        if self.base_rollouts_dir and "{round}" in self.base_rollouts_dir:
            raise ValueError(
                f"loop.base_rollouts_dir={self.base_rollouts_dir!r} holds round 1's rollouts only "
                "(rounds >= 2 live in <out>/round_<r>/rollouts): drop '{round}'"
            )


@dataclass
class WandbConfig:
    """Optional Weights & Biases logging (off by default; ``pip install wandb``): the TensorBoard scalars,
    mirrored (``sync_tensorboard``)."""

    enable: bool = False
    project: str = "vla"
    mode: str = "online"  # online | offline | disabled (wandb.init's mode)

    def __post_init__(self) -> None:
        if self.mode not in ("online", "offline", "disabled"):
            raise ValueError(f"wandb.mode={self.mode!r}: use online, offline or disabled")


@dataclass
class TrainConfig:
    policy: Any = field(default_factory=lambda: {"type": "flow_matching"})  # fields of the policy's config
    algo: Any = field(default_factory=lambda: {"name": "sft"})  # name + algorithm-specific fields
    optim: OptimConfig = field(default_factory=OptimConfig)
    data: DataConfig = field(default_factory=DataConfig)
    env: EvalDuringTraining = field(default_factory=EvalDuringTraining)
    deploy: TrainDeployConfig = field(default_factory=TrainDeployConfig)
    ema: EMAConfig = field(default_factory=EMAConfig)
    loop: LoopConfig = field(default_factory=LoopConfig)
    # the run's folder; None: a new one per run, outputs/train/<date>/<time>_<experiment> (run_folder.py)
    out: str | None = None
    init_from: str | None = None  # post-training: start from this checkpoint (its config, stats, EMA weights)
    post_training: bool = False  # set by the posttrain_* presets: init_from is required (no fresh model)
    steps: int = 1000
    stop_after: int | None = None  # stop early at this step (the schedule still spans ``steps``)
    max_minutes: float | None = None  # wall-clock budget of this run's optimisation; stops (and saves) there
    batch_size: int = 32
    seed: int = 0
    control_hz: float | None = 10.0  # the data's control rate (upcycling calibration); null: none
    threads: int = 2  # torch CPU threads (2 cores here; more threads than cores is much slower)
    device: str = "cpu"
    # under a launcher: shard the policy's weights, gradients and optimiser state across the processes
    # (FSDP2, training/distributed.shard) instead of a whole copy per process; ignored in one process
    fsdp: bool = False
    log_every: int = 10
    save_every: int = 500
    keep_last: int = (
        3  # step checkpoints kept beside last (checkpoints/<step>/, deployable, no resume state); 0: none
    )
    # true: continue <out>/checkpoints/last when it exists and was trained with the same config (up to
    # training.run_folder.NOT_THE_RESULT), refuse when it differs; false: start over in <out>
    resume: bool = True
    progress: bool = True
    wandb: WandbConfig = field(default_factory=WandbConfig)

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError(f"steps={self.steps} and batch_size={self.batch_size} must be >= 1")
        if "type" not in self.policy:
            raise ValueError("policy.type is missing (e.g. policy=flow_matching)")
        # configs/policy/*.yaml list every field of the policy's config class (policy.<field>=v needs no
        # +); null there: the class's own default
        self.policy = {k: v for k, v in dict(self.policy).items() if v is not None}
        if "name" not in self.algo:
            raise ValueError("algo.name is missing (e.g. algo=sft)")
