"""LeRobot's async-inference protocol (``transport.AsyncInference``) in front of a :class:`PolicyService`.

LeRobot's ``robot_client`` (``lerobot.async_inference.robot_client``) runs a robot and asks a policy server
for chunks: ``Ready``, ``SendPolicyInstructions`` (a pickled ``RemotePolicyConfig``), then a stream of
``SendObservations`` (pickled ``TimedObservation``: the robot's raw observation dict) and ``GetActions``
(a pickled list of ``TimedAction``, one per action of the chunk). Served here with our checkpoint, so a
LeRobot-driven arm runs our policy unchanged.

Where it does not fit, and what we do instead:

- Its payloads are pickles, which can run code when loaded. We load them with a restricted unpickler that
  admits only LeRobot's three message classes, its feature types and numpy arrays/scalars; anything else
  is refused with an error reply. Our own clients speak ``vla.PolicyServer`` (safetensors, no pickle).
- Its client sends no token, so it can talk to us only where no token is required: on loopback (a
  server bound beyond it requires one). Run the robot client on the server's machine, or tunnel.
- ``RemotePolicyConfig.policy_type`` and ``pretrained_name_or_path`` name a policy for LeRobot's server to
  load; ours serves the checkpoint it was started with, and only checks that it can answer (action size,
  chunk length). ``rename_map`` renames the robot's camera keys to the policy's.
- It has no RTC prefix and no client-owned noise: chunks come from the server's own noise stream
  (reseeded at ``Ready``), so LeRobot-driven episodes are not reproducible bit for bit as ours are.
"""

from __future__ import annotations

import io
import pickle
import queue
import threading
from typing import Any

import grpc
import numpy as np
import torch

from vla.serving.policy_service import PolicyService, RequestError

# (module, name) pairs a LeRobot message may name; numpy's are arrays, dtypes and scalars
ALLOWED = {
    ("lerobot.async_inference.helpers", "TimedObservation"),
    ("lerobot.async_inference.helpers", "RemotePolicyConfig"),
    ("lerobot.async_inference.helpers", "TimedAction"),
    ("lerobot.configs.types", "PolicyFeature"),
    ("lerobot.configs.types", "FeatureType"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy.core.numeric", "_frombuffer"),
}


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED:
            raise RequestError(f"refused: the message names {module}.{name}, not a LeRobot message type")
        return super().find_class(module, name)


def safe_loads(data: bytes, expected: str) -> Any:
    """Unpickle ``data`` admitting only :data:`ALLOWED`; the object must be a LeRobot ``expected``."""
    try:
        obj = _Restricted(io.BytesIO(data)).load()
    except RequestError:
        raise
    except Exception as exc:
        raise RequestError(f"not a pickled {expected}: {type(exc).__name__}: {exc}") from None
    if type(obj).__name__ != expected:
        raise RequestError(f"a {type(obj).__name__} where a {expected} belongs")
    return obj


class LeRobotAsyncInference:
    """``transport.AsyncInference``'s four methods over ``service`` (see the module docstring)."""

    def __init__(self, service: PolicyService, fps: float = 30.0, queue_timeout_s: float = 1.0) -> None:
        from lerobot.transport import services_pb2

        self.pb = services_pb2
        self.service = service
        self.dt = 1.0 / fps
        self.queue_timeout_s = queue_timeout_s
        self.features: dict[str, Any] | None = None
        self.actions_per_chunk = service.chunk_size
        self.rename: dict[str, str] = {}
        self.generator = torch.Generator().manual_seed(0)
        self.observations: queue.Queue = queue.Queue(maxsize=1)  # the latest observation only
        self._lock = threading.Lock()

    def Ready(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self._lock:
            self.observations = queue.Queue(maxsize=1)
            self.generator.manual_seed(0)
        return self.pb.Empty()

    def SendPolicyInstructions(self, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            spec = safe_loads(request.data, "RemotePolicyConfig")
            features = dict(spec.lerobot_features)
            state = features.get("observation.state")
            if not isinstance(state, dict) or not state.get("names"):
                raise RequestError("lerobot_features: no observation.state with motor names")
            n = int(spec.actions_per_chunk)
            if not 1 <= n <= self.service.chunk_size:
                raise RequestError(
                    f"actions_per_chunk={n}: the policy's chunks have {self.service.chunk_size}"
                )
        except RequestError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        self.features, self.actions_per_chunk = features, n
        self.rename = dict(spec.rename_map or {})
        return self.pb.Empty()

    def SendObservations(self, request_iterator: Any, context: grpc.ServicerContext) -> Any:
        data = b"".join(item.data for item in request_iterator)  # TRANSFER_BEGIN .. TRANSFER_END
        try:
            timed = safe_loads(data, "TimedObservation")
            obs = self._observation(timed.observation)
        except RequestError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        with self._lock:
            if self.observations.full():
                self.observations.get_nowait()  # as LeRobot's server: the newest observation wins
            self.observations.put((timed.timestamp, timed.timestep, obs))
        return self.pb.Empty()

    def GetActions(self, request: Any, context: grpc.ServicerContext) -> Any:
        from lerobot.async_inference.helpers import TimedAction

        try:
            t0, step, obs = self.observations.get(timeout=self.queue_timeout_s)
        except queue.Empty:
            return self.pb.Empty()  # LeRobot's reply when no observation came
        arrays = {"state": obs["state"], **{f"image.{k}": v for k, v in obs["images"].items()}}
        meta = {"instruction": obs["instruction"], **self.service.resolved_sampling()}
        try:
            with self._lock:
                arrays["generator"] = self.generator.get_state().numpy()
                _, out = self.service.sample(meta, arrays)
                self.generator.set_state(torch.from_numpy(out["generator"].copy()))
        except RequestError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except Exception as exc:
            context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")
        actions = [
            TimedAction(timestamp=t0 + i * self.dt, timestep=step + i, action=torch.from_numpy(a.copy()))
            for i, a in enumerate(out["chunk"][: self.actions_per_chunk])
        ]
        return self.pb.Actions(data=pickle.dumps(actions))

    def _observation(self, raw: Any) -> dict[str, Any]:
        """LeRobot's raw robot observation (``{"shoulder.pos": 0.1, ..., "front": HxWx3, "task": ...}``) as
        our policy's state, images and instruction, by the features the client sent."""
        if self.features is None:
            raise RequestError("an observation before SendPolicyInstructions")
        if not isinstance(raw, dict):
            raise RequestError(f"the observation is a {type(raw).__name__}, not a dict")
        names = self.features["observation.state"]["names"]
        missing = [n for n in names if n not in raw]
        if missing:
            raise RequestError(f"observation: no {missing[0]!r} (lerobot_features names {len(names)} motors)")
        try:
            state = np.asarray([float(raw[n]) for n in names], dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise RequestError(f"observation: a motor value is not a number ({exc})") from None
        images = {}
        for key in self.features:
            if not key.startswith("observation.images."):
                continue
            cam = key.removeprefix("observation.images.")
            if cam not in raw:
                raise RequestError(f"observation: no image {cam!r} (lerobot_features has {key})")
            ours = self.rename.get(key, key).removeprefix("observation.images.")
            images[ours] = self._fit(np.asarray(raw[cam]), cam)
        task = raw.get("task", "")
        return {"state": state, "images": images, "instruction": task if isinstance(task, str) else ""}

    def _fit(self, img: np.ndarray, cam: str) -> np.ndarray:
        """An HxWx3 uint8 frame at the policy's image size (bilinear, as LeRobot's server resizes)."""
        if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
            raise RequestError(f"observation: image {cam!r} is {img.dtype} {img.shape}, not uint8 [H, W, 3]")
        size = self.service.image_size
        if size is None or tuple(img.shape[:2]) == size:
            return img
        x = torch.from_numpy(img).permute(2, 0, 1)[None].float()
        x = torch.nn.functional.interpolate(x, size=size, mode="bilinear", align_corners=False)
        return x[0].permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8).numpy()


def add_lerobot_service(
    server: grpc.Server, service: PolicyService, fps: float = 30.0
) -> LeRobotAsyncInference:
    """Register LeRobot's ``transport.AsyncInference`` on ``server``."""
    from lerobot.transport import services_pb2_grpc

    servicer = LeRobotAsyncInference(service, fps=fps)
    services_pb2_grpc.add_AsyncInferenceServicer_to_server(servicer, server)
    return servicer
