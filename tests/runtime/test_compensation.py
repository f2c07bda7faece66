"""The self-compensator learns a known execution error (offset + backlash) on a toy joint system."""

import numpy as np

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
