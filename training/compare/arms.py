"""The arms of a comparison: the iterated baselines, the methods and their ablations, each one preset.

Every arm runs the same rounds from the same base on the same data, rollouts, seeds and steps; only its
preset (``configs/experiment/posttrain_<preset>.yaml``) differs. The baselines:

- ``control``: SFT continued on all data (``posttrain_sft``);
- ``filtered_bc``: SFT continued on the successful episodes only (``posttrain_filtered_bc``);
- ``hg_dagger``: HG-DAgger, the operator's takeover frames plus successful autonomous episodes and demos
  (``posttrain_hg_dagger``).

A method's headline is its lift over the *best* baseline present (by final-round success, and separately
by takeovers per episode).
"""

from __future__ import annotations

from collections.abc import Sequence

BASELINES = ("control", "filtered_bc", "hg_dagger")
METHODS = ("recap", "aloe", "habc", "awbc", "apo", "flow_dpo")  # credit, then preference methods
ABLATIONS = ("habc_mc",)  # a method's variant with a preset of its own, shown beside it
ARMS = (*BASELINES, *METHODS, *ABLATIONS)
PRESETS = {"control": "posttrain_sft"}  # every other arm's preset is posttrain_<arm>
# methods with no critic: a candidate's algo.critic.* overrides do not apply to them
NO_CRITIC = frozenset({*BASELINES, "apo"})
# an arm's wall time relative to the others', for the order arms start in (ALOE's online critic: about 5x)
COST = {"aloe": 5.0}


def preset(arm: str) -> str:
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}: use one of {', '.join(ARMS)}")
    return PRESETS.get(arm, f"posttrain_{arm}")


def arm_overrides(arm: str, extra: Sequence[str] = ()) -> list[str]:
    """An arm's preset plus ``extra`` (a candidate's overrides of the method arms; tune phase): baselines
    never take them, and ``algo.critic.*`` ones apply only to methods with a critic."""
    out = [f"experiment={preset(arm)}"]
    if arm in BASELINES:
        return out
    return [*out, *(o for o in extra if arm not in NO_CRITIC or not o.startswith("algo.critic."))]


def split(arms: Sequence[str]) -> tuple[list[str], list[str]]:
    """``arms`` as (baselines, the rest), each in the order of :data:`ARMS`; a duplicate is dropped."""
    for a in arms:
        preset(a)  # an unknown name is refused here, by name
    ordered = [a for a in ARMS if a in arms]
    return [a for a in ordered if a in BASELINES], [a for a in ordered if a not in BASELINES]
