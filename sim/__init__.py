"""MuJoCo tabletop tasks, scripted experts and the evaluation harness.

Importing ``sim`` selects a headless OpenGL backend (EGL, else OSMesa) before MuJoCo is imported.
"""

from sim.rendering import configure_gl

GL_BACKEND = configure_gl()
