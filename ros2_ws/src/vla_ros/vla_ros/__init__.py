"""vla_ros: deploy a vla-posttrain policy behind ros2_control (see deploy_node.py, sim_robot_node.py)."""
