"""Robot models assembled from meshes that ship in PyPI packages (see sim/assets/README.md)."""

from sim.robots.panda import PANDA, RobotInfo, attach_panda

__all__ = ["PANDA", "RobotInfo", "attach_panda"]
