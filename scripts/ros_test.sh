#!/usr/bin/env bash
# `colcon build` and `colcon test` of ros2_ws/, inside a private network namespace (loopback only, so no
# DDS traffic leaves the machine), with ROS 2 from the venv's ros-jazzy-* wheels. Fails when ROS is missing
# or when any test fails or is skipped.
set -euo pipefail
venv=$(cd "${1:-.venv}" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv"
export AMENT_PREFIX_PATH="$venv"
export ROS_LOG_DIR="${ROS_LOG_DIR:-$(mktemp -d)}"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$((20 + RANDOM % 80))}"
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 PYTHONWARNINGS=ignore
"$venv/bin/python" -c 'import rclpy, rclpy.lifecycle' \
  || { echo "error: rclpy does not import from $venv; make setup installs ROS 2 (the ros extra)" >&2; exit 1; }
cd "$root/ros2_ws"
rm -rf build/vla_ros/pytest.xml
colcon --log-base log build --base-paths src --build-base build --install-base install
# a private network namespace with only loopback; an unprivileged user maps itself to root in a user
# namespace; where neither is permitted, discovery stays on the host's loopback (LOCALHOST above)
ns=()
if unshare -n true 2>/dev/null; then ns=(unshare -n)
elif unshare -rn true 2>/dev/null; then ns=(unshare -rn)
else echo "warning: no network namespace permitted here; ROS traffic stays on loopback (LOCALHOST)" >&2
fi
"${ns[@]}" bash -euo pipefail -c '
  if [ -n "$(command -v ip)" ]; then ip link set lo up 2>/dev/null || true; fi
  set +u; source install/setup.bash; set -u
  colcon --log-base log test --base-paths src --build-base build --install-base install \
    --event-handlers console_direct+ --pytest-args -q -ra -p no:cacheprovider
  colcon --log-base log test-result --test-result-base build --verbose
'
"$venv/bin/python" - <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse("build/vla_ros/pytest.xml").getroot()
suite = root if root.tag == "testsuite" else root.find("testsuite")
tests, skipped = int(suite.get("tests")), int(suite.get("skipped"))
print(f"ros2_ws: {tests} tests, {skipped} skipped")
sys.exit(1 if skipped or not tests else 0)
PY
