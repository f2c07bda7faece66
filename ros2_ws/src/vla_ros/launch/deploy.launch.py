"""ros2 launch vla_ros deploy.launch.py checkpoint:=<folder> robot:=panda [params_file:=<yaml>]
[use_sim:=false] [record:=<dataset folder> instruction:=<text>] [autostart:=true]

Starts ``vla_deploy`` (a lifecycle node) with the arm's ``config/<robot>.yaml`` plus an optional params
file, configures and activates it (``autostart``); with ``use_sim:=true`` also the MuJoCo arm behind the
same topics (``sim_robot``), whose scene reset and success report the node then uses. An episode starts
with ``ros2 service call /vla_deploy/start_episode std_srvs/srv/Trigger``.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, OpaqueFunction, RegisterEventHandler
from launch.events import matches_action
from launch_ros.actions import LifecycleNode, Node
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from launch_ros.substitutions import FindPackageShare
from lifecycle_msgs.msg import Transition


def _nodes(context):
    arg = {name: context.launch_configurations[name] for name in ARGUMENTS}
    share = FindPackageShare("vla_ros").perform(context)
    params = [f"{share}/config/{arg['robot']}.yaml"]
    if arg["params_file"]:
        params.append(arg["params_file"])
    use_sim = arg["use_sim"].lower() in ("true", "1", "yes")
    deploy = {"checkpoint": arg["checkpoint"], "record_dir": arg["record"]}
    if arg["instruction"]:  # else the params file's, if any
        deploy["instruction"] = arg["instruction"]
    if use_sim:
        deploy.update({"reset_service": "/sim_robot/reset", "success_topic": "/sim_robot/success"})
    node = LifecycleNode(
        package="vla_ros",
        executable="vla_deploy",
        name="vla_deploy",
        namespace="",
        parameters=[*params, deploy],
        output="screen",
    )
    actions = [node]
    if use_sim:
        sim = {"task": arg["task"], "image_size": [int(v) for v in arg["image_size"].split(",")]}
        actions.append(
            Node(
                package="vla_ros",
                executable="sim_robot",
                name="sim_robot",
                parameters=[*params, sim],
                output="screen",
            )
        )
    if arg["autostart"].lower() in ("true", "1", "yes"):
        configure = ChangeState(
            lifecycle_node_matcher=matches_action(node), transition_id=Transition.TRANSITION_CONFIGURE
        )
        activate = ChangeState(
            lifecycle_node_matcher=matches_action(node), transition_id=Transition.TRANSITION_ACTIVATE
        )
        actions += [
            RegisterEventHandler(
                OnStateTransition(
                    target_lifecycle_node=node,
                    start_state="configuring",
                    goal_state="inactive",
                    entities=[EmitEvent(event=activate)],
                )
            ),
            EmitEvent(event=configure),
        ]
    return actions


ARGUMENTS = {
    "checkpoint": ("", "checkpoint folder (config.yaml, model.safetensors, stats.safetensors)"),
    "robot": ("panda", "arm profile: panda, fr3, ur5e, so101 (config/<robot>.yaml)"),
    "params_file": ("", "a parameters YAML applied after config/<robot>.yaml (e.g. deploy_overrides)"),
    "use_sim": ("false", "also start sim_robot, the MuJoCo arm behind the same topics"),
    "record": ("", "LeRobotDataset folder for intervention collection ('' : no recording)"),
    "instruction": ("", "the task's language instruction (needed with record; '' : the params file's)"),
    "autostart": ("true", "configure and activate the node at launch"),
    "task": ("reach", "sim task (use_sim)"),
    "image_size": ("96,96", "sim camera size H,W (use_sim)"),
}


def generate_launch_description() -> LaunchDescription:
    declared = [DeclareLaunchArgument(n, default_value=d, description=h) for n, (d, h) in ARGUMENTS.items()]
    return LaunchDescription([*declared, OpaqueFunction(function=_nodes)])
