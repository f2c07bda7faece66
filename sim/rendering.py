"""Headless MuJoCo rendering: EGL by default, OSMesa as fallback, chosen once per process tree.

MuJoCo reads ``MUJOCO_GL`` when it is first imported, so :func:`configure_gl` must run before
``import mujoco``; ``sim/__init__.py`` calls it. The choice is stored in the environment, so worker
processes inherit it without probing again.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import weakref

_PROBE = (
    "import mujoco\n"
    "m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom size=\".1\"/></worldbody></mujoco>')\n"
    "r = mujoco.Renderer(m, 8, 8); d = mujoco.MjData(m); r.update_scene(d); r.render(); r.close()\n"
)
_INSTALL_HINT = (
    "headless rendering is unavailable: neither EGL nor OSMesa could create an OpenGL context.\n"
    "Install one of them (Debian/Ubuntu): apt-get install libegl1 libegl-mesa0 libgl1   "
    "(EGL, preferred)  or  apt-get install libosmesa6   (OSMesa), or run `make sysdeps`.\n"
    "To force a backend set MUJOCO_GL=egl|osmesa|glfw."
)
GL_ERROR_ENV = "VLA_GL_ERROR"


class RenderingUnavailableError(RuntimeError):
    """No OpenGL backend works on this machine; the message says what to install."""


def _probe(backend: str) -> str | None:
    env = dict(os.environ, MUJOCO_GL=backend, PYOPENGL_PLATFORM=backend)
    try:
        out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if out.returncode == 0:
        return None
    return out.stderr.decode(errors="replace").strip().splitlines()[-1:][0] if out.stderr else "failed"


def configure_gl() -> str:
    """Pick the OpenGL backend (respecting an explicit ``MUJOCO_GL``) and export it.

    Returns:
        The backend name ("egl", "osmesa", or whatever the user set).
    """
    chosen = os.environ.get("MUJOCO_GL")
    if chosen:
        os.environ.setdefault("PYOPENGL_PLATFORM", chosen if chosen in ("egl", "osmesa") else "")
        return chosen
    errors = []
    for backend in ("egl", "osmesa"):
        err = _probe(backend)
        if err is None:
            os.environ["MUJOCO_GL"] = backend
            os.environ["PYOPENGL_PLATFORM"] = backend
            return backend
        errors.append(f"{backend}: {err}")
    # Keep MuJoCo importable (physics works without GL); rendering raises the clear error.
    os.environ["MUJOCO_GL"] = "disable"
    os.environ[GL_ERROR_ENV] = "; ".join(errors)
    return "disable"


def check_rendering() -> None:
    """Raise :class:`RenderingUnavailableError` if :func:`configure_gl` found no backend."""
    if os.environ.get("MUJOCO_GL") == "disable" and GL_ERROR_ENV in os.environ:
        raise RenderingUnavailableError(f"{_INSTALL_HINT}\n(probe: {os.environ[GL_ERROR_ENV]})")


def speed_up_visuals(model) -> None:
    """Switch off shadows, reflections and anti-aliasing: ~15x faster software rendering."""
    model.light_castshadow[:] = 0
    model.mat_reflectance[:] = 0
    model.vis.quality.offsamples = 0
    model.vis.quality.shadowsize = 0


_LIVE: weakref.WeakSet = weakref.WeakSet()
_ATEXIT = []


def _close_live_renderers() -> None:
    """Free GL contexts before interpreter teardown (EGL raises from __del__ once its library is gone)."""
    for r in list(_LIVE):
        r.close()


class CameraRenderer:
    """Renders a set of named cameras of one model into uint8 HxWx3 arrays, reusing one GL context."""

    def __init__(self, model, cameras: dict[str, tuple[int, int]]) -> None:
        check_rendering()
        import mujoco

        self._renderers: dict = {}
        for name in cameras:
            if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name) < 0:
                raise KeyError(f"camera {name!r} not in the model")
        self.cameras = dict(cameras)
        sizes = {hw for hw in self.cameras.values()}
        self._renderers = {hw: mujoco.Renderer(model, hw[0], hw[1]) for hw in sizes}
        self._option = mujoco.MjvOption()
        _LIVE.add(self)
        if not _ATEXIT:  # registered after MuJoCo's own EGL teardown hook, so it runs before it
            atexit.register(_close_live_renderers)
            _ATEXIT.append(True)

    def render(self, data) -> dict[str, object]:
        """Return {camera name: uint8 [H, W, 3]} for the current ``data``."""
        out = {}
        for name, hw in self.cameras.items():
            r = self._renderers[hw]
            r.update_scene(data, camera=name, scene_option=self._option)
            out[name] = r.render().copy()
        return out

    def close(self) -> None:
        for r in getattr(self, "_renderers", {}).values():
            r.close()
        self._renderers = {}

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
