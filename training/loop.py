"""The one training loop: data -> ``algorithm.update(batch)`` -> EMA -> logs, checkpoints, evaluation.

Every algorithm (SFT now; RECAP, ALOE, HABC, ... later) runs through :func:`train`. Resume is exact: the
checkpoint's ``train_state`` holds the raw weights, optimiser, schedule, EMA, step and every RNG state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

import policies  # noqa: F401  (registers the policies)
from hardware.profiles import PROFILES
from training import distributed
from training.algorithms import ALGORITHMS
from training.config import TrainConfig
from training.data import ChunkDataset, check_labels, check_policy_inputs, with_data_dims
from training.ema import EMA
from training.presets import resolve_task
from training.rounds import round_config
from training.run_folder import (
    LazyScalars,
    check_resume,
    check_wandb,
    run_dir,
    run_log,
    start_wandb,
    with_run_folder,
)
from vla.batch import to_device
from vla.checkpoint import (
    STATS_FILE,
    TRAIN_STATE_DIR,
    load_stats,
    load_train_state,
    publish,
    read_config,
    save_train_state,
    staging_dir,
)
from vla.checks import check_checkpoint, check_dataset
from vla.errors import InputError, NonFiniteError
from vla.evaluation import EnvRunner, make_runner
from vla.lock import folder_lock
from vla.policy import POLICIES, load_policy
from vla.runtime.defaults import DeployDefaults
from vla.runtime.upcycling import UPCYCLING_FILE, calibration_from_actions
from vla.sharding import rows_of

log = logging.getLogger(__name__)


def build_policy(spec: dict[str, Any], stats: dict | None) -> torch.nn.Module:
    """Instantiate a registered policy from its config fields (``type`` picks the class)."""
    spec = dict(spec)
    cls = POLICIES.get(spec.pop("type"))
    names = {f.name for f in dataclasses.fields(cls.config_class)}
    unknown = sorted(set(spec) - names)
    if unknown:
        raise KeyError(f"policy: unknown field(s) {unknown} for {cls.__name__}; known: {sorted(names)}")
    return cls(cls.config_class(**spec), stats)


def env_runner(cfg: TrainConfig, out: Path) -> EnvRunner:
    """The configured env runner (``env.runner`` from ``env.module``), writing under ``<out>/eval``."""
    e = cfg.env
    return make_runner(
        e.runner,
        e.module,
        task=e.task,
        episodes=e.episodes,
        workers=e.workers,
        horizon=cfg.deploy.horizon,
        seed=e.seed,
        out=str(out / "eval"),
        **e.options,
    )


def check_inputs(cfg: TrainConfig) -> None:
    """The cheap checks of every input (``data.roots``, ``init_from``, the ``out=`` folder's run when it
    holds one, ``wandb``) before any work or output folder.

    Raises:
        InputError: One line naming the file, the episode or field, and what to do.
    """
    if cfg.post_training and not cfg.init_from:
        raise InputError(
            "a post-training preset needs the checkpoint it post-trains: pass init_from=<checkpoint> "
            "(post_training=false trains a fresh model with this algorithm)"
        )
    if not cfg.data.roots and not cfg.data.repo_id and cfg.loop.rounds == 0:
        raise InputError("data.roots is empty: pass data.roots=[<dataset folder>,...] or data.repo_id=<id>")
    for root in cfg.data.resolved_roots():  # data.roots and data.repo_id's folder (data.keys: its names)
        check_dataset(root, profiles=PROFILES, state_key=cfg.data.keys.state, action_key=cfg.data.keys.action)
    resolve_task(cfg)  # env.task and the critic's t_max from the data where unset (training/presets.py)
    if cfg.loop.rounds > 0 and not cfg.init_from:
        raise InputError("loop.rounds > 0 post-trains a base policy: set init_from=<checkpoint folder>")
    if cfg.init_from:
        check_checkpoint(cfg.init_from)
    check_policy_inputs(cfg.data, cfg.policy, cfg.init_from)  # its cameras and sizes in every dataset
    try:  # the typed algo.* (and algo.critic.*) config: an unknown or refused field in one line
        ALGORITHMS.get(cfg.algo["name"]).make_config(dict(cfg.algo))
    except (TypeError, ValueError, KeyError) as exc:
        raise InputError(str(exc.args[0]) if exc.args else repr(exc)) from None
    outcomes, takeovers = ALGORITHMS.get(cfg.algo["name"]).label_needs(dict(cfg.algo))
    if cfg.data.only_success:
        check_labels(cfg.data, "data.only_success=true", success=True, takeovers=False)
    # (closed-loop rounds collect their takeovers: only the given data must hold the outcomes)
    who = f"algo={cfg.algo['name']}"
    if cfg.algo.get("indicator", "none") != "none":  # sft's base with the RECAP indicator: name the field
        who += f" algo.indicator={cfg.algo['indicator']}"
    check_labels(cfg.data, who, success=outcomes, takeovers=takeovers and not cfg.loop.rounds)
    check_wandb(cfg)
    if cfg.out is not None:  # resume only the same run (a closed loop: its first round's training run)
        first_round = None
        if cfg.loop.rounds > 0 and cfg.init_from:
            first_round = round_config(cfg, 1, cfg.init_from)
        check_resume(cfg, first_round)


def _first_non_finite(tensors: dict[str, torch.Tensor]) -> str | None:
    return next(
        (k for k, v in tensors.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())), None
    )


def _rng_state() -> dict[str, Any]:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state()[1], "python": random.getstate()[1]}


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(("MT19937", np.asarray(state["numpy"], dtype=np.uint32), 624, 0, 0.0))
    random.setstate((3, tuple(int(x) for x in state["python"]), None))


class _NoWriter:
    """A data-parallel rank's stand-in for TensorBoard's writer: rank 0 alone logs."""

    def add_scalar(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass


class Trainer:
    def __init__(self, cfg: TrainConfig, *, inputs_checked: bool = False) -> None:
        cfg = with_run_folder(cfg)  # out=None: a new folder of its own
        if not inputs_checked:
            check_inputs(cfg)  # before anything is read for real or written
        self.world = distributed.init(cfg.device)  # one process unless started by torchrun / accelerate
        cfg = dataclasses.replace(cfg, device=distributed.device_of(cfg.device, self.world))
        distributed.check_batch(cfg.batch_size, self.world)
        self.cfg = cfg
        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        np.random.seed(cfg.seed)
        random.seed(cfg.seed)
        self.out = run_dir(cfg)
        self.last = self.out / "checkpoints" / "last"
        state = self._resume_state() if cfg.resume and self.last.exists() else None
        spec = dict(cfg.policy)
        if cfg.init_from:  # post-training: the base checkpoint's architecture and normalisation
            spec = read_config(cfg.init_from)
            print(f"post-training {cfg.init_from} ({spec['type']}); the policy= group is not used")
        policy_cameras = spec.get("cameras", ["agentview", "wrist"])
        chunk = spec.get("chunk_size", 50)
        self.data = ChunkDataset(cfg.data, policy_cameras, chunk, progress=cfg.progress)
        spec = spec if cfg.init_from else with_data_dims(spec, self.data)  # a fresh model: the data's sizes
        if state:
            stats = load_stats(self.last / STATS_FILE)
        elif cfg.init_from:
            stats = load_stats(Path(cfg.init_from) / STATS_FILE)
        else:
            stats = self.data.stats()
        if cfg.init_from and state is None:
            self.policy = load_policy(cfg.init_from, cfg.device)
        else:
            self.policy = build_policy(spec, stats).to(cfg.device)
        algo_cls = ALGORITHMS.get(cfg.algo["name"])
        params = dict(cfg.algo)
        self.upcycling = self._calibrate_upcycling(cfg.control_hz)
        self.deploy_horizon = self._deploy_horizon(int(self.policy.chunk_size))
        self.fsdp = cfg.fsdp and self.world.size > 1
        if self.fsdp:  # whole weights in, then sharded, before the optimiser sees the parameters
            if state is not None:
                self.policy.load_state_dict(state["policy"])
            units = distributed.shard(self.policy)
            if self.world.main:
                print(
                    f"fsdp: the policy sharded across {self.world.size} processes "
                    f"({units} linear layers and the rest)"
                )
        self.algo = algo_cls(self.policy, cfg.optim, cfg.steps, seed=cfg.seed, config=params)
        main = self.world.main
        self.wandb = start_wandb(cfg, self.out) if main else None  # before any SummaryWriter
        work = self.out if main else self._rank_folder()  # rank 0 alone writes the run folder
        critic_tb = LazyScalars(work / "tb" / "critic")  # a critic's fitting, beside the policy's scalars
        self.algo.scalars = critic_tb
        try:
            self.prepared = self.algo.prepare(self.data, work, progress=cfg.progress and main)
        finally:
            critic_tb.close()
        if self.prepared:
            summary = ", ".join(f"{k}={v:.3g}" for k, v in self.prepared.items())
            print(f"{cfg.algo['name']} labels: {summary}")
        self.ema = EMA(self.policy, cfg.ema.decay) if cfg.ema.enabled else None
        self.data_gen = torch.Generator().manual_seed(cfg.seed)
        self.step = 0
        self._saved_step = -1  # the step checkpoints/last holds (-1: not known to this run)
        if state is not None:
            if not self.fsdp:
                self.policy.load_state_dict(state["policy"])
            self.algo.load_state_dict(state["algo"])
            if self.ema is not None:
                self.ema.load_state_dict(state["ema"])
            if self.fsdp:  # the checkpoint holds whole tensors: shard them as the parameters are
                distributed.reshard_optimizer(self.algo.optimizer)
                if self.ema is not None:
                    self.ema.shadow = distributed.shard_like(self.ema.shadow, self.policy.state_dict())
            self.data_gen.set_state(state["data_generator"])
            _set_rng_state(state["rng"])
            self.step = int(state["step"])
            self._saved_step = self.step
            print(f"resuming {self.last} at step {self.step}")
        self.runner: EnvRunner | None = env_runner(cfg, self.out) if cfg.env.runner and main else None

    def _rank_folder(self) -> Path:
        """A data-parallel rank's own scratch folder for what its algorithm's ``prepare`` writes (the same as
        rank 0's), with rank 0's folders the algorithm reads back on a resume (``resume_dirs``) linked in."""
        folder = self.out / ".ranks" / str(self.world.rank)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name in getattr(self.algo, "resume_dirs", ()):
            if (self.out / name).is_dir():
                (folder / name).symlink_to((self.out / name).resolve(), target_is_directory=True)
        return folder

    def _resume_state(self) -> dict[str, Any]:
        """``checkpoints/last``'s train state. The folder was checked by :func:`check_inputs`
        (``training.run_folder.check_resume``: the checkpoint, the train state's header, its config)."""
        state_json = self.last / TRAIN_STATE_DIR / "state.json"
        try:
            state = load_train_state(self.last)
        except (OSError, ValueError, KeyError, TypeError) as exc:  # changed since the check
            raise InputError(
                f"{state_json}: unreadable ({exc}); cannot resume (resume=false to restart, or another out=)"
            ) from exc
        assert state is not None
        return state

    def _calibrate_upcycling(self, control_hz: float | None) -> dict | None:
        """Execution-horizon upcycling thresholds from the demonstrations (not the policy's rollouts)."""
        d = self.data
        parts = [
            d.action[d.episode_frames(e)].numpy() for e, m in enumerate(d.episodes) if m.source != "policy"
        ]
        if not parts or not control_hz:
            return None
        ends = np.cumsum([len(p) for p in parts])
        episode_end = np.repeat(ends, [len(p) for p in parts])
        try:
            return calibration_from_actions(np.concatenate(parts), episode_end, d.H, 1.0 / control_hz)
        except ValueError:
            return None

    def _deploy_horizon(self, chunk_size: int) -> int | None:
        """The execution horizon the checkpoint deploys with: ``deploy.horizon`` (the preset's evaluation
        horizon), else the base checkpoint's when post-training; None: the whole chunk, which is also what a
        horizon longer than the policy's chunks amounts to."""
        h = self.cfg.deploy.horizon
        if h is None and self.cfg.init_from:
            base = DeployDefaults.load(self.cfg.init_from)
            h = None if base is None else base.horizon
        if h is not None and h > chunk_size:
            print(
                f"deploy.horizon={h} is longer than the policy's chunks (H={chunk_size}): deploys whole ones"
            )
            return None
        return h

    def deploy_defaults(self) -> DeployDefaults:
        """What the checkpoint deploys with unless told otherwise (``deploy.yaml``, vla.runtime.defaults):
        the execution horizon, the policy's inference conditioning, guidance and sampler steps, and the
        training data's most frequent instruction (what the policy is told when nobody says otherwise)."""
        config = getattr(self.policy, "config", None)
        tasks = Counter(t for t in self.data.tasks if t).most_common(1)
        return DeployDefaults(
            horizon=self.deploy_horizon,
            cond=getattr(config, "inference_cond", None),
            guidance=getattr(config, "inference_guidance", None),
            num_steps=getattr(config, "num_steps", None),
            instruction=tasks[0][0] if tasks else None,
        )

    def save(self) -> Path:
        """Write ``checkpoints/last``: EMA weights as the model; raw weights and the rest in train_state.
        Rank 0 alone writes (the ranks hold the same weights). Under FSDP every rank calls it at the same
        steps: the whole tensors are gathered from all of them first."""
        if self._saved_step == self.step:
            return self.last  # already written at this step (e.g. by the final evaluation)
        raw: dict[str, Any] = {}
        shadow: dict[str, Any] = {}
        algo: dict[str, Any] | None = None
        if self.fsdp:
            raw = distributed.full(self.policy.state_dict())
            shadow = distributed.full(self.ema.shadow) if self.ema is not None else {}
            algo = distributed.full(self.algo.state_dict())
        elif self.world.main:
            raw, shadow = self.policy.state_dict(), self.ema.shadow if self.ema is not None else {}
        self._saved_step = self.step
        if not self.world.main:
            return self.last
        for what, weights in (("weights", raw), ("EMA weights", shadow)):
            bad = _first_non_finite(weights)
            if bad is not None:  # never replace the last good checkpoint with a broken one
                raise NonFiniteError(f"{what}: tensor '{bad}' holds NaN/inf")
        tmp = staging_dir(self.last)
        if self.fsdp:  # the model's whole weights (the policy's keys are "model." + the model's)
            best = shadow or raw
            self.policy.save(
                tmp, weights={k[len("model.") :]: v for k, v in best.items() if k.startswith("model.")}
            )
            self._write_deploy_files(tmp)
        else:
            swapped = self.ema.swap(self.policy) if self.ema is not None else None
            try:
                self.policy.save(tmp)
                self._write_deploy_files(tmp)
            finally:
                if swapped is not None:
                    self.policy.load_state_dict(swapped)
        ema = self.ema.state_dict() if self.ema is not None else None
        state = {
            "step": self.step,
            "policy": raw,
            "algo": algo if algo is not None else self.algo.state_dict(),
            "ema": {**ema, "shadow": shadow} if ema is not None else None,
            "data_generator": self.data_gen.get_state(),
            "rng": _rng_state(),
            "config": dataclasses.asdict(self.cfg) if dataclasses.is_dataclass(self.cfg) else {},
        }
        save_train_state(tmp, state)
        publish(tmp, self.last)
        self._keep_step()
        return self.last

    def _write_deploy_files(self, tmp: Path) -> None:
        if self.upcycling is not None:  # deployment calibration from the demos (vla.runtime.upcycling)
            (tmp / UPCYCLING_FILE).write_text(json.dumps(self.upcycling))
        self.deploy_defaults().save(tmp)  # how it deploys unless told otherwise (vla.runtime.defaults)

    def _keep_step(self) -> None:
        """Copy ``last``'s deployable files (weights, config, stats, deploy.yaml; not the resume state) to
        ``checkpoints/<step>/`` and keep the newest ``keep_last`` of those, so a user can pick a step."""
        if self.cfg.keep_last <= 0:
            return
        folder = self.last.parent / f"{self.step:06d}"
        tmp = staging_dir(folder)
        for f in self.last.iterdir():
            if f.is_file():
                shutil.copy2(f, tmp / f.name)
        publish(tmp, folder)
        steps = sorted(p for p in self.last.parent.iterdir() if p.is_dir() and p.name.isdigit())
        for old in steps[: -self.cfg.keep_last]:
            shutil.rmtree(old, ignore_errors=True)

    def evaluate(self, writer) -> dict[str, float]:
        assert self.runner is not None
        ckpt = self.save()
        t0 = time.perf_counter()
        metrics = self.runner.run(ckpt, self.step)
        scalars = {k: v for k, v in metrics.items() if isinstance(v, int | float)}  # not per-episode lists
        for k, v in scalars.items():
            writer.add_scalar(f"eval/{k}", v, self.step)
        tqdm.write(
            f"[step {self.step}] eval: "
            + ", ".join(f"{k}={v:.3g}" for k, v in scalars.items())
            + f" ({time.perf_counter() - t0:.0f} s)"
        )
        return metrics

    def run(self) -> Path:
        """Train to ``steps`` (or ``stop_after`` / the time budget), saving ``checkpoints/last``.

        Raises:
            NonFiniteError: A loss, gradient or weight went NaN/inf: no weight moved at that step and
                nothing was saved, so ``checkpoints/last`` is the last good one; the message names both.
        """
        from torch.utils.tensorboard import SummaryWriter

        cfg, w = self.cfg, self.world
        # a resumed run logs from step + 1 on: events past the checkpoint (a crash after it) are dropped
        writer = SummaryWriter(str(self.out / "tb"), purge_step=self.step + 1) if w.main else _NoWriter()
        stop = min(cfg.steps, cfg.stop_after or cfg.steps)
        bar = tqdm(
            total=cfg.steps,
            initial=self.step,
            desc=f"train {cfg.algo['name']}",
            disable=not (cfg.progress and w.main),
            unit="step",
            dynamic_ncols=True,
        )
        smooth = None
        self.last_metrics: dict[str, float] = {}
        deadline = time.perf_counter() + 60 * cfg.max_minutes if cfg.max_minutes else float("inf")
        out_of_time = False
        doing = self.step  # the step being computed or saved, for the report of a non-finite stop
        waited = stepped = 0.0  # seconds drawing batches / whole steps (the loader's share of step time)
        steps_here = 0
        try:
            while self.step < stop:
                t_step = time.perf_counter()
                if cfg.max_minutes and not distributed.all_agree(time.perf_counter() <= deadline):
                    tqdm.write(f"time budget of {cfg.max_minutes} min reached at step {self.step}")
                    out_of_time = True
                    break
                self.policy.train()
                # the global batch, drawn alike by every rank; this rank's rows of it (all of it for one)
                batch = distributed.shard_rows(self.data.sample(cfg.batch_size, self.data_gen), w)
                batch = to_device(batch, cfg.device)
                waited += time.perf_counter() - t_step
                doing = self.step + 1
                with rows_of(w.rank, w.size):  # per-row noise drawn for the global batch too
                    metrics = self.algo.update(batch)  # raises before any weight moves on a NaN/inf
                if self.ema is not None:
                    self.ema.update(self.policy)
                self.step += 1
                smooth = metrics["loss"] if smooth is None else 0.95 * smooth + 0.05 * metrics["loss"]
                bar.update(1)
                bar.set_postfix(loss=f"{smooth:.4f}", lr=f"{metrics['lr']:.2e}")
                stepped += time.perf_counter() - t_step
                steps_here += 1
                if self.step % cfg.log_every == 0:
                    metrics["data_share"] = waited / max(stepped, 1e-9)  # waiting for data / step time
                    metrics = distributed.mean_metrics(metrics)  # the ranks' means (every rank calls)
                    for k, v in metrics.items():
                        writer.add_scalar(f"train/{k}", v, self.step)
                # the same steps on every rank (rank 0 alone evaluates; FSDP's save gathers from all)
                eval_step = bool(cfg.env.runner) and (
                    bool(cfg.env.every and self.step % cfg.env.every == 0) or self.step == cfg.steps
                )
                if eval_step and self.runner is not None:
                    self.last_metrics = self.evaluate(writer)
                elif eval_step or self.step % cfg.save_every == 0 or self.step == stop:
                    self.save()
            bar.close()
            if stepped > 0:
                tqdm.write(
                    f"data: {100 * waited / stepped:.1f}% of step time waiting for batches "
                    f"({1000 * stepped / max(1, steps_here):.0f} ms a step)"
                )
            if out_of_time and self.runner is not None:  # stopped by the budget: evaluate what we have
                self.last_metrics = self.evaluate(writer)
            else:
                self.save()
        except NonFiniteError as exc:
            raise self._stopped(doing, exc) from exc
        finally:
            bar.close()
            writer.close()
            if self.wandb is not None:
                self.wandb.finish()
        return self.last

    def _stopped(self, step: int, exc: NonFiniteError) -> NonFiniteError:
        """The one-line report of a run stopped by a non-finite loss, gradient or weight (nothing saved)."""
        if self.last.exists():
            at = f" (step {self._saved_step})" if self._saved_step >= 0 else ""
            kept = f"the last good checkpoint {self.last}{at} is kept as it was"
        else:
            kept = f"no checkpoint was written ({self.last} does not exist)"
        return NonFiniteError(
            f"step {step}: {exc}; training stopped without saving: {kept}; lower optim.lr or check the data"
        )


def train(
    cfg: TrainConfig,
    *,
    experiment: str | None = None,
    job: int | None = None,
    record: Callable[[Path], None] | None = None,
    rounds: Callable[[TrainConfig], Path] | None = None,
) -> Path:
    """Train (or resume) and return the final checkpoint folder; ``loop.rounds > 0`` runs ``rounds(cfg)``
    (closed-loop rounds: rollouts -> critic -> post-training -> evaluation) instead, in the same folder
    lock and log. :func:`training.run.train` (``vla-train``) passes :func:`training.closed_loop.run_rounds`,
    which this module does not import (closed_loop imports the :class:`Trainer`).

    ``out=None`` trains in a new folder named after ``experiment`` (else the algorithm) and the sweep's
    ``job`` (:func:`training.run_folder.default_out`). ``record(out)`` writes more files there once every
    check passed (``vla-train``: Hydra's ``.hydra/``); ``<out>/train.log`` gets what the run prints.
    """
    w = distributed.init(cfg.device)  # one process unless started by torchrun / accelerate launch
    distributed.check_batch(cfg.batch_size, w)
    if w.size > 1 and cfg.loop.rounds > 0:
        raise InputError(
            f"loop.rounds={cfg.loop.rounds} under a launcher ({w.size} processes): closed-loop rounds run in "
            "one process (vla-train without torchrun)"
        )
    cfg = with_run_folder(cfg, experiment, job)
    if w.size > 1:  # one run folder: rank 0's (out=None names it by the clock)
        cfg = dataclasses.replace(cfg, out=distributed.from_main(cfg.out))
    if cfg.loop.rounds > 0 and rounds is None:
        raise InputError(
            "loop.rounds > 0: call training.run.train (as vla-train does), not training.loop.train"
        )
    check_inputs(cfg)  # a refused input (or another run's folder) leaves nothing behind: no folder, no lock
    distributed.barrier()  # every rank has read the run folder before rank 0 writes to it
    out = run_dir(cfg)
    if not w.main:  # rank 0 holds the lock, writes the log, the record and the checkpoints, and prints
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                last = Trainer(cfg, inputs_checked=True).run()
        finally:
            shutil.rmtree(out / ".ranks" / str(w.rank), ignore_errors=True)
        distributed.barrier()  # rank 0 may still evaluate and save: leave together (not after a failure)
        return last
    what = "closed-loop post-training" if cfg.loop.rounds > 0 else "training"
    with folder_lock(out, what), run_log(out):  # two runs in one folder would overwrite each other's files
        print(f"run folder: {out}" + (f" ({w.size} data-parallel processes)" if w.size > 1 else ""))
        if record is not None:
            record(out)
        if rounds is not None and cfg.loop.rounds > 0:
            last = rounds(cfg)  # each round's Trainer checks its inputs again, the new rollouts included
        else:
            last = Trainer(cfg, inputs_checked=True).run()
        print(f"checkpoint: {last}")  # the run's last line, in train.log too
    if w.size > 1:
        distributed.barrier()  # the other ranks are done with their scratch folders
        shutil.rmtree(out / ".ranks", ignore_errors=True)
    return last
