"""``vla-libero2dataset <demo.hdf5 ...> --out <dir>``: LIBERO's own HDF5 demonstrations -> a LeRobotDataset v3
in the layout of LeRobot's LIBERO datasets (:mod:`sim.libero.robot`), so ``vla-train`` reads them like
HuggingFaceVLA/libero.

LIBERO's files (robomimic's layout, one file per task): ``data/demo_<i>/actions`` [T, 7] (the relative
end-effector command the demonstrator sent, the env's action space), ``data/demo_<i>/obs/agentview_rgb`` and
``eye_in_hand_rgb`` [T, H, W, 3] (rendered upside down), ``obs/ee_pos`` [T, 3], ``obs/ee_ori`` [T, 3]
(axis-angle), ``obs/gripper_states`` [T, 2]; the instruction is ``language_instruction`` in the JSON of
``data.attrs["problem_info"]`` (else the file name without ``_demo``). Each demo becomes one successful
episode at LIBERO's 20 Hz: images turned 180 degrees, state = [ee_pos, ee_ori, gripper_states] (8), action
as recorded. When the file names a task of a suite (``<task name>_demo.hdf5``, as LIBERO names them), each
episode also keeps its suite (as ``task_name``: the suite a training run evaluates), task index and first
simulator state (``states[0]``), so ``vla-replay env=libero`` replays it from there. ``--drop-noops``
leaves out the frames whose action is no motion with an unchanged gripper, as the openvla-derived LIBERO
datasets do (``*_no_noops``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sim.libero.suite import CONTROL_HZ, MAX_STEPS, suite_tasks
from vla.data.schema import (
    ACTION,
    DONE,
    IS_INTERVENTION,
    POLICY_ACTION,
    REWARD,
    STATE,
    TASK,
    EpisodeSpec,
    image_key,
)
from vla.errors import InputError, exit_on_refusal

# our camera -> LIBERO's HDF5 observation
HDF5_CAMERAS = {"image": "agentview_rgb", "image2": "eye_in_hand_rgb"}
STATE_PARTS = ("ee_pos", "ee_ori", "gripper_states")
STATE_NAMES = ["x", "y", "z", "ax", "ay", "az", "finger_left", "finger_right"]
ACTION_NAMES = ["dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper"]


def libero_spec(cameras: dict[str, tuple[int, int]]) -> EpisodeSpec:
    """A LIBERO dataset's episode layout: ``cameras`` (name -> H, W), the 8-d state, 7-d actions, 20 Hz."""
    return EpisodeSpec(
        cameras=cameras,
        state_dim=8,
        action_dim=7,
        fps=CONTROL_HZ,
        robot_type="libero_panda",
        state_names=STATE_NAMES,
        action_names=ACTION_NAMES,
    )


def instruction_of(f, path: Path) -> str:
    """The task's language: ``problem_info``'s ``language_instruction``, else the file name."""
    info = f["data"].attrs.get("problem_info")
    if info is not None:
        text = json.loads(info).get("language_instruction", "")
        if text:
            return str(text).strip().strip('"')
    return path.stem.removesuffix("_demo").replace("_", " ")


def find_task(path: Path) -> tuple[str, int] | None:
    """The (suite, task index) whose task name the file is named after (``<name>_demo.hdf5``), or None;
    the first suite in :data:`~sim.libero.suite.MAX_STEPS` order that has it."""
    name = path.stem.removesuffix("_demo")
    for suite in MAX_STEPS:
        for task in suite_tasks(suite):
            if task.name == name:
                return suite, task.index
    return None


def is_noop(action: np.ndarray, previous: np.ndarray | None, threshold: float = 1e-4) -> bool:
    """No arm motion and the same gripper command as the frame before (openvla's no-op rule)."""
    still = float(np.linalg.norm(action[:-1])) < threshold
    return still and previous is not None and action[-1] == previous[-1]


def read_demo(demo, where: str) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """(images by our camera, states [T, 8], actions [T, 7]) of one ``data/demo_<i>`` group.

    Raises:
        InputError: a dataset is missing or its length or width is off (named with ``where``).
    """
    obs = demo.get("obs")
    if "actions" not in demo or obs is None:
        raise InputError(f"{where}: no actions or obs (LIBERO's demos hold data/demo_<i>/actions and obs/)")
    actions = np.asarray(demo["actions"], dtype=np.float32)
    missing = [k for k in (*HDF5_CAMERAS.values(), *STATE_PARTS) if k not in obs]
    if missing:
        raise InputError(f"{where}/obs: missing {', '.join(missing)}")
    images = {ours: np.asarray(obs[theirs])[:, ::-1, ::-1] for ours, theirs in HDF5_CAMERAS.items()}
    states = np.concatenate([np.asarray(obs[k], dtype=np.float32) for k in STATE_PARTS], axis=1)
    n = len(actions)
    if actions.ndim != 2 or actions.shape[1] != 7:
        raise InputError(f"{where}/actions: shape {actions.shape}, LIBERO's actions are [T, 7]")
    if states.shape != (n, 8) or any(len(v) != n for v in images.values()):
        raise InputError(
            f"{where}: obs lengths or the state's width ({states.shape}) differ from {n} actions"
        )
    if not np.all(np.isfinite(actions)) or not np.all(np.isfinite(states)):
        raise InputError(f"{where}: actions or states hold NaN/inf")
    return images, states, actions


def convert(files: Sequence[str | Path], out: str | Path, *, drop_noops: bool = False) -> tuple[Path, int]:
    """Append every demo of ``files`` to the dataset ``out`` (created, or resumed when it exists); returns
    (the dataset, episodes written). The dataset is validated at the end."""
    import h5py

    from vla.data.validate import validate_dataset
    from vla.data.writer import EpisodeWriter

    out = Path(out)
    written = 0
    writer: EpisodeWriter | None = None
    try:
        for file in map(Path, files):
            if not file.is_file():
                raise InputError(f"{file}: no such file")
            with h5py.File(file, "r") as f:
                if "data" not in f:
                    raise InputError(f"{file}: no data/ group (not a LIBERO demo file)")
                text = instruction_of(f, file)
                where = find_task(file)
                demos = sorted(f["data"], key=lambda k: int(k.split("_")[-1]) if k[-1].isdigit() else 0)
                for name in demos:
                    images, states, actions = read_demo(f["data"][name], f"{file}:data/{name}")
                    keep = _kept(actions, drop_noops)
                    if writer is None:
                        spec = libero_spec({c: v.shape[1:3] for c, v in images.items()})
                        writer = EpisodeWriter(out, spec, resume=out.exists())
                    for j, t in enumerate(keep):
                        writer.add_frame(
                            {
                                **{image_key(c): np.ascontiguousarray(v[t]) for c, v in images.items()},
                                STATE: states[t],
                                ACTION: actions[t],
                                POLICY_ACTION: actions[t],
                                IS_INTERVENTION: np.array([False]),
                                REWARD: np.array([float(j == len(keep) - 1)], dtype=np.float32),
                                DONE: np.array([j == len(keep) - 1]),
                                TASK: text,
                            }
                        )
                    extra: dict = {"libero_file": file.name, "demo": name}
                    if where is not None:  # the suite is the task a training run evaluates (env.task)
                        extra |= {"task_name": where[0], "libero_suite": where[0], "libero_task": where[1]}
                    if where is not None and "states" in f["data"][name]:
                        extra["libero_state"] = np.asarray(f["data"][name]["states"][0], np.float64).tolist()
                    writer.end_episode(success=True, source="demo", extra=extra)
                    written += 1
    finally:
        if writer is not None:
            writer.close()
    if written == 0:
        raise InputError(f"no demos in {', '.join(map(str, files))}")
    validate_dataset(out)
    return out, written


def _kept(actions: np.ndarray, drop_noops: bool) -> list[int]:
    if not drop_noops:
        return list(range(len(actions)))
    keep: list[int] = []
    for t, a in enumerate(actions):
        if not is_noop(a, actions[keep[-1]] if keep else None):
            keep.append(t)
    return keep


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="vla-libero2dataset", description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", help="LIBERO demo files (<task>_demo.hdf5)")
    p.add_argument("--out", required=True, help="dataset folder (appended to when it exists)")
    p.add_argument("--drop-noops", action="store_true", help="leave out no-op frames (openvla's rule)")
    args = p.parse_args(argv)
    with exit_on_refusal():
        out, n = convert(args.files, args.out, drop_noops=args.drop_noops)
    print(f"dataset: {out} ({n} episodes)")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
