from glob import glob

from setuptools import find_packages, setup

package_name = "vla_ros"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", glob("launch/*.launch.py")),
        ("share/" + package_name + "/config", glob("config/*.yaml")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="vla-posttrain",
    maintainer_email="vla-posttrain@example.com",
    description="Deploy a vla-posttrain policy behind ros2_control: a lifecycle node, a sim robot node.",
    license="Apache-2.0",
    # colcon test runs pytest only when the test extra names it (current setuptools ignores tests_require)
    extras_require={"test": ["pytest"]},
    entry_points={
        "console_scripts": [
            "vla_deploy = vla_ros.deploy_node:main",
            "sim_robot = vla_ros.sim_robot_node:main",
        ],
    },
)
