"""Scripted IK experts for every task."""

from sim.experts.scripted import ExpertNoise, ScriptedExpert, run_expert_episode

__all__ = ["ExpertNoise", "ScriptedExpert", "run_expert_episode"]
