"""ros2 launch vla_ros sim.launch.py checkpoint:=<folder> [task:=reach] [image_size:=96,96]
[record:=<dir> instruction:=<text>]

The deploy node with the MuJoCo arm behind ROS topics (``sim_robot``): the whole ROS loop without
hardware. Same arguments as ``deploy.launch.py`` with ``use_sim:=true``.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.substitutions import FindPackageShare

PASSED = ("checkpoint", "robot", "params_file", "record", "instruction", "autostart", "task", "image_size")


def generate_launch_description() -> LaunchDescription:
    deploy = IncludeLaunchDescription(
        PythonLaunchDescriptionSource([FindPackageShare("vla_ros"), "/launch/deploy.launch.py"]),
        launch_arguments={"use_sim": "true", **{n: LaunchConfiguration(n) for n in PASSED}}.items(),
    )
    defaults = {
        "checkpoint": "",
        "robot": "panda",
        "params_file": "",
        "record": "",
        "instruction": "",
        "autostart": "true",
        "task": "reach",
        "image_size": "96,96",
    }
    return LaunchDescription([*(DeclareLaunchArgument(n, default_value=defaults[n]) for n in PASSED), deploy])
