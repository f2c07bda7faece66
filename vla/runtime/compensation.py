"""Self-compensating deployment: learn the robot's execution error online and pre-compensate commands.

Reward-free and label-free. Each control period logs the pair (command c_t, position reached q_{t+1});
the execution error e = q_exec - c is modelled per joint as a linear function of

    phi_j = [1, q_j, c_j - q_j, sign(c_j - c_prev_j)]

(an offset, a position-dependent term such as a gravity-compensation error, a compliance/lag term, and
a direction-dependent backlash/friction term), fitted by ridge regression on a ring buffer. Hindsight
relabelling gives the inverse: to reach the policy's target a, command c with c + e(c) = a, solved by
fixed-point iteration c <- a - e(c) and kept inside a trust region |c - a| <= delta around the base
policy's action. Fits run in a background thread every ``update_every`` periods, never in the control
loop; the model in use is swapped atomically. ``enabled=False`` passes actions through (and keeps
learning). The fitted model saves to and loads from JSON (no pickle), optionally with its buffer (npz),
so a deployment resumes compensated and keeps learning across runs.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np


@dataclass
class CompensationConfig:
    enabled: bool = True
    buffer: int = 2000  # ring buffer of (command, executed) pairs
    update_every: int = 25  # control periods between background fits
    min_samples: int = 50
    ridge: float = 1e-4
    trust_region: float = 0.1  # |c - a| <= this, per joint (action units)
    iterations: int = 3  # fixed-point steps of c <- a - e(c)
    load: str | None = None  # deployment: start from this saved compensator (compensated from the first step)

    def __post_init__(self) -> None:
        if self.buffer < self.min_samples or self.min_samples < 4:
            raise ValueError(f"buffer={self.buffer} >= min_samples={self.min_samples} >= 4 required")
        if self.trust_region < 0 or self.update_every < 1:
            raise ValueError(f"trust_region={self.trust_region} >= 0, update_every={self.update_every} >= 1")
        if self.load is not None and not self.enabled:
            raise ValueError(f"compensation.load={self.load!r} needs compensation.enabled=true")
        if self.load is not None and not Path(self.load).is_file():
            raise FileNotFoundError(f"compensation.load={self.load!r}: no such file")


N_FEATURES = 4


def features(q: np.ndarray, c: np.ndarray, c_prev: np.ndarray) -> np.ndarray:
    """phi [..., J, 4] for positions q, commands c and previous commands c_prev [..., J]."""
    return np.stack([np.ones_like(q), q, c - q, np.sign(c - c_prev)], axis=-1)


class SelfCompensator:
    """Per-joint execution-error model + pre-compensation; see the module docstring."""

    def __init__(self, dims: int, cfg: CompensationConfig) -> None:
        self.dims, self.cfg = dims, cfg
        n = cfg.buffer
        self._q = np.zeros((n, dims))
        self._c = np.zeros((n, dims))
        self._cp = np.zeros((n, dims))
        self._e = np.zeros((n, dims))
        self._count = 0
        self._since_fit = 0
        self.weights = np.zeros((dims, N_FEATURES))  # the model in use (swapped atomically)
        self.fits = 0
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # ---- logging and fitting --------------------------------------------------------------------------
    def record(
        self, q: np.ndarray, command: np.ndarray, prev_command: np.ndarray, executed: np.ndarray
    ) -> None:
        """One period: from position q, ``command`` (after ``prev_command``) led to ``executed``."""
        with self._lock:
            i = self._count % self.cfg.buffer
            self._q[i], self._c[i], self._cp[i] = q, command, prev_command
            self._e[i] = np.asarray(executed) - np.asarray(command)
            self._count += 1
        self._since_fit += 1
        if self._since_fit >= self.cfg.update_every and self._count >= self.cfg.min_samples:
            self._since_fit = 0
            self.fit_in_background()

    def fit_in_background(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return  # the previous fit is still running: skip, never block the control loop
        self._thread = threading.Thread(target=self.fit, daemon=True, name="self-compensation-fit")
        self._thread.start()

    def wait(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def fit(self) -> None:
        """Ridge regression per joint on the buffer: e_j ~ phi_j w_j."""
        with self._lock:
            n = min(self._count, self.cfg.buffer)
            q, c, cp, e = self._q[:n].copy(), self._c[:n].copy(), self._cp[:n].copy(), self._e[:n].copy()
        phi = features(q, c, cp)  # [n, J, F]
        w = np.zeros((self.dims, N_FEATURES))
        eye = self.cfg.ridge * np.eye(N_FEATURES)
        for j in range(self.dims):
            x = phi[:, j]
            w[j] = np.linalg.solve(x.T @ x + eye * n, x.T @ e[:, j])
        self.weights = w  # atomic swap
        self.fits += 1

    # ---- compensation ---------------------------------------------------------------------------------
    def predict_error(self, q: np.ndarray, c: np.ndarray, c_prev: np.ndarray) -> np.ndarray:
        return np.einsum("jf,jf->j", features(q, c, c_prev), self.weights)

    def compensate(self, action: np.ndarray, q: np.ndarray, prev_command: np.ndarray) -> np.ndarray:
        """The command that should make the robot reach ``action``, within the trust region."""
        a = np.asarray(action, dtype=np.float64)
        if not self.cfg.enabled or self.fits == 0:
            return a
        c = a.copy()
        delta = self.cfg.trust_region
        for _ in range(self.cfg.iterations):
            c = np.clip(a - self.predict_error(q, c, prev_command), a - delta, a + delta)
        return c

    # ---- persistence ----------------------------------------------------------------------------------
    def save(self, path: str | Path, buffer: bool = False) -> Path:
        """The model as JSON; with ``buffer=True`` also the logged pairs, as ``<path>.buffer.npz`` next to
        it, so a reloaded compensator keeps learning from where this one stopped."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if buffer:
            with self._lock:
                q, c, cp, e = self._ordered()
            tmp_npz = _buffer_path(path).with_suffix(".tmp.npz")
            np.savez(tmp_npz, q=q, c=c, cp=cp, e=e)
            tmp_npz.replace(_buffer_path(path))
        tmp = path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "config": {**asdict(self.cfg), "load": None},
                    "weights": self.weights.tolist(),
                    "fits": self.fits,
                }
            )
        )
        tmp.replace(path)
        return path

    def _ordered(self) -> tuple[np.ndarray, ...]:
        """The buffer's pairs, oldest first."""
        n, size = min(self._count, self.cfg.buffer), self.cfg.buffer
        idx = (np.arange(n) + (self._count - n)) % size
        return self._q[idx].copy(), self._c[idx].copy(), self._cp[idx].copy(), self._e[idx].copy()

    def extend(self, q: np.ndarray, c: np.ndarray, cp: np.ndarray, e: np.ndarray) -> None:
        """Append logged pairs [n, J] (e = executed - command) without fitting."""
        with self._lock:
            for row in zip(q, c, cp, e, strict=True):
                i = self._count % self.cfg.buffer
                self._q[i], self._c[i], self._cp[i], self._e[i] = row
                self._count += 1

    @property
    def samples(self) -> int:
        return min(self._count, self.cfg.buffer)

    @classmethod
    def load(cls, path: str | Path, cfg: CompensationConfig | None = None) -> SelfCompensator:
        path = Path(path)
        try:
            blob = json.loads(path.read_text())
            w = np.asarray(blob["weights"], dtype=np.float64)
        except (OSError, ValueError, KeyError) as exc:
            raise ValueError(f"{path}: not a saved compensator ({exc})") from exc
        if w.ndim != 2 or w.shape[1] != N_FEATURES:
            raise ValueError(f"{path}: weights of shape {w.shape}, expected [J, {N_FEATURES}]")
        comp = cls(w.shape[0], cfg or CompensationConfig(**blob["config"]))
        comp.weights, comp.fits = w.reshape(w.shape[0], N_FEATURES), int(blob.get("fits", 1))
        if _buffer_path(path).is_file():
            buf = _buffer_path(path)
            with np.load(buf, allow_pickle=False) as z:
                if z["q"].shape[1:] != (w.shape[0],):
                    raise ValueError(f"{buf}: pairs of {z['q'].shape[1:]}, expected {w.shape[0]}")
                comp.extend(z["q"], z["c"], z["cp"], z["e"])
        return comp

    @classmethod
    def merged(cls, paths: list[Path], cfg: CompensationConfig | None = None) -> SelfCompensator:
        """One compensator from several saved ones (e.g. one per eval worker): their buffers pooled and
        refitted; without buffers, their weights averaged."""
        if not paths:
            raise ValueError("merged() needs at least one saved compensator")
        parts = [cls.load(p, cfg) for p in paths]
        out = cls(parts[0].dims, cfg or parts[0].cfg)
        for part in parts:
            out.extend(*part._ordered())
        if out.samples >= out.cfg.min_samples:
            out.fit()
        else:
            out.weights, out.fits = np.mean([p.weights for p in parts], axis=0), max(p.fits for p in parts)
        return out


def _buffer_path(path: Path) -> Path:
    return path.with_name(path.stem + ".buffer.npz")
