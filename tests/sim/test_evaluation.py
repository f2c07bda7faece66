"""Evaluation harness: Wilson intervals, config/checkpoint errors, end-to-end runs in spawned workers, CLI."""

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import av
import pytest

import sim
from sim.env import EnvConfig
from sim.evaluation import EvalConfig, evaluate, wilson_interval
from sim.robostress import StressConfig
from sim.robots.panda import PANDA
from sim.tasks.base import OPEN
from vla.errors import InputError
from vla.runtime.compensation import CompensationConfig, SelfCompensator
from vla.runtime.config import AsyncConfig, DeployConfig, ExecutorConfig, RTCConfig
from vla.runtime.safety import SafetyConfig

RUNTIME_TESTS = (
    Path(__file__).resolve().parents[1] / "runtime"
)  # holds dummy_policy.py (tests/ is no package)
sys.path.insert(0, str(RUNTIME_TESTS))
from dummy_policy import HomePolicy  # noqa: E402

BIN = Path(sys.executable).parent
HOME = [*PANDA.home, OPEN]  # the robot never moves: reach cannot succeed


@pytest.fixture
def worker_path(monkeypatch):
    """Spawned workers find ``dummy_policy`` (spawn also passes sys.path on; PYTHONPATH covers the CLI)."""
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(RUNTIME_TESTS), os.environ.get("PYTHONPATH")]))
    )


@pytest.fixture(scope="module")
def home_ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "home"
    HomePolicy(HOME, chunk_size=10, noise_std=0.01).save(path)
    return path


def _cfg(ckpt, out, horizon=3, temporal_ensemble=None, **kw) -> EvalConfig:
    kw = {"task": "reach", "episodes": 4, "workers": 2, "videos": 2, **kw}
    executor = ExecutorConfig(temporal_ensemble=temporal_ensemble)
    kw["deploy"] = kw.get("deploy") or DeployConfig(horizon=horizon, executor=executor)
    return EvalConfig(
        checkpoint=str(ckpt),
        out=str(out),
        imports=["dummy_policy"],
        env=EnvConfig(image_size=(32, 32)),
        progress=False,
        **kw,
    )


# ---- Wilson score interval ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("k", "n", "lo", "hi"),
    [
        (8, 10, 0.4902, 0.9433),  # p=0.8: center 0.71674, half 0.22657
        (0, 4, 0.0, 0.4899),  # k=0: lo exactly 0, hi = z²/(n+z²) = 3.8416/7.8416
        (4, 4, 0.5101, 1.0),
        (0, 10, 0.0, 0.2775),
        (5, 10, 0.2366, 0.7634),
    ],
)
def test_wilson_interval_hand_computed(k, n, lo, hi):
    got = wilson_interval(k, n)
    assert got == pytest.approx((lo, hi), abs=1e-4)
    assert 0.0 <= got[0] <= k / n <= got[1] <= 1.0


def test_wilson_interval_edges_and_symmetry():
    assert wilson_interval(0, 7)[0] == 0.0 and wilson_interval(7, 7)[1] == 1.0
    lo, hi = wilson_interval(3, 11)
    assert wilson_interval(8, 11) == pytest.approx((1 - hi, 1 - lo))
    assert wilson_interval(0, 4)[1] == pytest.approx(1.96**2 / (4 + 1.96**2))
    for k, n in [(-1, 3), (4, 3), (0, 0)]:
        with pytest.raises(ValueError):
            wilson_interval(k, n)


# ---- errors before any worker starts ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kw", "err", "match"),
    [
        ({"episodes": 0}, ValueError, "episodes=0 must be >= 1"),
        ({"episodes": -3}, ValueError, "episodes=-3"),
        ({"task": "nope"}, KeyError, "unknown task 'nope'"),
        ({"workers": -1}, ValueError, "workers=-1"),
        ({"horizon": 0}, ValueError, "horizon=0 must be >= 1"),
        ({"cond": 3}, ValueError, "cond=3"),
        ({"temporal_ensemble": 0.01, "horizon": 3}, ValueError, "horizon=3 must be 1"),
    ],
)
def test_config_errors(tmp_path, kw, err, match):
    with pytest.raises(err, match=match):
        _cfg(tmp_path, tmp_path / "out", **kw)


def test_checkpoint_is_required():
    with pytest.raises(ValueError, match="checkpoint=<folder> is required"):
        EvalConfig(task="reach")


def test_bad_checkpoint_folders(tmp_path, home_ckpt):
    """Refused before any worker starts, with one line naming the file (vla.checks)."""
    out = tmp_path / "out"
    with pytest.raises(InputError, match="missing: checkpoint folder not found"):
        evaluate(_cfg(tmp_path / "missing", out))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match=r"config\.yaml: missing; not a checkpoint folder"):
        evaluate(_cfg(empty, out))
    (empty / "config.yaml").write_text("chunk_size: 3\n")
    with pytest.raises(InputError, match="field 'type' naming the policy is missing"):
        evaluate(_cfg(empty, out))
    (empty / "config.yaml").write_text("type: test_home\n")
    with pytest.raises(InputError, match=r"model\.safetensors: missing"):
        evaluate(_cfg(empty, out))
    with pytest.raises(InputError, match="cannot import 'no_such_module'"):
        evaluate(EvalConfig(checkpoint=str(home_ckpt), task="reach", imports=["no_such_module"]))
    assert not out.exists()  # nothing written


# ---- end to end -----------------------------------------------------------------------------------------
def test_evaluate_two_workers_constant_policy_on_reach(tmp_path, home_ckpt, worker_path):
    out = tmp_path / "eval"
    res = evaluate(_cfg(home_ckpt, out))
    assert (res.successes, res.n, res.workers) == (0, 4, 2)
    assert res.ci95 == pytest.approx((0.0, 0.4899), abs=1e-4)
    assert [e.seed for e in res.episodes] == [0, 1, 2, 3]
    for e in res.episodes:
        assert e.length == 80  # reach's limit: the robot never moves
        assert e.policy_calls == math.ceil(e.length / 3)
        assert e.mujoco_gl == sim.GL_BACKEND  # inherited through the environment
        assert e.pid != os.getpid()
    report = json.loads((out / "eval.json").read_text())
    assert report["config"]["checkpoint"] == str(home_ckpt) and report["config"]["deploy"]["horizon"] == 3
    s = report["summary"]
    assert (s["successes"], s["episodes"], s["success_rate"]) == (0, 4, 0.0)
    assert s["ci95"][0] == 0.0 and s["ci95"][1] == pytest.approx(0.4899, abs=1e-4)
    assert (s["mean_length"], s["policy_calls_per_episode"], s["horizon"], s["chunk_size"]) == (80, 27, 3, 10)
    assert s["policy_type"] == "test_home" and s["wall_s"] > 0
    assert [e["index"] for e in report["episodes"]] == [0, 1, 2, 3]
    videos = sorted((out / "videos").glob("*.mp4"))
    assert [v.name for v in videos] == ["episode_000.mp4", "episode_001.mp4"] and res.videos == videos
    with av.open(str(videos[0])) as f:
        stream = f.streams.video[0]
        assert (stream.width, stream.height) == (64, 32)  # both cameras side by side
        assert sum(1 for _ in f.decode(stream)) == 81  # the reset observation + one per step
    assert "| reach | test_home | 4 | 0/4 (0.0%) | [0.000, 0.490] | 80.0 | 27.0 | 3 / 10 |" in res.table()

    # the same episodes in this process give the same episodes (seeds do not depend on workers)
    inline = evaluate(_cfg(home_ckpt, tmp_path / "inline", workers=0, videos=0))
    key = [(e.seed, e.instruction, e.length, e.policy_calls, e.success) for e in inline.episodes]
    assert key == [(e.seed, e.instruction, e.length, e.policy_calls, e.success) for e in res.episodes]


def test_worker_errors_reach_the_parent(tmp_path, worker_path):
    ckpt = tmp_path / "nan"
    HomePolicy(HOME, chunk_size=4, nan_at_call=2).save(ckpt)
    with pytest.raises(ValueError, match=r"policy call 2 .*non-finite"):
        evaluate(_cfg(ckpt, tmp_path / "out", episodes=2, workers=1, horizon=4))


def test_cli_prints_table_and_success_last(tmp_path, home_ckpt, worker_path):
    out = tmp_path / "cli"
    res = subprocess.run(
        [
            str(BIN / "vla-eval"),
            f"checkpoint={home_ckpt}",
            "task=reach",
            "episodes=2",
            "workers=0",
            "deploy.horizon=10",
            "videos=1",
            f"out={out}",
            "imports=[dummy_policy]",
            "env.image_size=[24,24]",
            "progress=false",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[-1] == "success: 0/2"
    assert any(line.startswith("| reach | test_home | 2 | 0/2") for line in lines)
    assert (out / "eval.json").exists() and (out / "videos" / "episode_000.mp4").exists()
    assert json.loads((out / "eval.json").read_text())["summary"]["policy_calls_per_episode"] == 8


def test_evaluate_fresh_flow_matching_policy_with_temporal_ensembling(tmp_path):
    """The real policy, loaded by registry name in a spawned worker with the default ``imports``."""
    pytest.importorskip("policies.flow_matching")
    import torch

    from policies.flow_matching import FlowMatchingPolicy, debug_config

    torch.manual_seed(0)
    ckpt = FlowMatchingPolicy(debug_config(num_steps=2)).save(tmp_path / "fm")
    cfg = EvalConfig(
        checkpoint=str(ckpt),
        task="reach",
        episodes=2,
        workers=1,
        deploy=DeployConfig(executor=ExecutorConfig(temporal_ensemble=0.01)),
        videos=1,
        out=str(tmp_path / "out"),
        env=EnvConfig(image_size=(32, 32)),
        progress=False,
    )
    res = evaluate(cfg)
    assert res.n == 2 and res.policy_type == "flow_matching" and len(res.videos) == 1
    for e in res.episodes:
        assert (e.horizon, e.chunk_size) == (1, 8)
        assert e.policy_calls == e.length  # temporal ensembling samples every step
        assert e.mujoco_gl == sim.GL_BACKEND


def test_runtime_options_run_through_the_evaluation(home_ckpt, tmp_path, worker_path):
    """RoboStress + self-compensation + async inference with RTC + the safety layer in one run."""
    deploy = DeployConfig(
        horizon=3,
        async_inference=AsyncConfig(enabled=True, simulated_delay=2),
        rtc=RTCConfig(enabled=True),
        compensation=CompensationConfig(enabled=True),
        safety=SafetyConfig(mode="hold"),
    )
    cfg = _cfg(
        home_ckpt,
        tmp_path / "rt",
        episodes=2,
        workers=0,
        videos=0,
        stress=StressConfig("all", 0.5),
        deploy=deploy,
    )
    result = evaluate(cfg)
    assert result.n == 2 and all(e.jerk >= 0 for e in result.episodes)
    assert result.summary()["mean_jerk"] >= 0
    # the home policy's noisy commands (0.01 rad per step, the gripper's beyond its range) are normal
    # motion: the safety layer passes them (the gripper target is clipped to the hand's range)
    assert result.holds == 0 and result.summary()["safety_holds"] == 0
    assert all(e.fault is None for e in result.episodes)
    with pytest.raises(ValueError, match="scenarios"):
        _cfg(home_ckpt, tmp_path, stress=StressConfig("rust"))
    with pytest.raises(ValueError, match="safety"):
        SafetyConfig(mode="maybe")
    with pytest.raises(ValueError, match=r"rtc\.enabled needs async"):
        DeployConfig(rtc=RTCConfig(enabled=True))
    up = DeployConfig(upcycling=replace(DeployConfig().upcycling, enabled=True))
    with pytest.raises(FileNotFoundError, match=r"upcycling\.json"):
        evaluate(_cfg(home_ckpt, tmp_path / "up", episodes=1, workers=0, videos=0, deploy=up))


def test_compensator_is_saved_and_reloaded_between_runs(home_ckpt, tmp_path, worker_path):
    """compensation=true pools the workers' models into <out>/compensator.json; compensator=<file> starts
    the next run from it (compensated from the first step) and keeps learning."""
    on = DeployConfig(horizon=3, compensation=CompensationConfig(enabled=True))
    first = evaluate(
        _cfg(
            home_ckpt,
            tmp_path / "a",
            episodes=2,
            workers=2,
            videos=0,
            stress=StressConfig("backlash"),
            deploy=on,
        )
    )
    saved = first.config.out_dir / "compensator.json"
    comp = SelfCompensator.load(saved)
    assert comp.fits >= 1 and comp.samples == sum(e.length for e in first.episodes)
    assert not (first.config.out_dir / "compensation").exists()  # the per-worker files are pooled away
    second = evaluate(
        _cfg(
            home_ckpt,
            tmp_path / "b",
            episodes=1,
            workers=0,
            videos=0,
            stress=StressConfig("backlash"),
            deploy=DeployConfig(
                horizon=3,
                compensation=CompensationConfig(enabled=True, load=str(saved), trust_region=0.05),
            ),
        )
    )
    assert SelfCompensator.load(second.config.out_dir / "compensator.json").cfg.trust_region == 0.05
    assert SelfCompensator.load(second.config.out_dir / "compensator.json").samples == min(
        comp.samples + second.episodes[0].length, comp.cfg.buffer
    )
    with pytest.raises(ValueError, match=r"needs compensation\.enabled=true"):
        CompensationConfig(enabled=False, load=str(saved))


def test_cli_runs_without_out_land_in_a_folder_each(tmp_path, home_ckpt, worker_path):
    """Without ``out=`` every evaluation gets its own folder (``outputs/eval/<date>/<time>_<task>``), so the
    next checkpoint's evaluation does not overwrite this one's report."""
    args = [f"checkpoint={home_ckpt}", "task=reach", "episodes=1", "workers=0", "videos=0"]
    args += ["imports=[dummy_policy]", "env.image_size=[24,24]", "progress=false"]
    reports = []
    for _ in range(2):
        res = subprocess.run(
            [str(BIN / "vla-eval"), *args], capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
        assert res.returncode == 0, res.stdout + res.stderr
        reports += [line.removeprefix("report: ") for line in res.stdout.splitlines() if "report: " in line]
        time.sleep(1.0)  # the folder names carry the time to the second
    assert len(reports) == 2 and reports[0] != reports[1], reports
    for report in reports:
        path = Path(report)
        assert path.is_file() and path.parent.name.endswith("_reach")
        assert path.parent.parent.parent == (tmp_path / "outputs" / "eval").resolve()
