"""Plain LeRobot v3 datasets, written by lerobot's own API (no sidecar, no spec, no complementary_info):
read, checked, trained on (vla-train), post-trained with credit from a next.success column, replayed
(vla-replay), mapped onto the policy's inputs (data.keys), found offline by data.repo_id, never written."""

import hashlib
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import yaml

from policies.flow_matching import debug_config
from sim.replay import ReplayConfig, replay
from training.config import TrainConfig
from training.critic_replay import replay_through_critic
from training.data import DataConfig, KeyMap
from training.loop import Trainer, check_inputs
from vla.checks import check_dataset
from vla.data.reader import read_episode_info
from vla.data.validate import validate_dataset
from vla.errors import InputError

BIN = Path(sys.executable).parent
CAMS = ("agentview", "wrist")
EPISODES, FRAMES = 3, 20


def _write(root: Path, *, visual: str | None, extra: str | None, dim: int = 8, cams=CAMS) -> Path:
    """``EPISODES`` x ``FRAMES`` frames through LeRobotDataset.create / add_frame / save_episode / finalize.
    ``visual``: None (state only), "image" or "video" (32x32); ``extra``: "next.success", "next.reward"
    (episode 1 fails, the others succeed at their last frame) or None."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    vec = {"dtype": "float32", "shape": (dim,), "names": None}
    features = {"observation.state": vec, "action": dict(vec)}
    for cam in cams if visual else ():
        features[f"observation.images.{cam}"] = {
            "dtype": visual, "shape": (32, 32, 3), "names": ["height", "width", "channels"],
        }  # fmt: skip
    if extra:
        features[extra] = {
            "dtype": "bool" if extra == "next.success" else "float32",
            "shape": (1,),
            "names": None,
        }
    ds = LeRobotDataset.create(
        "local/plain", fps=10, features=features, root=root, use_videos=visual == "video"
    )
    rng = np.random.default_rng(0)
    home = np.array([0.0, -0.6, 0.0, -2.4, 0.0, 1.9, 0.8, 0.04], dtype=np.float32)[:dim]
    for e in range(EPISODES):
        for t in range(FRAMES):
            q = home + 0.01 * t + rng.normal(0, 0.005, dim).astype(np.float32)
            frame = {"observation.state": q, "action": q + 0.01, "task": "reach the cube"}
            for cam in cams if visual else ():
                frame[f"observation.images.{cam}"] = rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)
            done = t == FRAMES - 1 and e != 1
            if extra == "next.success":
                frame[extra] = np.array([done])
            elif extra == "next.reward":
                frame[extra] = np.array([1.0 if done else 0.0], dtype=np.float32)
            ds.add_frame(frame)
        ds.save_episode()
    ds.finalize()
    return root


def _snapshot(root: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``root``: path -> (size, sha256)."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plain")
    roots = {
        "state": _write(tmp / "state", visual=None, extra="next.success"),
        "images": _write(tmp / "images", visual="image", extra=None),
        "videos": _write(tmp / "videos", visual="video", extra="next.reward"),
        "so101": _write(tmp / "so101", visual="image", extra=None, dim=6, cams=("top",)),
    }
    before = {k: _snapshot(r) for k, r in roots.items()}
    yield roots
    for k, r in roots.items():  # nothing read, trained or replayed wrote into a user's dataset
        assert _snapshot(r) == before[k], f"{r} was modified"


def _cfg(roots, out, *, cameras=CAMS, algo=None, steps=2, **data) -> TrainConfig:
    cfg = TrainConfig(
        policy=asdict(debug_config(cameras=list(cameras))),
        algo=algo or {"name": "sft"},
        data=DataConfig(roots=[str(r) for r in roots], random_shift=0, **data),
        out=str(out),
        steps=steps,
        batch_size=4,
        threads=1,
        progress=False,
        control_hz=None,
    )
    cfg.optim.warmup_steps = 1
    return cfg


def test_episode_info_checks_and_validation_of_plain_datasets(plain):
    infos = {k: read_episode_info(r) for k, r in plain.items()}
    assert [i.success for i in infos["state"]] == [True, False, True]  # any next.success
    assert [i.success for i in infos["videos"]] == [True, False, True]  # max next.reward > 0
    assert [i.success for i in infos["images"]] == [None] * EPISODES  # unknown
    first = infos["images"][0]
    assert (first.length, first.source, first.task, first.extra) == (FRAMES, "demo", "reach the cube", {})
    for root in plain.values():
        assert check_dataset(root, profiles="hardware.profiles").num_frames == EPISODES * FRAMES
        assert validate_dataset(root, profiles="hardware.profiles").num_episodes == EPISODES


def test_vla_train_debug_on_a_plain_image_dataset(plain, tmp_path):
    out = tmp_path / "run"
    args = ["experiment=debug", f"data.roots=[{plain['images']}]", f"out={out}", "steps=2", "threads=1"]
    res = subprocess.run(
        [str(BIN / "vla-train"), *args, "progress=false"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert (out / "checkpoints/last/model.safetensors").is_file()


def test_a_plain_video_dataset_trains(plain, tmp_path):
    last = Trainer(_cfg([plain["videos"]], tmp_path / "videos", steps=1)).run()
    assert (last / "model.safetensors").is_file()


def test_state_only_sft_then_recap_from_next_success(plain, tmp_path):
    base = Trainer(_cfg([plain["state"]], tmp_path / "sft", cameras=())).run()
    assert (base / "model.safetensors").is_file()
    critic = {"steps": 5, "batch_size": 16, "bins": 11, "n_step": 3, "reward": {"t_max": FRAMES}}
    cfg = _cfg([plain["state"]], tmp_path / "recap", cameras=(), algo={"name": "recap", "critic": critic})
    cfg.init_from = str(base)
    last = Trainer(cfg).run()
    assert yaml.safe_load((last / "config.yaml").read_text())["inference_cond"] == 1
    assert (tmp_path / "recap/critic/labels.safetensors").is_file()
    plot = replay_through_critic(str(plain["state"]), str(tmp_path / "recap/critic"), str(tmp_path / "c.png"))
    assert plot.is_file()


def test_methods_refuse_labels_a_plain_dataset_lacks(plain, tmp_path):
    recap = {"name": "recap", "critic": {"steps": 1}}
    with pytest.raises(InputError, match=r"images: algo=recap needs episode success.*'next\.success'"):
        Trainer(_cfg([plain["images"]], tmp_path / "a", algo=recap))
    with pytest.raises(InputError, match=r"state: algo=apo needs human takeovers.*is_intervention"):
        Trainer(_cfg([plain["state"]], tmp_path / "b", cameras=(), algo={"name": "apo"}))
    with pytest.raises(InputError, match=r"images: data\.only_success=true needs episode success"):
        Trainer(_cfg([plain["images"]], tmp_path / "c", only_success=True))
    sft_i = {"name": "sft", "indicator": "success"}  # the RECAP-ready base: I = the episode's success
    with pytest.raises(InputError, match=r"images: algo=sft algo\.indicator=success needs episode success"):
        Trainer(_cfg([plain["images"]], tmp_path / "d", algo=sft_i))
    assert not any((tmp_path / d).exists() for d in "abcd")  # refused from the metadata, before any folder


def test_key_map_and_a_six_dim_state(plain, tmp_path):
    with pytest.raises(InputError) as refused:  # the policy's cameras, the data's, the override
        check_inputs(_cfg([plain["so101"]], tmp_path / "x", cameras=("agentview",)))
    assert str(refused.value).endswith(
        "policy reads cameras [agentview=observation.images.agentview] but the dataset's image features are "
        "[observation.images.top]: pass data.keys.image.agentview=observation.images.top"
    )
    keys = KeyMap(image={"agentview": "observation.images.top"})
    last = Trainer(_cfg([plain["so101"]], tmp_path / "so", cameras=("agentview",), keys=keys)).run()
    config = yaml.safe_load((last / "config.yaml").read_text())
    assert (config["state_dim"], config["action_dim"], config["cameras"]) == (6, 6, ["agentview"])


def test_repo_id_is_read_offline_from_the_local_caches(plain, tmp_path, monkeypatch):
    home = tmp_path / "lerobot_home"
    shutil.copytree(plain["state"], home / "someone/reach")
    snapshot = home / "hub/datasets--someone--cached/snapshots/0123abcd"  # a hub cache, as lerobot downloads
    shutil.copytree(plain["state"], snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs/main").write_text("0123abcd")
    monkeypatch.setenv("HF_LEROBOT_HOME", str(home))
    assert DataConfig(repo_id="someone/reach").resolved_roots() == [str(home / "someone/reach")]
    assert DataConfig(repo_id="someone/cached").resolved_roots() == [str(snapshot)]
    with pytest.raises(
        InputError, match=rf"data\.repo_id=someone/none: not found offline; searched {home}/some"
    ):
        DataConfig(repo_id="someone/none").resolved_roots()
    last = Trainer(_cfg([], tmp_path / "run", cameras=(), steps=1, repo_id="someone/reach")).run()
    assert (last / "model.safetensors").is_file()


def test_vla_replay_of_a_plain_dataset(plain, tmp_path):
    with pytest.raises(InputError, match=r"holds no sim task .* pass task=<name>"):
        replay(ReplayConfig(dataset=str(plain["state"]), progress=False))
    with pytest.raises(InputError, match=r"so101: field 'observation.state' has 6 values"):
        replay(ReplayConfig(dataset=str(plain["so101"]), task="reach", progress=False))
    sheet = tmp_path / "sheet.png"
    args = [f"dataset={plain['images']}", "task=reach", f"sheet={sheet}", "progress=false"]
    res = subprocess.run([str(BIN / "vla-replay"), *args], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "not the recorded scene" in res.stdout
    assert res.stdout.splitlines()[-1].startswith("replay success: ") and res.stdout.endswith(
        f"/{EPISODES}\n"
    )
    assert sheet.is_file()
