"""Forward kinematics of serial arms as their makers publish them (numpy only; ``vla.robot.Kinematics``).

Two chain descriptions, both ``base @ link_1(q_1) @ ... @ link_n(q_n) @ tool``:

- :class:`DHChain`: a Denavit-Hartenberg table, ``"standard"`` (distal; Universal Robots publish theirs this
  way: ``Rz(theta) Tz(d) Tx(a) Rx(alpha)``) or ``"modified"`` (proximal, Craig; Franka publish theirs this
  way: ``Rx(alpha_{i-1}) Tx(a_{i-1}) Rz(theta_i) Tz(d_i)``, each row holding ``a_{i-1}, d_i, alpha_{i-1}``).
- :class:`URDFChain`: per joint the URDF ``<origin xyz rpy>`` from the parent link and the ``<axis>``
  (revolute joints), for arms published as URDF (SO-101).

``forward(q)`` takes joint positions ``[J]`` or a batch ``[B, J]`` and returns ``[4, 4]`` / ``[B, 4, 4]``
poses of the tool frame in the base frame; ``tool_position(q)`` returns ``[3]`` / ``[B, 3]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np


def _vec3(values: Sequence[float], what: str) -> tuple[float, float, float]:
    out = tuple(float(v) for v in values)
    if len(out) != 3 or not np.all(np.isfinite(out)):
        raise ValueError(f"{what}: need 3 finite values, got {tuple(values)}")
    return out[0], out[1], out[2]


def _rpy_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:  # [3, 3]
    """URDF convention: fixed-axis roll about x, then pitch about y, then yaw about z (``Rz Ry Rx``)."""
    cr, sr, cp, sp, cy, sy = (
        np.cos(roll),
        np.sin(roll),
        np.cos(pitch),
        np.sin(pitch),
        np.cos(yaw),
        np.sin(yaw),
    )
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


@dataclass(frozen=True)
class Pose:
    """A fixed rigid transform: translate by ``xyz`` (m), then rotate by ``rpy`` (rad, URDF convention)."""

    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "xyz", _vec3(self.xyz, "pose xyz"))
        object.__setattr__(self, "rpy", _vec3(self.rpy, "pose rpy"))

    def matrix(self) -> np.ndarray:  # [4, 4]
        out = np.eye(4)
        out[:3, :3] = _rpy_matrix(*self.rpy)
        out[:3, 3] = self.xyz
        return out


def _batch(q: np.ndarray, n: int, name: str) -> np.ndarray:  # [..., J]
    q = np.asarray(q, dtype=np.float64)
    if q.ndim not in (1, 2) or q.shape[-1] != n:
        raise ValueError(f"{name}: q must be [{n}] or [B, {n}] joint positions, got shape {q.shape}")
    return q


def _compose(base: Pose, links: Sequence[np.ndarray], tool: Pose, batch: tuple[int, ...]) -> np.ndarray:
    """``base @ links[0] @ ... @ tool``; each link is ``[..., 4, 4]``; returns ``[..., 4, 4]``."""
    out = np.broadcast_to(base.matrix(), (*batch, 4, 4))
    for link in links:
        out = out @ link
    return out @ tool.matrix()


def _standard_link(theta: np.ndarray, a: float, d: float, alpha: float) -> np.ndarray:  # [..., 4, 4]
    ct, st, ca, sa = np.cos(theta), np.sin(theta), np.cos(alpha), np.sin(alpha)
    out = np.zeros((*theta.shape, 4, 4))
    out[..., 0, :] = np.stack([ct, -st * ca, st * sa, a * ct], axis=-1)
    out[..., 1, :] = np.stack([st, ct * ca, -ct * sa, a * st], axis=-1)
    out[..., 2, 1:] = [sa, ca, d]
    out[..., 3, 3] = 1.0
    return out


def _modified_link(theta: np.ndarray, a: float, d: float, alpha: float) -> np.ndarray:  # [..., 4, 4]
    ct, st, ca, sa = np.cos(theta), np.sin(theta), np.cos(alpha), np.sin(alpha)
    out = np.zeros((*theta.shape, 4, 4))
    out[..., 0, :3] = np.stack([ct, -st, np.zeros_like(ct)], axis=-1)
    out[..., 0, 3] = a
    out[..., 1, :] = np.stack([st * ca, ct * ca, np.full_like(ct, -sa), np.full_like(ct, -d * sa)], axis=-1)
    out[..., 2, :] = np.stack([st * sa, ct * sa, np.full_like(ct, ca), np.full_like(ct, d * ca)], axis=-1)
    out[..., 3, 3] = 1.0
    return out


DH_CONVENTIONS: dict[str, Callable[[np.ndarray, float, float, float], np.ndarray]] = {
    "standard": _standard_link,
    "modified": _modified_link,
}


@dataclass(frozen=True)
class DHChain:
    """A revolute arm from its DH table (one entry per joint in ``a``, ``d``, ``alpha``; m and rad).

    ``theta_offset``: added to each joint position (default 0); ``base``: the base frame's pose in the frame
    the caller wants positions in; ``tool``: the tool point's pose in the last DH frame (flange + tool).
    """

    a: tuple[float, ...]
    d: tuple[float, ...]
    alpha: tuple[float, ...]
    convention: str = "standard"
    theta_offset: tuple[float, ...] = ()
    base: Pose = field(default_factory=Pose)
    tool: Pose = field(default_factory=Pose)

    def __post_init__(self) -> None:
        for name in ("a", "d", "alpha", "theta_offset"):
            object.__setattr__(self, name, tuple(float(v) for v in getattr(self, name)))
        if not self.theta_offset:
            object.__setattr__(self, "theta_offset", (0.0,) * len(self.a))
        lengths = {n: len(getattr(self, n)) for n in ("a", "d", "alpha", "theta_offset")}
        if len(set(lengths.values())) != 1 or not self.a:
            raise ValueError(f"DH chain: a, d, alpha, theta_offset need the same length >= 1, got {lengths}")
        if self.convention not in DH_CONVENTIONS:
            raise ValueError(
                f"DH chain: convention={self.convention!r}; choose one of {sorted(DH_CONVENTIONS)}"
            )

    @property
    def n_joints(self) -> int:
        return len(self.a)

    def forward(self, q: np.ndarray) -> np.ndarray:  # [J] -> [4, 4] or [B, J] -> [B, 4, 4]
        q = _batch(q, self.n_joints, "DH chain")
        link = DH_CONVENTIONS[self.convention]
        rows = zip(self.a, self.d, self.alpha, self.theta_offset, strict=True)
        links = [link(q[..., i] + off, a, d, al) for i, (a, d, al, off) in enumerate(rows)]
        return _compose(self.base, links, self.tool, q.shape[:-1])

    def tool_position(self, q: np.ndarray) -> np.ndarray:  # [J] -> [3] or [B, J] -> [B, 3]
        return self.forward(q)[..., :3, 3]


@dataclass(frozen=True)
class URDFJoint:
    """One revolute URDF joint: its ``<origin>`` in the parent link and its ``<axis>`` (normalised here)."""

    origin: Pose
    axis: tuple[float, float, float] = (0.0, 0.0, 1.0)

    def __post_init__(self) -> None:
        axis = np.asarray(_vec3(self.axis, "URDF joint axis"))
        if np.linalg.norm(axis) < 1e-9:
            raise ValueError(f"URDF joint axis must be non-zero, got {self.axis}")
        object.__setattr__(self, "axis", _vec3(axis / np.linalg.norm(axis), "URDF joint axis"))

    def transform(self, q: np.ndarray) -> np.ndarray:  # [...] -> [..., 4, 4]
        """``origin @ rotation(axis, q)`` (Rodrigues' formula)."""
        k = np.asarray(self.axis)
        kx = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
        s, c = np.sin(q)[..., None, None], np.cos(q)[..., None, None]
        rot = np.zeros((*np.shape(q), 4, 4))
        rot[..., :3, :3] = np.eye(3) + s * kx + (1.0 - c) * (kx @ kx)
        rot[..., 3, 3] = 1.0
        return self.origin.matrix() @ rot


@dataclass(frozen=True)
class URDFChain:
    """A serial chain of revolute URDF joints from the base link to the tool frame (``tool``: the fixed
    joint(s) from the last moving link to the tool point)."""

    joints: tuple[URDFJoint, ...]
    base: Pose = field(default_factory=Pose)
    tool: Pose = field(default_factory=Pose)

    def __post_init__(self) -> None:
        object.__setattr__(self, "joints", tuple(self.joints))
        if not self.joints or not all(isinstance(j, URDFJoint) for j in self.joints):
            raise ValueError(f"URDF chain: need >= 1 URDFJoint, got {self.joints!r}")

    @property
    def n_joints(self) -> int:
        return len(self.joints)

    def forward(self, q: np.ndarray) -> np.ndarray:  # [J] -> [4, 4] or [B, J] -> [B, 4, 4]
        q = _batch(q, self.n_joints, "URDF chain")
        links = [j.transform(q[..., i]) for i, j in enumerate(self.joints)]
        return _compose(self.base, links, self.tool, q.shape[:-1])

    def tool_position(self, q: np.ndarray) -> np.ndarray:  # [J] -> [3] or [B, J] -> [B, 3]
        return self.forward(q)[..., :3, 3]
