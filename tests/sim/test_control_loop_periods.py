"""benchmarks/control_loop.py's period accounting: policy periods exclude each episode's warm-up (the
first chunk, then catching up on the schedule) and the periods held after a fault; jitter never spans two
episodes."""

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from control_loop import PeriodLog

DT = 0.02


def _episode(log, starts, holding=()):
    log.on_start(None, None)
    for i, t in enumerate(starts):
        out = SimpleNamespace(holding=i in holding)
        log.on_step(SimpleNamespace(index=i, wall_time=t, work_s=0.005, out=out))
    log.on_end(None)


def test_policy_periods_and_jitter_per_episode():
    log = PeriodLog(warmup=2, dt=DT)
    _episode(log, [0.0, 0.05, 0.07, 0.09, 0.111, 0.13])  # a slow first period, then on the schedule
    _episode(log, [10.0, 10.02, 10.04, 10.06, 10.08], holding={3, 4})  # a fault in period 3
    assert (log.periods, log.policy_periods, log.warmup_periods) == (11, 4 + 1, 2 + 2)
    jitter = log.jitter_ms()
    # policy periods with a successor in their episode: 2, 3, 4 of the first; 2 of the second
    assert jitter == pytest.approx([0.0, 1.0, 1.0, 0.0], abs=1e-6)
    assert np.all(log.work_ms() == pytest.approx(5.0))


def test_the_warm_up_lasts_until_the_loop_is_back_on_its_schedule():
    log = PeriodLog(warmup=2, dt=DT)
    starts = [0.0, 0.045, 0.053, 0.0615, 0.08, 0.10, 0.12, 0.14, 0.16]  # catching up after a 45 ms period
    _episode(log, starts)
    assert (log.warmup_periods, log.policy_periods) == (4, 5)
    assert log.jitter_ms() == pytest.approx([0.0] * 4, abs=1e-6)
