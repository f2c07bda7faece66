"""The comparison's runs: the base(s), one lineage of closed-loop rounds per arm and seed, the cache.

For each base seed b (the base SFT trained from ``base_overrides``, or one given checkpoint) and training
seed s, every arm runs ``settings.rounds`` rounds of :func:`training.closed_loop.closed_loop` from that
base: round r's rollouts come from the arm's own round r-1 checkpoint, with the same simulated operator,
episode count and rollout seeds for every arm (``loop.rollout_seed`` depends on s only). Round 1's rollouts
are the base's, collected once per (b, s) and shared by its arms (``loop.base_rollouts_dir``); the seed's
first arm collects them, so the seed's other arms start after it.

With ``base_seeds`` = 2, base seed 1 runs the best baseline and the best method of base seed 0 (by final
success), so the record can say how much of the variance the base seed carries
(:func:`training.compare.stats.base_share`).

**Seeds**: evaluation and rollout seeds come from disjoint ranges per phase (:data:`PHASES`): ``tune`` for
choosing settings, ``report`` for records; overrides of the method presets (``extra``) are refused in the
report phase.

**Cache**: every folder is named by a hash of what made it: an arm's by its resolved training config and
the code version (:func:`vla.provenance.code_version`), the base likewise. An interrupted comparison
resumes: finished lineages are read back, an unfinished one resumes its rounds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import shutil
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from training.closed_loop import closed_loop, lineage_minutes
from training.compare import arms as arms_mod
from training.compare.stats import best, per_seed, row_metrics
from training.config import TrainConfig
from training.loop import Trainer, env_runner
from vla.hydra_utils import CONFIG_DIR
from vla.lock import folder_lock
from vla.provenance import code_version

PHASES = {"tune": {"eval": 30_000, "rollout": 300_000}, "report": {"eval": 40_000, "rollout": 400_000}}
WALL_FILE = "wall.json"  # how long the run that made a cached folder took


@dataclass
class Settings:
    """What every arm shares (the comparison's budget)."""

    rounds: int = 3
    steps: int = 400  # post-training steps per round
    rollouts: int = 30  # rollouts with the simulated operator per round
    eval_episodes: int = 100  # evaluation episodes of the final round (and of the base)
    round_eval_episodes: int = 30  # of the rounds before it
    horizon: int | None = None  # deploy.horizon in evaluations and rollouts (None: the presets')
    max_episodes: int | None = None  # data.max_episodes per data root (None: all)

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.steps < 1 or self.rollouts < 1 or self.eval_episodes < 1:
            raise ValueError(f"rounds, steps, rollouts and eval_episodes must be >= 1: {self}")


@dataclass
class CompareConfig:
    task: str  # the simulator's task the arms are evaluated and roll out on
    data: list[str]  # data roots every arm trains on (demos; each round adds its rollouts)
    arms: list[str]  # baselines and methods (training/compare/arms.py)
    out: str  # cache root
    base: str | None = None  # a base checkpoint; or None: train it with base_overrides
    base_overrides: list[str] = field(default_factory=list)  # vla-train overrides of the base SFT
    seeds: int = 3  # training seeds 0..seeds-1 per arm
    base_seeds: int = 1  # 2: a second base for the best baseline and the best method
    phase: str = "report"
    settings: Settings = field(default_factory=Settings)
    extra: list[str] = field(default_factory=list)  # overrides of the method arms' presets (tune phase)
    jobs: int = 1  # lineages side by side in worker processes
    threads: int = 1  # torch threads per lineage
    base_threads: int | None = None  # torch threads of the base SFT (alone; default: threads)
    device: str = "cpu"  # where training steps run (cpu, cuda; the record names the card)

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"phase={self.phase!r}: use one of {', '.join(PHASES)}")
        if self.extra and self.phase != "tune":
            raise ValueError(
                f"overrides of the method presets ({' '.join(self.extra)}) are for the tune phase; the "
                "report "
                "phase runs the preset files as they are"
            )
        if self.base is None and not self.base_overrides:
            raise ValueError("give a base checkpoint (base=) or the base SFT's overrides (base_overrides=)")
        if self.base is not None and self.base_seeds > 1:
            raise ValueError("base_seeds > 1 trains the bases: give base_overrides, not a base checkpoint")
        baselines, others = arms_mod.split(self.arms)
        if not baselines:
            raise ValueError(
                f"arms={self.arms}: name at least one baseline ({', '.join(arms_mod.BASELINES)})"
            )
        self.arms = [*baselines, *others]


def key(*parts: Any) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:10]


def compose_config(overrides: list[str]) -> TrainConfig:
    """``vla-train``'s config from ``overrides`` (as the command line would build it)."""
    from training.scripts.train import ConfigStore  # noqa: F401  (registers the train schema)

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        cfg = compose("train", overrides=overrides)
    return OmegaConf.to_object(cfg)  # type: ignore[return-value]


def config_hash(cfg: TrainConfig, code: str) -> str:
    """The resolved training config (without its output folder) and the code version."""
    d = asdict(cfg)
    d["out"] = ""
    return key(d, code)


def made(out: Path) -> dict[str, Any]:
    """How long the run that made ``out`` took and when it finished (UTC); None where not timed."""
    path = out / WALL_FILE
    if not path.exists():
        return {"wall_minutes": None, "finished": None}
    return {
        "wall_minutes": json.loads(path.read_text())["wall_minutes"],
        "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(path.stat().st_mtime)),
    }


def _timed(out: Path, fn: Callable[[], Any], compute: Callable[[], float | None] = lambda: None) -> None:
    """Run ``fn`` and write ``out``'s wall file: ``compute()`` minutes where it knows them (a lineage: the
    sum of its rounds, right across interruptions), else this call's; ``invocation_minutes``: this call's."""
    t0 = time.time()
    fn()
    here = round((time.time() - t0) / 60, 2)
    wall = compute()
    (out / WALL_FILE).write_text(
        json.dumps({"wall_minutes": here if wall is None else wall, "invocation_minutes": here})
    )


class Comparison:
    """One comparison: :meth:`run` returns the record (JSON-ready) of every lineage."""

    def __init__(self, cfg: CompareConfig, log: Callable[[str], None] = print) -> None:
        self.cfg = cfg
        self.log = log
        self.code = code_version()
        self.root = Path(cfg.out) / cfg.task

    # ---- the base ---------------------------------------------------------------------------------------
    def base(self, b: int) -> tuple[Path, bool]:
        """Base seed ``b``'s checkpoint (trained and cached when made from overrides) and whether this call
        trained it."""
        c = self.cfg
        if c.base is not None:
            return Path(c.base), False
        cfg = compose_config(
            [
                *c.base_overrides,
                f"data.roots=[{','.join(c.data)}]",
                *([f"data.max_episodes={c.settings.max_episodes}"] if c.settings.max_episodes else []),
                f"seed={b}",
                "env=none",
                "max_minutes=null",
                f"threads={c.base_threads or c.threads}",
                f"device={c.device}",
            ]
        )
        out = self.root / f"base_{config_hash(cfg, self.code)}"
        if (out / WALL_FILE).exists():  # written when training returned: an interrupted base is redone
            return out / "checkpoints" / "last", False
        with folder_lock(out, "the comparison's base SFT"):  # before anything is deleted
            shutil.rmtree(out, ignore_errors=True)
            self.log(f"base seed {b}: training the base SFT -> {out}")
            _timed(out, lambda: Trainer(dataclasses.replace(cfg, out=str(out))).run())
        return out / "checkpoints" / "last", True

    def phase_dir(self, ckpt: Path) -> Path:
        return self.root / f"{self.cfg.phase}_{key(str(ckpt), asdict(self.cfg.settings), self.cfg.data)}"

    def common(self, b: int, s: int, ckpt: Path) -> list[str]:
        """Every arm's overrides for base seed ``b`` and training seed ``s``."""
        c, st, phase = self.cfg, self.cfg.settings, PHASES[self.cfg.phase]
        return [
            f"init_from={ckpt}",
            f"data.roots=[{','.join(c.data)}]",
            *([f"data.max_episodes={st.max_episodes}"] if st.max_episodes else []),
            f"steps={st.steps}",
            f"threads={c.threads}",
            f"device={c.device}",
            "env=sim",
            f"env.task={c.task}",
            f"env.episodes={st.eval_episodes}",
            f"env.seed={phase['eval']}",
            "env.every=0",
            *([f"deploy.horizon={st.horizon}"] if st.horizon else []),
            f"loop.rounds={st.rounds}",
            f"loop.rollout_episodes={st.rollouts}",
            f"loop.round_eval_episodes={st.round_eval_episodes}",
            "loop.evaluate_base=false",  # evaluated once here, shared by every arm
            "loop.final_rollouts=true",  # the final checkpoint's takeovers per episode
            "max_minutes=null",
            f"seed={s}",
            f"loop.rollout_seed={phase['rollout'] + 10_000 * s}",
            f"loop.base_rollouts_dir='{self.seed_dir(b, s, ckpt) / 'rollouts_round1'}'",
        ]

    def seed_dir(self, b: int, s: int, ckpt: Path) -> Path:
        return self.phase_dir(ckpt) / f"seed_{s}"

    def base_eval(self, b: int, ckpt: Path) -> dict[str, Any]:
        """The base on the final round's evaluation episodes (once per base; every arm's row 0)."""
        path = self.phase_dir(ckpt) / "base_eval.json"
        if not path.exists():
            cfg = compose_config([*arms_mod.arm_overrides(self.cfg.arms[0]), *self.common(b, 0, ckpt)])
            path.parent.mkdir(parents=True, exist_ok=True)
            self.log(f"base seed {b}: evaluating the base on {cfg.env.episodes} episodes")
            t0 = time.time()
            result = env_runner(cfg, path.parent / "base").run(ckpt, 0)
            path.write_text(json.dumps({**result, "wall_minutes": round((time.time() - t0) / 60, 2)}))
        return json.loads(path.read_text())

    # ---- the lineages -----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        c = self.cfg
        bases: dict[int, dict[str, Any]] = {}
        cells: list[dict[str, Any]] = []
        for b in range(c.base_seeds):
            ckpt, trained = self.base(b)
            ev = self.base_eval(b, ckpt)
            bases[b] = {
                "checkpoint": str(ckpt),
                "trained_now": trained,
                **made(ckpt.parents[1]),
                "eval": row_metrics({"round": 0, **ev, "eval_episodes": c.settings.eval_episodes}),
                "eval_wall_minutes": ev.get("wall_minutes"),
            }
            self.log(f"base seed {b}: {bases[b]['eval']['success']:.0f}% success on the final evaluation")
            arms = c.arms if b == 0 else self.second_base_arms(cells)
            cells += self.lineages(b, ckpt, arms, bases[b]["eval"])
        return {"bases": bases, "cells": cells}

    def second_base_arms(self, cells: list[dict[str, Any]]) -> list[str]:
        """The best baseline and the best other arm of base seed 0, by final success."""
        rows = per_seed(cells, 0)
        baselines, others = arms_mod.split(self.cfg.arms)
        chosen = [best(rows, baselines, "success")] + ([best(rows, others, "success")] if others else [])
        self.log(f"second base seed: {', '.join(chosen)} (the best baseline and method of base seed 0)")
        return chosen

    def lineages(self, b: int, ckpt: Path, arms: list[str], base_row: dict[str, Any]) -> list[dict[str, Any]]:
        """Every (seed, arm) lineage of base seed ``b``, ``jobs`` at a time; a seed's first arm collects
        the round-1 rollouts the seed's other arms share, so those start after it."""
        jobs = {(s, a): (b, s, a, ckpt) for s in range(self.cfg.seeds) for a in arms}
        results: dict[tuple[int, str], dict[str, Any]] = {}
        if self.cfg.jobs <= 1:
            for s, a in jobs:
                results[s, a] = self.lineage(b, s, a, ckpt)
        else:
            ctx = multiprocessing.get_context("spawn")  # no fork of a process holding torch and GL state
            with ProcessPoolExecutor(max_workers=self.cfg.jobs, mp_context=ctx) as pool:
                pending: dict[Future, tuple[int, str]] = {}
                ready = [(s, arms[0]) for s in range(self.cfg.seeds)]
                while ready or pending:
                    while ready and len(pending) < self.cfg.jobs:  # the pool never holds a queue of its own
                        s, a = next_job(ready, arms[0])
                        ready.remove((s, a))
                        log = self.seed_dir(b, s, ckpt) / f"{a}.log"
                        self.log(f"== base {b} seed {s} {a}: started (log {log}) ==")
                        pending[pool.submit(_lineage_logged, self.cfg, b, s, a, str(ckpt), log)] = (s, a)
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in done:
                        s, a = pending.pop(fut)
                        results[s, a] = fut.result()
                        self.log(
                            f"== base {b} seed {s} {a}: {results[s, a]['rounds'][-1]['success']:.0f}% =="
                        )
                        if a == arms[0]:
                            ready += [(s, other) for other in arms[1:]]
        cells = [results[j] for j in jobs]
        for (
            cell
        ) in cells:  # row 0: the base's evaluation, with its takeovers from the shared round-1 rollouts
            cell["rounds"][0] = {**cell["rounds"][0], **{k: base_row[k] for k in _EVAL_KEYS}}
        return cells

    def lineage(self, b: int, s: int, arm: str, ckpt: Path) -> dict[str, Any]:
        """One arm's rounds from base ``b`` with seed ``s`` (cached under its config hash)."""
        overrides = [*arms_mod.arm_overrides(arm, self.cfg.extra), *self.common(b, s, ckpt)]
        cfg = compose_config(overrides)
        h = config_hash(cfg, self.code)
        out = self.seed_dir(b, s, ckpt) / f"{arm}_{h}"
        made_now = not complete(out, self.cfg.settings.rounds)
        if made_now:
            self.log(f"== base {b} seed {s} {arm} ({h}): {self.cfg.settings.rounds} rounds -> {out} ==")
            out.mkdir(parents=True, exist_ok=True)
            _timed(
                out,
                lambda: closed_loop(dataclasses.replace(cfg, out=str(out))),
                lambda: lineage_minutes(json.loads((out / "rounds.json").read_text())),
            )
        rows = json.loads((out / "rounds.json").read_text())
        return {
            "arm": arm,
            "base_seed": b,
            "seed": s,
            "config_hash": h,
            "out": str(out),
            "algo": cfg.algo["name"],
            "critic": dict(cfg.algo.get("critic", {})),
            "batch_size": cfg.batch_size,
            **made(out),
            "made_now": made_now,
            "rounds": [row_metrics(r) for r in rows if r["round"] <= self.cfg.settings.rounds],
        }


_EVAL_KEYS = ("success", "time_to_success", "per_1000_steps", "eval_episodes", "outcomes")


def complete(out: Path, rounds: int) -> bool:
    """Whether ``out`` holds a finished lineage: every round evaluated and the last one's takeovers."""
    path = out / "rounds.json"
    if not (out / WALL_FILE).exists() or not path.exists():
        return False
    rows = {r["round"]: r for r in json.loads(path.read_text())}
    return all("success_rate" in rows.get(r, {}) for r in range(1, rounds + 1)) and (
        "takeovers_per_episode" in rows[rounds]
    )


def _lineage_logged(cfg: CompareConfig, b: int, s: int, arm: str, ckpt: str, log: Path) -> dict[str, Any]:
    """:meth:`Comparison.lineage` in a worker process, its output to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as f, redirect_stdout(f), redirect_stderr(f):
        return Comparison(cfg).lineage(b, s, arm, Path(ckpt))


def next_job(ready: list[tuple[int, str]], first: str) -> tuple[int, str]:
    """The (seed, arm) to start next: a seed's first arm (it collects the rollouts that seed's other arms
    wait for), then the costliest (:data:`arms.COST`: a long arm started last runs alone at the end while
    the other core idles), then the order of ``ready``."""
    return min(ready, key=lambda job: (job[1] != first, -arms_mod.COST.get(job[1], 1.0)))


def rollout_roots(cell: dict[str, Any], rounds: int) -> list[Path]:
    """Rounds 1..``rounds``'s rollouts of a lineage, in the order its training data loads them."""
    out = Path(cell["out"])
    return [out.parent / "rollouts_round1", *(out / f"round_{r}" / "rollouts" for r in range(2, rounds + 1))]


def compare(
    cfg: CompareConfig, names: list[str] | None = None, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Run (or read back) every lineage of ``cfg``; returns the record without provenance: the settings,
    the bases, every cell with its rounds, each method's credit shares in the final round (``names``: one
    name per data root, for the shares' groups; default the roots' folder names) and the compute."""
    from training.compare.credit_share import credit_shares

    started = time.time()
    result = Comparison(cfg, log).run()
    names = names or [Path(d).name for d in cfg.data]
    n = cfg.settings.rounds
    for cell in result["cells"]:
        if cell["arm"] in arms_mod.BASELINES:
            continue
        cell["credit_shares"] = credit_shares(
            Path(cell["out"]),
            [*map(Path, cfg.data), *rollout_roots(cell, n)],
            [*names, *["rollouts"] * n],
            cfg.settings.max_episodes,
            cell["algo"],
            cell["batch_size"],
            round_=n,
        )
    cells = result["cells"]
    bases = result["bases"]
    return {
        "task": cfg.task,
        "phase": cfg.phase,
        "seeds": cfg.seeds,
        "base_seeds": cfg.base_seeds,
        "eval_seeds": PHASES[cfg.phase]["eval"],
        "rollout_seeds": PHASES[cfg.phase]["rollout"],
        "settings": asdict(cfg.settings),
        "arms": cfg.arms,
        "data": cfg.data,
        "base": cfg.base,
        "base_overrides": cfg.base_overrides,
        "extra": cfg.extra,
        "code_version": code_version(),
        "run": {
            "jobs": cfg.jobs,
            "threads": cfg.threads,
            "base_threads": cfg.base_threads or cfg.threads,
            "device": cfg.device,
            "device_name": _device_name(cfg.device),
        },
        "bases": bases,
        "cells": cells,
        # lineages this invocation found in the cache (made by an earlier one of the same code and config)
        "from_cache": [
            f"base{c['base_seed']}/seed_{c['seed']}/{c['arm']}" for c in cells if not c["made_now"]
        ],
        "compute_minutes": round(
            sum((b["wall_minutes"] or 0.0) + (b["eval_wall_minutes"] or 0.0) for b in bases.values())
            + sum(c["wall_minutes"] or 0.0 for c in cells),
            1,
        ),
        "invocation_minutes": round((time.time() - started) / 60, 2),
    }


def _device_name(device: str) -> str:
    """The accelerator's name for a CUDA device ("cpu" otherwise)."""
    if not device.startswith("cuda"):
        return "cpu"
    import torch

    return torch.cuda.get_device_name(torch.device(device))
