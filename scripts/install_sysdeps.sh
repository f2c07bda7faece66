#!/usr/bin/env bash
# Debian/Ubuntu packages for headless MuJoCo rendering (EGL, OSMesa fallback) and for LeRobot's torchcodec
# video decoder (FFmpeg shared libraries). Skips apt entirely when everything is already there.
set -euo pipefail
need=()
have_lib() { ldconfig -p | grep -q "$1"; }
have_lib 'libEGL.so.1' || need+=(libegl1 libegl-mesa0)
have_lib 'libOSMesa.so' || need+=(libosmesa6)
have_lib 'libGL.so.1' || need+=(libgl1 libglx-mesa0)
have_lib 'libavcodec.so' || need+=(ffmpeg)
# Ubuntu 24.04's system Python 3.12 needs python3.12-venv for `python3.12 -m venv`.
if [ -x /usr/bin/python3.12 ] && ! /usr/bin/python3.12 -c 'import ensurepip' >/dev/null 2>&1; then
  need+=(python3.12-venv)
fi
if [ ${#need[@]} -eq 0 ]; then echo "system packages: ok"; exit 0; fi
echo "installing system packages: ${need[*]}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "system packages: installed"
