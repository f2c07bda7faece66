"""Action Upcycling: extend the execution horizon of a chunk while its action velocity stays smooth.

Training-free and model-agnostic: it only looks at the chunk. With actions normalised per dimension
(``scale``, e.g. the demonstrations' std) and v_k = (a_{k+1} - a_k) / dt, the chunk is executed up to

    h* = min { k > h0 : ||v_k - v_{k-1}|| > tau },   clamped to h0 <= h* <= H - d,

where tau is calibrated from demonstration data (a quantile of the same velocity change over demo
chunks, :func:`calibrate_tau`) or, without calibration, kappa x the median velocity change over the
base prefix of the chunk itself. d is the inference-delay margin (actions kept back for the next chunk
to splice into). Upcycling only moves the horizon; RTC (when on) shapes the chunk first.

Replan gate (the paper's premise, checked online): discarded actions should stay close to their replanned
versions. With ``replan_tolerance`` set, each new chunk is compared with what the previous chunk had planned
for the same steps (its discarded tail), as the RMS normalised difference over the overlap,

    D = sqrt( mean_{k < m, a} ((a^new_k - a^prev_k) / scale_a)^2 ),

and when D > ``replan_tolerance`` the policy has changed its mind: this chunk runs h0 only. So the horizon
grows in free motion, where consecutive chunks agree, and stays short where closed-loop corrections matter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class UpcyclingConfig:
    enabled: bool = False
    tau: float | None = None  # calibrated threshold (normalised units / s^2); None: kappa x prefix median
    kappa: float = 3.0
    quantile: float = 0.95  # calibration: the demo quantile of the velocity change used as tau
    delay_margin: int = 0  # d: h* <= H - d
    max_horizon: int | None = None  # an upper bound on h* (None: H - d)
    replan_tolerance: float | None = None  # D above which a chunk runs h0 only (None: no replan gate)

    def __post_init__(self) -> None:
        if self.replan_tolerance is not None and self.replan_tolerance < 0:
            raise ValueError(f"upcycling: replan_tolerance={self.replan_tolerance} must be >= 0")
        if self.max_horizon is not None and self.max_horizon < 1:
            raise ValueError(f"upcycling: max_horizon={self.max_horizon} must be >= 1")
        if self.kappa <= 0 or not 0.0 < self.quantile < 1.0 or self.delay_margin < 0:
            raise ValueError(
                f"upcycling: kappa={self.kappa} > 0, quantile={self.quantile} in (0, 1), "
                f"delay_margin={self.delay_margin} >= 0 required"
            )


def velocity_change(chunk: np.ndarray, dt: float, scale: np.ndarray | None = None) -> np.ndarray:
    """||v_k - v_{k-1}|| for k = 1 .. H - 2, with v_k = (a_{k+1} - a_k) / dt. [H, A] -> [H - 2]
    (entry j is the change at k = j + 1)."""
    a = np.asarray(chunk, dtype=np.float64)
    if scale is not None:
        a = a / np.maximum(np.asarray(scale, dtype=np.float64), 1e-8)
    v = np.diff(a, axis=0) / dt
    return np.linalg.norm(np.diff(v, axis=0), axis=-1)


def replan_discrepancy(chunk: np.ndarray, previous: np.ndarray, scale: np.ndarray | None = None) -> float:
    """D: RMS of the normalised difference between ``chunk`` [H, A] and ``previous`` [m, A], what the previous
    chunk had planned for the same steps, over their overlap (0 when they do not overlap)."""
    m = min(len(chunk), len(previous))
    if m == 0:
        return 0.0
    diff = np.asarray(chunk[:m], dtype=np.float64) - np.asarray(previous[:m], dtype=np.float64)
    if scale is not None:
        diff = diff / np.maximum(np.asarray(scale, dtype=np.float64), 1e-8)
    return float(np.sqrt(np.mean(diff**2)))


def upcycled_horizon(
    chunk: np.ndarray,
    h0: int,
    dt: float,
    cfg: UpcyclingConfig,
    scale: np.ndarray | None = None,
    previous: np.ndarray | None = None,
) -> int:
    """h*: how many actions of ``chunk`` [H, A] to execute (see the module docstring). ``previous``: the
    previous chunk's discarded tail aligned with ``chunk`` (None: first chunk, or no replan gate)."""
    h_len = len(chunk)
    upper = h_len - cfg.delay_margin
    if cfg.max_horizon is not None:
        upper = min(upper, cfg.max_horizon)
    upper = max(h0, upper)
    if not cfg.enabled or h0 >= upper:
        return h0
    gate = cfg.replan_tolerance
    if gate is not None and previous is not None and replan_discrepancy(chunk, previous, scale) > gate:
        return h0
    dv = velocity_change(chunk, dt, scale)  # dv[k - 1] = ||v_k - v_{k-1}||
    if cfg.tau is not None:
        tau = cfg.tau
    else:
        prefix = dv[: max(1, h0 - 1)]
        tau = cfg.kappa * max(float(np.median(prefix)), 1e-6)
    for k in range(h0 + 1, upper):
        if k - 1 < len(dv) and dv[k - 1] > tau:
            return k
    return upper


def calibrate_tau(
    chunks: list[np.ndarray], dt: float, quantile: float, scale: np.ndarray | None = None
) -> float:
    """tau from demonstration chunks: the ``quantile`` of ||v_k - v_{k-1}|| over all of them."""
    values = [velocity_change(c, dt, scale) for c in chunks if len(c) >= 3]
    if not values:
        raise ValueError("calibrate_tau needs demonstration chunks of at least 3 actions")
    return float(np.quantile(np.concatenate(values), quantile))


UPCYCLING_FILE = "upcycling.json"
CALIBRATION_QUANTILES = (0.5, 0.75, 0.9, 0.95)


def calibration_from_actions(
    actions: np.ndarray,
    episode_end: np.ndarray,
    chunk_size: int,
    dt: float,
    quantile: float = 0.95,
    max_chunks: int = 2000,
    seed: int = 0,
) -> dict:
    """Demo calibration stored in a checkpoint: per-dimension scale (the actions' std) and tau, the
    ``quantile`` of the velocity change over up to ``max_chunks`` demo chunks a_{t:t+H} (within episodes)."""
    actions = np.asarray(actions, dtype=np.float64)
    scale = np.maximum(actions.std(0), 1e-3)
    rng = np.random.default_rng(seed)
    starts = [t for t in range(len(actions)) if t + 3 <= episode_end[t]]  # chunks end at their episode's end
    if not starts:
        raise ValueError("no demo chunk of at least 3 actions inside an episode")
    pick = rng.choice(starts, size=min(max_chunks, len(starts)), replace=False)
    chunks = [actions[t : min(t + chunk_size, int(episode_end[t]))] for t in pick]
    tau = calibrate_tau(chunks, dt, quantile, scale)
    taus = {str(q): calibrate_tau(chunks, dt, q, scale) for q in CALIBRATION_QUANTILES}
    return {
        "tau": tau,
        "taus": taus,  # tau at other quantiles, so a deployment can choose a stricter one
        "scale": scale.tolist(),
        "quantile": quantile,
        "dt": dt,
        "chunks": len(pick),
    }


def tau_from_calibration(calib: dict, quantile: float | None = None) -> float:
    """The calibrated tau, at ``quantile`` if given (one of :data:`CALIBRATION_QUANTILES`)."""
    if quantile is None:
        return float(calib["tau"])
    taus = calib.get("taus", {})
    if str(quantile) not in taus:
        raise KeyError(
            f"no tau calibrated at quantile {quantile} (have {sorted(taus)}; recalibrate from the demos)"
        )
    return float(taus[str(quantile)])
