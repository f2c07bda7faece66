"""The self-compensator learns a known execution error (offset + backlash) on a toy joint system."""

import numpy as np
import pytest

from vla.runtime.compensation import CompensationConfig, SelfCompensator


class ToyArm:
    """Each period the joint reaches command + offset, minus half the backlash against the motion."""

    def __init__(self, offset, backlash):
        self.offset, self.backlash = np.asarray(offset), np.asarray(backlash)
        self.q = np.zeros(len(offset))
        self.prev = np.zeros(len(offset))

    def step(self, c):
        direction = np.sign(c - self.prev)
        self.q = c + self.offset - 0.5 * self.backlash * direction
        self.prev = c.copy()
        return self.q.copy()


def run(comp, steps=400, seed=0):
    arm = ToyArm([0.05, -0.03, 0.0], [0.02, 0.04, 0.0])
    rng = np.random.default_rng(seed)
    errors, prev = [], np.zeros(3)
    for t in range(steps):
        target = 0.5 * np.sin(0.05 * t + np.arange(3)) + 0.01 * rng.normal(size=3)  # a smooth reference
        q = arm.q.copy()
        c = comp.compensate(target, q, prev)
        reached = arm.step(c)
        comp.record(q, c, prev, reached)
        comp.wait()  # test determinism only: in deployment the fit never blocks the loop
        prev = c
        errors.append(np.abs(reached - target).mean())
    return np.array(errors)


def test_compensator_learns_offset_and_backlash():
    off = run(SelfCompensator(3, CompensationConfig(enabled=False)))
    on = run(SelfCompensator(3, CompensationConfig(update_every=20, min_samples=40)))
    assert off[-100:].mean() > 0.02
    assert on[-100:].mean() < 0.2 * off[-100:].mean()


def test_trust_region_bounds_the_correction_and_save_load_round_trips(tmp_path):
    comp = SelfCompensator(3, CompensationConfig(update_every=20, min_samples=40, trust_region=0.01))
    run(comp, steps=100)
    a, q, prev = np.full(3, 0.2), np.zeros(3), np.zeros(3)
    c = comp.compensate(a, q, prev)
    assert np.all(np.abs(c - a) <= 0.01 + 1e-12) and np.any(c != a)
    loaded = SelfCompensator.load(comp.save(tmp_path / "comp.json"))
    np.testing.assert_allclose(loaded.compensate(a, q, prev), c)
    off = SelfCompensator.load(tmp_path / "comp.json", CompensationConfig(enabled=False))
    np.testing.assert_allclose(off.compensate(a, q, prev), a)  # the switch


def test_buffer_persists_and_workers_pool(tmp_path):
    """Saved with its buffer, a compensator resumes learning; two workers' halves pool into one model."""
    cfg = CompensationConfig(update_every=20, min_samples=40)
    a, b = SelfCompensator(3, cfg), SelfCompensator(3, cfg)
    run(a, steps=150, seed=0)
    run(b, steps=150, seed=1)
    resumed = SelfCompensator.load(a.save(tmp_path / "a.json", buffer=True))
    assert resumed.samples == a.samples == 150 and resumed.fits == a.fits
    errors = run(resumed, steps=50, seed=2)
    assert resumed.samples == 200
    fresh = run(SelfCompensator(3, cfg), steps=50, seed=2)
    assert errors.mean() < 0.3 * fresh.mean()  # compensated from its first step: no relearning
    b.save(tmp_path / "b.json", buffer=True)
    pooled = SelfCompensator.merged([tmp_path / "a.json", tmp_path / "b.json"])
    assert pooled.samples == 300 and pooled.fits == 1
    np.testing.assert_allclose(pooled.weights, a.weights, atol=0.01)  # the same arm, the same model


def test_load_names_a_bad_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"bad\.json: not a saved compensator"):
        SelfCompensator.load(bad)
