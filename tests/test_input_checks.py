"""Inputs are checked at every entry: vla-train, vla-eval, vla-rollout and vla-replay refuse a corrupt dataset
(down to an impossible joint value or a video that does not decode) or checkpoint before any work (exit 2, one
line on stderr naming the file and the episode or field, no output folder, input bytes unchanged), the
validator prints one ``ERROR:`` line, and a non-finite loss stops training with the last good checkpoint kept.

Each CLI start costs seconds (vla-rollout ~10 s: it imports lerobot), so the subprocess tests cover each CLI
with the corruptions that matter to it; the full matrix of corruptions runs through the check functions the
CLIs call (``vla.checks``, ``training.loop.check_inputs``).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from safetensors.torch import load_file, save_file

from policies.flow_matching import FlowMatchingPolicy, debug_config
from training.algorithms.base import GradientAlgorithm, OptimConfig
from training.config import TrainConfig
from training.critics import CRITICS
from training.data import ChunkDataset, DataConfig
from training.loop import Trainer, check_inputs
from vla.checks import check_checkpoint, check_dataset, read_safetensors_header
from vla.data import DatasetError, EpisodeSpec, EpisodeWriter
from vla.data.schema import SIDECAR_FILE
from vla.errors import InputError, NonFiniteError

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "training"))
sys.path.insert(0, str(TESTS / "runtime"))
from dummy_policy import HomePolicy  # noqa: E402
from toy_episodes import SPEC, toy_frame, write_toy_episodes  # noqa: E402

BIN = Path(sys.executable).parent
DATA_FILE = "data/chunk-000/file-{:03d}.parquet"


def tree_hash(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path -> sha256): equal before and after = nothing written."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# ---- corruptions: each edits a copy in place and returns (the file, what the message must also name) ---
def _rewrite_column(path: Path, key: str, frame: int, value: float) -> None:
    table = pq.read_table(path)
    rows = table.column(key).to_pylist()
    if isinstance(rows[frame], list):
        rows[frame][0] = value
    else:  # a (1,)-feature stored as a scalar column
        rows[frame] = value
    col = pa.array(rows, type=table.schema.field(key).type)
    pq.write_table(table.set_column(table.schema.get_field_index(key), key, col), path)


def nan_action(root: Path) -> tuple[Path, str]:
    path = root / DATA_FILE.format(1)
    _rewrite_column(path, "action", 2, float("nan"))
    return path, "episode 1: field 'action' has NaN/inf at frame 2"


def rows_removed(root: Path) -> tuple[Path, str]:
    path = root / DATA_FILE.format(1)
    table = pq.read_table(path)
    pq.write_table(table.filter(pc.not_equal(table.column("episode_index"), 1)), path)
    return path, "episode 1: 0 frames but metadata length"


def truncated_parquet(root: Path) -> tuple[Path, str]:
    path = root / DATA_FILE.format(2)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path, "unreadable data file"


def impossible_action(root: Path) -> tuple[Path, str]:
    path = root / DATA_FILE.format(1)
    _rewrite_column(path, "action", 2, 1e6)  # one arm joint at 1e6 rad
    return path, "episode 1: field 'action'[0] = 1e+06 at frame 2 is outside"


def garbled_video(root: Path) -> tuple[Path, str]:
    """A video file that exists but whose bytes past the header are garbage (a ``video_data`` copy)."""
    path = root / "videos/observation.images.wrist/chunk-000/file-001.mp4"
    data = bytearray(path.read_bytes())
    data[64:] = np.random.default_rng(0).integers(0, 256, len(data) - 64, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(data))
    return path, "episode 1: field 'observation.images.wrist': video file cannot be opened"


def inf_reward(root: Path) -> tuple[Path, str]:
    path = root / DATA_FILE.format(0)
    _rewrite_column(path, "next.reward", 1, float("inf"))
    return path, "episode 0: field 'next.reward' has NaN/inf at frame 1"


def column_dropped(root: Path) -> tuple[Path, str]:
    path = root / DATA_FILE.format(3)
    table = pq.read_table(path)
    pq.write_table(table.drop_columns(["observation.state"]), path)
    return path, "field 'observation.state' declared in info.json but absent"


def data_file_missing(root: Path) -> tuple[Path, str]:
    path = root / DATA_FILE.format(2)
    path.unlink()
    return path, "missing data file of episode(s) [2]"


def info_missing(root: Path) -> tuple[Path, str]:
    path = root / "meta/info.json"
    path.unlink()
    return path, "missing"


def sidecar_torn(root: Path) -> tuple[Path, str]:
    path = root / SIDECAR_FILE
    with open(path, "ab") as f:
        f.write(b'{"episode_index": 4, "len')
    return path, "torn trailing line"


DATASET_CORRUPTIONS = {
    f.__name__: f for f in (nan_action, rows_removed, truncated_parquet, impossible_action)
}
MORE_DATASET_CORRUPTIONS = {
    f.__name__: f for f in (inf_reward, column_dropped, data_file_missing, info_missing, sidecar_torn)
}


def _tensors(path: Path) -> dict[str, torch.Tensor]:
    """Copies of a safetensors file's tensors (load_file maps the file: rewriting it under live tensors
    would crash the process with SIGBUS)."""
    return {k: v.clone() for k, v in load_file(str(path)).items()}


def pickle_model(ckpt: Path) -> tuple[Path, str]:
    path = ckpt / "model.safetensors"
    torch.save(_tensors(path), path)  # a torch pickle archive under the safetensors name
    return path, "not a safetensors file"


def unknown_field(ckpt: Path) -> tuple[Path, str]:
    path = ckpt / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["d_modle"] = 64
    path.write_text(yaml.safe_dump(config))
    return path, "field 'd_modle'"


def wrong_shape(ckpt: Path) -> tuple[Path, str]:
    path = ckpt / "model.safetensors"
    state = _tensors(path)
    state["action_out.weight"] = torch.zeros(9, state["action_out.weight"].shape[1])
    save_file(state, str(path))
    return path, "tensor 'action_out.weight' has shape [9, 48]"


def truncated_model(ckpt: Path) -> tuple[Path, str]:
    path = ckpt / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 100])
    return path, "truncated"


def header_too_large(ckpt: Path) -> tuple[Path, str]:
    path = ckpt / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes((1 << 40).to_bytes(8, "little") + data[8:])
    return path, "header length 1099511627776"


def tensor_missing(ckpt: Path) -> tuple[Path, str]:
    path = ckpt / "model.safetensors"
    state = _tensors(path)
    del state["action_out.bias"]
    save_file(state, str(path))
    return path, "tensor 'action_out.bias'"


def stats_truncated(ckpt: Path) -> tuple[Path, str]:
    path = ckpt / "stats.safetensors"
    path.write_bytes(path.read_bytes()[:20])
    return path, "not a safetensors file"


def nan_weights(ckpt: Path) -> tuple[Path, str]:
    path = ckpt / "model.safetensors"
    state = _tensors(path)
    state["action_out.weight"][0, 0] = float("nan")
    save_file(state, str(path))
    return path, "tensor 'action_out.weight' holds NaN/inf"


def stats_missing(ckpt: Path) -> tuple[Path, str]:
    path = ckpt / "stats.safetensors"
    path.unlink()
    return path, "missing"


def config_not_yaml(ckpt: Path) -> tuple[Path, str]:
    path = ckpt / "config.yaml"
    path.write_text("type: [flow_matching\n")
    return path, "not valid YAML"


def unknown_type(ckpt: Path) -> tuple[Path, str]:
    path = ckpt / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["type"] = "flow_matchin"
    path.write_text(yaml.safe_dump(config))
    return path, "'flow_matchin' is not a registered policy"


CHECKPOINT_CORRUPTIONS = {f.__name__: f for f in (pickle_model, unknown_field, wrong_shape)}
MORE_CHECKPOINT_CORRUPTIONS = {
    f.__name__: f
    for f in (
        truncated_model,
        header_too_large,
        tensor_missing,
        stats_truncated,
        nan_weights,
        stats_missing,
        config_not_yaml,
        unknown_type,
    )
}


# ---- fixtures ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def good_data(tmp_path_factory) -> Path:
    """Four toy episodes (one data file each), cameras and sizes of ``debug_config()``."""
    return write_toy_episodes(tmp_path_factory.mktemp("data") / "toy", n=4)


@pytest.fixture(scope="module")
def video_data(tmp_path_factory) -> Path:
    """Three toy-like episodes of 4 frames, the cameras as mp4 videos (one file per episode and camera)."""
    root = tmp_path_factory.mktemp("video") / "toy"
    rng = np.random.default_rng(0)
    with EpisodeWriter(root, EpisodeSpec(**{**asdict(SPEC), "use_videos": True})) as w:
        for _ in range(3):
            for i in range(4):
                img = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
                state, action = rng.normal(0, 0.5, (2, 8)).astype(np.float32)
                w.add_frame(toy_frame(img, state, action, False, float(i == 3), i == 3, "toy task"))
            w.end_episode(success=True, source="scripted")
    return root


@pytest.fixture(scope="module")
def good_ckpt(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ckpt") / "fm"
    FlowMatchingPolicy(debug_config()).save(path)
    return path


def _bad_copy(good: Path, corrupt, dest: Path) -> tuple[Path, Path, str]:
    root = dest / corrupt.__name__
    shutil.copytree(good, root)
    path, detail = corrupt(root)
    return root, path, detail


def _cli(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / name), *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def _assert_refused(res: subprocess.CompletedProcess, path: Path, detail: str, status: int = 2) -> None:
    lines = res.stderr.strip().splitlines()
    assert res.returncode == status, res.stdout + res.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr  # one line, no traceback
    assert "Traceback" not in res.stdout + res.stderr
    assert str(path) in lines[0] and detail in lines[0], lines[0]


# ---- the CLIs ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", DATASET_CORRUPTIONS)
def test_vla_train_refuses_a_bad_dataset(kind, good_data, tmp_path):
    root, path, detail = _bad_copy(good_data, DATASET_CORRUPTIONS[kind], tmp_path)
    before = tree_hash(root)
    out = tmp_path / "out"
    res = _cli("vla-train", "experiment=debug", f"data.roots=[{root}]", f"out={out}", cwd=tmp_path)
    _assert_refused(res, path, detail)
    assert not out.exists() and tree_hash(root) == before
    assert not (tmp_path / ".out.lock").exists()  # no lock file beside the folder either


@pytest.mark.parametrize("cli", ["vla-eval", "vla-rollout"])
def test_a_missing_checkpoint_argument_is_one_line(cli, tmp_path):
    res = _cli(cli, "task=reach", "episodes=1", cwd=tmp_path)
    _assert_refused(res, Path("checkpoint="), "is required")
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("kind", CHECKPOINT_CORRUPTIONS)
def test_vla_train_refuses_a_bad_init_from(kind, good_data, good_ckpt, tmp_path):
    ckpt, path, detail = _bad_copy(good_ckpt, CHECKPOINT_CORRUPTIONS[kind], tmp_path)
    before = tree_hash(ckpt)
    out = tmp_path / "out"
    args = ["experiment=debug", f"data.roots=[{good_data}]", f"init_from={ckpt}", f"out={out}"]
    _assert_refused(_cli("vla-train", *args, cwd=tmp_path), path, detail)
    assert not out.exists() and tree_hash(ckpt) == before


@pytest.mark.parametrize("kind", CHECKPOINT_CORRUPTIONS)
def test_vla_eval_refuses_a_bad_checkpoint(kind, good_ckpt, tmp_path):
    ckpt, path, detail = _bad_copy(good_ckpt, CHECKPOINT_CORRUPTIONS[kind], tmp_path)
    before = tree_hash(ckpt)
    out = tmp_path / "eval"
    res = _cli("vla-eval", f"checkpoint={ckpt}", "episodes=1", "workers=0", f"out={out}", cwd=tmp_path)
    _assert_refused(res, path, detail)
    assert not out.exists() and tree_hash(ckpt) == before


def test_vla_rollout_refuses_a_bad_checkpoint(good_ckpt, tmp_path):
    ckpt, path, detail = _bad_copy(good_ckpt, wrong_shape, tmp_path)
    before = tree_hash(ckpt)
    out = tmp_path / "rollouts"
    res = _cli("vla-rollout", f"checkpoint={ckpt}", "episodes=1", "workers=0", f"out={out}", cwd=tmp_path)
    _assert_refused(res, path, detail)
    assert not out.exists() and tree_hash(ckpt) == before


def test_vla_rollout_refuses_to_resume_a_bad_dataset(good_ckpt, good_data, tmp_path):
    root, path, detail = _bad_copy(good_data, rows_removed, tmp_path)
    before = tree_hash(root)
    args = [f"checkpoint={good_ckpt}", "episodes=1", "workers=0", f"out={root}", "resume=true"]
    _assert_refused(_cli("vla-rollout", *args, cwd=tmp_path), path, detail)
    assert tree_hash(root) == before


@pytest.mark.parametrize("kind", DATASET_CORRUPTIONS)
def test_vla_replay_refuses_a_bad_dataset(kind, good_data, tmp_path):
    root, path, detail = _bad_copy(good_data, DATASET_CORRUPTIONS[kind], tmp_path)
    before = tree_hash(root)
    sheet = tmp_path / "replay" / "sheet.png"
    res = _cli("vla-replay", f"dataset={root}", f"sheet={sheet}", "progress=false", cwd=tmp_path)
    _assert_refused(res, path, detail)
    assert not sheet.parent.exists() and tree_hash(root) == before


@pytest.mark.parametrize("cli", ["vla-train", "vla-replay"])
def test_vla_train_and_vla_replay_refuse_a_garbled_video(cli, video_data, tmp_path):
    root, path, detail = _bad_copy(video_data, garbled_video, tmp_path)
    before = tree_hash(root)
    out = tmp_path / "out"
    args = {
        "vla-train": ["experiment=debug", f"data.roots=[{root}]", f"out={out}"],
        "vla-replay": [f"dataset={root}", f"sheet={out / 'sheet.png'}", "progress=false"],
    }[cli]
    _assert_refused(_cli(cli, *args, cwd=tmp_path), path, detail)
    assert not out.exists() and tree_hash(root) == before


@pytest.mark.parametrize("kind", ["impossible_action", "garbled_video"])
def test_the_validator_refuses_an_impossible_action_and_a_garbled_video(
    kind, good_data, video_data, tmp_path
):
    corrupt = {"impossible_action": impossible_action, "garbled_video": garbled_video}[kind]
    root, path, detail = _bad_copy(video_data if kind == "garbled_video" else good_data, corrupt, tmp_path)
    res = subprocess.run(
        [sys.executable, "-m", "vla.data.validate", str(root)], capture_output=True, text=True, timeout=300
    )
    lines = res.stdout.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1 and lines[0].startswith("ERROR: "), res.stdout + res.stderr
    assert str(path) in lines[0] and detail in lines[0], lines[0]
    assert "Traceback" not in res.stderr, res.stderr


def test_check_dataset_accepts_a_video_dataset(video_data):
    assert check_dataset(video_data).num_frames == 12


def test_vla_train_stops_on_a_non_finite_loss_and_keeps_the_last_checkpoint(good_data, tmp_path):
    out = tmp_path / "run"
    common = ["experiment=debug", f"data.roots=[{good_data}]", f"out={out}", "progress=false"]
    res = _cli("vla-train", *common, "steps=2", "save_every=2", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    last = out / "checkpoints/last"
    before = tree_hash(last)
    # lr 1e30: the first step throws the weights to ~1e29, the second step's loss is NaN
    diverging = ["steps=6", "save_every=100", "resume=false", "optim.lr=1e30"]
    res = _cli("vla-train", *common, *diverging, cwd=tmp_path)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1, res.stdout + res.stderr
    assert len(lines) == 1 and lines[0].startswith("error: step "), res.stderr
    assert "is nan" in lines[0] or "is inf" in lines[0], lines[0]
    assert f"{last} " in lines[0] and "kept as it was" in lines[0], lines[0]
    assert tree_hash(last) == before
    assert not (out / "checkpoints/last.tmp").exists()
    # a damaged train state is refused on resume, like any input
    tensors = last / "train_state/tensors.safetensors"
    tensors.write_bytes(tensors.read_bytes()[:-8])
    before = tree_hash(out)
    res = _cli("vla-train", *common, "steps=6", cwd=tmp_path)
    _assert_refused(res, tensors, "truncated")
    assert "cannot resume (resume=false" in res.stderr and tree_hash(out) == before


# ---- the check functions, every corruption ---------------------------------------------------------------
def test_check_dataset_accepts_a_good_dataset(good_data):
    report = check_dataset(good_data)
    assert report.num_episodes == 4 and report.num_frames > 4 and "action" in report.features


@pytest.mark.parametrize("kind", [*DATASET_CORRUPTIONS, *MORE_DATASET_CORRUPTIONS])
def test_check_dataset_refuses(kind, good_data, tmp_path):
    corrupt = {**DATASET_CORRUPTIONS, **MORE_DATASET_CORRUPTIONS}[kind]
    root, path, detail = _bad_copy(good_data, corrupt, tmp_path)
    before = tree_hash(root)
    with pytest.raises(DatasetError) as info:
        check_dataset(root)
    message = str(info.value)
    assert isinstance(info.value, InputError) and "\n" not in message
    assert message.startswith(str(path)) and detail in message, message
    assert f"python -m vla.data.validate {root}" in message  # what to do
    assert tree_hash(root) == before


def test_training_python_api_checks_every_root_before_creating_out(good_data, tmp_path):
    root, path, _ = _bad_copy(good_data, nan_action, tmp_path)
    cfg = TrainConfig(
        policy=asdict(debug_config()),
        data=DataConfig(roots=[str(good_data), str(root)]),
        out=str(tmp_path / "out"),
        progress=False,
    )
    with pytest.raises(DatasetError, match=rf"{path}: episode 1: field 'action' has NaN/inf at frame 2"):
        check_inputs(cfg)
    with pytest.raises(DatasetError, match="NaN/inf at frame 2"):
        Trainer(cfg)
    assert not (tmp_path / "out").exists()


def test_check_dataset_resuming_accepts_what_an_interrupted_writer_leaves(good_data, tmp_path):
    root = tmp_path / "ds"
    shutil.copytree(good_data, root)
    sidecar = root / SIDECAR_FILE
    lines = sidecar.read_text().splitlines(keepends=True)
    sidecar.write_text("".join(lines[:3]) + lines[3][:10])  # episode 3 written but its commit line torn
    with pytest.raises(DatasetError, match="torn trailing line"):
        check_dataset(root)
    assert check_dataset(root, resuming=True).num_episodes == 3  # the writer repairs before appending
    nan_action(root)  # a committed episode stays checked
    with pytest.raises(DatasetError, match="episode 1: field 'action' has NaN/inf"):
        check_dataset(root, resuming=True)


def test_check_checkpoint_accepts_a_good_checkpoint(good_ckpt):
    summary = check_checkpoint(good_ckpt)
    assert summary.type == "flow_matching" and summary.tensors["action_out.weight"] == ("F32", [8, 48])


@pytest.mark.parametrize("kind", [*CHECKPOINT_CORRUPTIONS, *MORE_CHECKPOINT_CORRUPTIONS])
def test_check_checkpoint_refuses(kind, good_ckpt, tmp_path):
    corrupt = {**CHECKPOINT_CORRUPTIONS, **MORE_CHECKPOINT_CORRUPTIONS}[kind]
    ckpt, path, detail = _bad_copy(good_ckpt, corrupt, tmp_path)
    before = tree_hash(ckpt)
    with pytest.raises(InputError) as info:
        check_checkpoint(ckpt)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path)) and detail in message, message
    assert tree_hash(ckpt) == before


def test_check_checkpoint_refuses_a_missing_folder(tmp_path):
    with pytest.raises(InputError, match=rf"{tmp_path / 'nope'}: checkpoint folder not found"):
        check_checkpoint(tmp_path / "nope")


def test_read_safetensors_header_never_unpickles(tmp_path):
    path = tmp_path / "model.safetensors"
    torch.save({"w": torch.zeros(2)}, path, _use_new_zipfile_serialization=False)  # a raw pickle stream
    with pytest.raises(InputError, match="it looks like a pickle"):
        read_safetensors_header(path)


def test_check_checkpoint_works_for_a_policy_without_a_config_class(tmp_path):
    ckpt = tmp_path / "home"
    HomePolicy([0.0] * 8, chunk_size=4).save(ckpt)
    assert check_checkpoint(ckpt, imports=["dummy_policy"]).type == "test_home"
    config = yaml.safe_load((ckpt / "config.yaml").read_text())
    (ckpt / "config.yaml").write_text(yaml.safe_dump({**config, "poze": [0.0]}))
    with pytest.raises(InputError, match=r"config\.yaml: field 'poze' .* did you mean 'pose'"):
        check_checkpoint(ckpt)
    (ckpt / "config.yaml").write_text(yaml.safe_dump(config))
    save_file({"pose": torch.zeros(7)}, str(ckpt / "model.safetensors"))
    with pytest.raises(InputError, match=r"model\.safetensors: tensor 'pose' has shape \[7\] .* needs \[8\]"):
        check_checkpoint(ckpt)


# ---- non-finite losses and gradients ---------------------------------------------------------------------
def test_gradient_step_refuses_a_non_finite_loss_or_gradient_without_moving_anything():
    torch.manual_seed(0)
    policy = torch.nn.Sequential(torch.nn.Linear(3, 2))  # parameter names like a policy's: "0.weight"
    algo = GradientAlgorithm(policy, OptimConfig(warmup_steps=1), total_steps=10)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    x = torch.ones(4, 3)
    with pytest.raises(NonFiniteError, match="the loss is nan"):
        algo.step(policy(x).sum() * float("nan"))
    w = policy[0].weight[0, 0]
    with pytest.raises(NonFiniteError, match="the gradient norm is"):
        algo.step(torch.sqrt(w - w.detach()))  # sqrt(0) = 0, but its gradient is infinite
    assert all(torch.equal(before[k], v) for k, v in policy.state_dict().items())
    assert not algo.optimizer.state and algo.scheduler.last_epoch == 0  # no moment, no schedule step
    assert algo.step(policy(x).pow(2).mean())["loss"] > 0  # a finite loss still trains


def test_critic_fitting_stops_on_a_non_finite_loss(good_data):
    data = ChunkDataset(DataConfig(roots=[str(good_data)], random_shift=0), ["agentview", "wrist"], 4, False)
    cls = CRITICS.get("expectile_value")
    cfg = cls.config_class(encoder="own", steps=20, batch_size=8, hidden=16, lr=1e30)
    with pytest.raises(NonFiniteError, match=r"critic expectile_value: step \d+: the (loss|gradient norm)"):
        cls(cfg, data, None, progress=False).fit()


def test_a_post_training_preset_without_init_from_is_refused(good_data, tmp_path):
    out = tmp_path / "out"
    res = _cli(
        "vla-train", "experiment=posttrain_recap", f"data.roots=[{good_data}]", f"out={out}", cwd=tmp_path
    )
    _assert_refused(res, Path("init_from="), "post-training preset")
    assert not out.exists() and not (tmp_path / ".out.lock").exists()
