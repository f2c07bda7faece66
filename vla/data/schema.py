"""The episode schema: which features an episode holds, and the episode-level metadata beside it.

On disk an episode is a LeRobotDataset v3 episode. Per frame:

| key                                  | dtype          | shape     | meaning                               |
|--------------------------------------|----------------|-----------|---------------------------------------|
| ``observation.images.<cam>``         | image / video  | (H, W, 3) | uint8 RGB                             |
| ``observation.state``                | float32        | (S,)      | proprioception                        |
| ``action``                           | float32        | (A,)      | the action that was executed          |
| ``complementary_info.policy_action`` | float32        | (A,)      | what the policy proposed (see below)  |
| ``complementary_info.is_intervention`` | bool         | (1,)      | a human overrode the policy           |
| ``next.reward``                      | float32        | (1,)      | reward after this step                |
| ``next.done``                        | bool           | (1,)      | the episode ended after this step     |
| ``task`` (lerobot's own column)      | string         |           | the language instruction              |

When no policy ran (demos, scripted experts, pure teleoperation) the collector stores a copy of the
executed action in ``complementary_info.policy_action``, so the column is always finite and
``policy_action == action`` wherever ``is_intervention`` is false and no policy was involved.

Episode-level metadata that lerobot's episode table does not hold (``success``, ``source`` and a
free-form ``extra`` dict) lives in the sidecar ``meta/vla_episodes.jsonl`` (see :mod:`vla.data.sidecar`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

SOURCES: tuple[str, ...] = ("demo", "policy", "human", "scripted")

IMAGE_PREFIX = "observation.images."
STATE = "observation.state"
ACTION = "action"
POLICY_ACTION = "complementary_info.policy_action"
IS_INTERVENTION = "complementary_info.is_intervention"
REWARD = "next.reward"
DONE = "next.done"
SUCCESS = "next.success"  # not written by us; a plain LeRobot dataset's per-frame success flag, if it has one
TASK = "task"

FLOAT_KEYS: tuple[str, ...] = (STATE, ACTION, POLICY_ACTION, REWARD)
BOOL_KEYS: tuple[str, ...] = (IS_INTERVENTION, DONE)

SPEC_FILE = "meta/vla_spec.json"
SIDECAR_FILE = "meta/vla_episodes.jsonl"


def image_key(camera: str) -> str:
    """Returns the feature key of a camera, e.g. ``observation.images.front``."""
    return f"{IMAGE_PREFIX}{camera}"


@dataclass
class EpisodeSpec:
    """What one frame of an episode holds; the single source of the lerobot features dict.

    Attributes:
        cameras: Camera name -> (H, W) of its RGB image.
        state_dim: Size S of ``observation.state``.
        action_dim: Size A of ``action`` and ``complementary_info.policy_action``.
        fps: Control rate in frames per second.
        use_videos: Store cameras as mp4 videos (True) or PNG images embedded in parquet (False).
        robot_type: The robot, stored as lerobot's info.json ``robot_type``. A name registered in
            ``hardware/profiles`` (``panda``, ...) makes the checks hold state and action to that profile's
            joint ranges (:mod:`vla.data.ranges`); None (the default) names no robot: the outlier rule only.
        state_names: Optional names of the S state dimensions.
        action_names: Optional names of the A action dimensions.
    """

    cameras: dict[str, tuple[int, int]]
    state_dim: int
    action_dim: int
    fps: int
    use_videos: bool = False
    robot_type: str | None = None
    state_names: list[str] | None = None
    action_names: list[str] | None = None

    def __post_init__(self) -> None:
        self.cameras = {str(k): (int(v[0]), int(v[1])) for k, v in self.cameras.items()}
        for name, (h, w) in self.cameras.items():
            if h <= 0 or w <= 0 or not name or "." in name or "/" in name:
                raise ValueError(f"EpisodeSpec: invalid camera {name!r} with size {(h, w)}")
        if self.state_dim <= 0 or self.action_dim <= 0 or self.fps <= 0:
            raise ValueError(
                f"EpisodeSpec: state_dim, action_dim and fps must be positive, got "
                f"{self.state_dim}, {self.action_dim}, {self.fps}"
            )
        if self.state_names is not None and len(self.state_names) != self.state_dim:
            raise ValueError(
                f"EpisodeSpec: {len(self.state_names)} state_names for state_dim {self.state_dim}"
            )
        if self.action_names is not None and len(self.action_names) != self.action_dim:
            raise ValueError(
                f"EpisodeSpec: {len(self.action_names)} action_names for action_dim {self.action_dim}"
            )

    @property
    def image_keys(self) -> list[str]:
        """Feature keys of the cameras, in the order of ``cameras``."""
        return [image_key(c) for c in self.cameras]

    def features(self) -> dict[str, dict[str, Any]]:
        """Returns the lerobot features dict (without lerobot's own index/timestamp columns)."""
        visual = "video" if self.use_videos else "image"
        feats: dict[str, dict[str, Any]] = {}
        for cam, (h, w) in self.cameras.items():
            feats[image_key(cam)] = {
                "dtype": visual,
                "shape": (h, w, 3),
                "names": ["height", "width", "channels"],
            }
        feats[STATE] = {"dtype": "float32", "shape": (self.state_dim,), "names": self.state_names}
        feats[ACTION] = {"dtype": "float32", "shape": (self.action_dim,), "names": self.action_names}
        feats[POLICY_ACTION] = {"dtype": "float32", "shape": (self.action_dim,), "names": self.action_names}
        feats[IS_INTERVENTION] = {"dtype": "bool", "shape": (1,), "names": None}
        feats[REWARD] = {"dtype": "float32", "shape": (1,), "names": None}
        feats[DONE] = {"dtype": "bool", "shape": (1,), "names": None}
        return feats

    def diff(self, other: EpisodeSpec) -> list[str]:
        """Lists the fields where ``other`` differs from this spec, as ``field: mine != theirs``."""
        mine, theirs = asdict(self), asdict(other)
        return [f"{k}: {mine[k]!r} != {theirs[k]!r}" for k in mine if mine[k] != theirs[k]]

    def to_json(self) -> str:
        """Serialises the spec to a JSON string."""
        d = asdict(self)
        d["cameras"] = {k: list(v) for k, v in self.cameras.items()}
        return json.dumps(d, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> EpisodeSpec:
        """Parses a spec written by :meth:`to_json`."""
        d = json.loads(text)
        d["cameras"] = {k: tuple(v) for k, v in d["cameras"].items()}
        return cls(**d)


@dataclass
class EpisodeMeta:
    """Episode-level metadata kept in the sidecar, one JSON line per committed episode.

    Attributes:
        episode_index: lerobot's episode index.
        length: Number of frames.
        success: Whether the task succeeded; None: unknown (a plain LeRobot dataset without a
            ``next.success`` or ``next.reward`` column, see :func:`vla.data.reader.read_episode_info`).
        source: One of :data:`SOURCES`.
        task: The instruction of the episode's first frame.
        extra: Free-form JSON-serialisable data (the sim stores ``seed``, ``task_name``,
            ``env_kwargs`` and ``init_state`` there for replay).
    """

    episode_index: int
    length: int
    success: bool | None
    source: str
    task: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """One compact JSON line (no trailing newline); NaN/inf are rejected."""
        return json.dumps(asdict(self), allow_nan=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EpisodeMeta:
        """Builds the record from a parsed sidecar line."""
        return cls(
            episode_index=int(d["episode_index"]),
            length=int(d["length"]),
            success=None if d.get("success") is None else bool(d["success"]),
            source=str(d["source"]),
            task=str(d.get("task", "")),
            extra=dict(d.get("extra") or {}),
        )
