"""Headless backend selection: EGL by default, OSMesa as fallback, one clear error when neither works."""

import json
import os
import subprocess
import sys

import pytest

from sim.rendering import GL_ERROR_ENV, RenderingUnavailableError, check_rendering

SNIPPET = """
import json, sys, numpy as np
import sim
from sim.env import EnvConfig, TabletopEnv
env = TabletopEnv(EnvConfig(task="stack", image_size=(48, 48)))
obs, _ = env.reset(seed=2)
print(json.dumps({"backend": sim.GL_BACKEND, "mean": float(obs["agentview"].mean()),
                  "img": obs["agentview"][::8, ::8].tolist()}))
env.close()
"""


def _render(mujoco_gl: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", GL_ERROR_ENV)}
    if mujoco_gl:
        env["MUJOCO_GL"] = mujoco_gl
    cmd = [sys.executable, "-c", SNIPPET]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr, out.stderr  # no teardown noise from the GL library
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_automatic_choice_prefers_egl_and_both_backends_agree():
    auto = _render(None)
    assert auto["backend"] in ("egl", "osmesa")
    egl, osmesa = _render("egl"), _render("osmesa")
    assert auto["backend"] == "egl"  # EGL works on this machine (Mesa llvmpipe), so it is chosen
    import numpy as np

    diff = np.abs(np.array(egl["img"], dtype=float) - np.array(osmesa["img"], dtype=float)).mean()
    assert diff < 8.0, f"EGL and OSMesa images differ by {diff:.1f} grey levels on average"


def test_no_backend_gives_one_error_that_says_what_to_install(monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "disable")
    monkeypatch.setenv(GL_ERROR_ENV, "egl: EGL_NOT_INITIALIZED; osmesa: libOSMesa.so not found")
    with pytest.raises(RenderingUnavailableError) as exc:
        check_rendering()
    msg = str(exc.value)
    assert "apt-get install libegl1" in msg and "libosmesa6" in msg and "EGL_NOT_INITIALIZED" in msg
