"""The core: episode data on LeRobotDataset v3, registries; later the runtime (no mujoco, no rclpy here)."""
