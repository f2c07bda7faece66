"""Hydra entry points of the training stack."""
