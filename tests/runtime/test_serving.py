"""``vla-serve``: the same chunks as local sampling, error replies that keep the server serving, the token,
LeRobot's async-inference messages, and ``vla-eval deploy.remote=`` matching a local evaluation."""

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest
import torch

from policies.flow_matching import FlowMatchingPolicy, debug_config
from vla.runtime import PolicyRunner
from vla.runtime.remote import RemoteSampler
from vla.serving import wire

BIN = Path(sys.executable).parent
H, W = 32, 32


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("served") / "fm"
    FlowMatchingPolicy(debug_config()).save(path)
    return path


def _serve(ckpt, *args, env=None):
    """``vla-serve checkpoint=<dir> port=0`` as the docs start it; returns the process and its address."""
    proc = subprocess.Popen(
        [str(BIN / "vla-serve"), f"checkpoint={ckpt}", "port=0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    line = proc.stdout.readline()
    if not line.startswith("serving "):
        proc.kill()
        raise AssertionError(f"vla-serve did not start: {line!r} {proc.stderr.read()}")
    return proc, line.split(" on ")[1].split()[0]


@pytest.fixture(scope="module")
def server(ckpt):
    proc, address = _serve(ckpt)
    yield address
    proc.terminate()
    proc.wait(10)


def _obs(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "agentview": rng.integers(0, 255, (H, W, 3), dtype=np.uint8),
        "wrist": rng.integers(0, 255, (H, W, 3), dtype=np.uint8),
        "state": rng.normal(size=8).astype(np.float32),
        "instruction": "reach the red cube",
    }


def test_the_server_returns_the_local_chunk_under_the_same_noise(ckpt, server):
    remote = RemoteSampler(server, seed=3)
    local = PolicyRunner(FlowMatchingPolicy.load(ckpt), cameras=["agentview", "wrist"], seed=3)
    for i in range(3):  # the noise stream advances identically on both sides
        np.testing.assert_allclose(remote(_obs(i)), local(_obs(i)), rtol=0, atol=1e-5)
    prefix = np.linspace(-1, 1, 4 * 8, dtype=np.float32).reshape(4, 8)  # RTC: inpainted the same way
    np.testing.assert_allclose(remote(_obs(5), prefix, 2), local(_obs(5), prefix, 2), rtol=0, atol=1e-5)
    remote.reseed(3)
    local.reseed(3)
    np.testing.assert_allclose(remote(_obs(0)), local(_obs(0)), rtol=0, atol=1e-5)
    assert remote.chunk_size == 8 and remote.action_dim == local.action_dim
    assert len(remote.round_trips) == 5 and min(remote.round_trips) >= min(remote.latencies) > 0


def _raw(address, data, **kw):
    with grpc.insecure_channel(address) as ch:
        return ch.unary_unary(f"/{wire.SERVICE}/Sample")(data, timeout=10, **kw)


@pytest.mark.parametrize(
    ("make", "code", "says"),
    [
        (lambda: b"not ours", grpc.StatusCode.INVALID_ARGUMENT, "not a vla-serve message"),
        (lambda: wire.MAGIC + b"\xff" * 40, grpc.StatusCode.INVALID_ARGUMENT, "header of"),
        (
            lambda: wire.encode({}, {"state": np.zeros(8, np.float32)}),
            grpc.StatusCode.INVALID_ARGUMENT,
            "image.agentview: missing",
        ),
        (
            lambda: wire.encode(
                {},
                {
                    **{f"image.{c}": np.zeros((H, W, 3), np.uint8) for c in ("agentview", "wrist")},
                    "state": np.zeros(5, np.float32),
                },
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "state: 5 values for a policy of state_dim=8",
        ),
        (
            lambda: wire.encode(
                {},
                {
                    **{f"image.{c}": np.zeros((64, 64, 3), np.uint8) for c in ("agentview", "wrist")},
                    "state": np.zeros(8, np.float32),
                },
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "64x64 for a policy trained on 32x32",
        ),
        (lambda: wire.encode({"num_steps": -1}, {}), grpc.StatusCode.INVALID_ARGUMENT, "state: missing"),
        (lambda: b"x" * (17 * 2**20), grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than max"),
    ],
    ids=["foreign", "garbled", "no-camera", "state-size", "image-size", "no-state", "oversized"],
)
def test_bad_requests_get_an_error_reply_and_the_server_keeps_serving(server, make, code, says):
    with pytest.raises(grpc.RpcError) as err:
        _raw(server, make())
    assert err.value.code() == code and says in err.value.details()
    assert RemoteSampler(server)(_obs()).shape == (8, 8)  # still serving


def test_a_nan_state_is_refused_and_the_client_raises_naming_the_server(server):
    remote = RemoteSampler(server)
    with pytest.raises(RuntimeError, match=f"policy server {server}: INVALID_ARGUMENT: state: non-finite"):
        remote({**_obs(), "state": np.full(8, np.nan, np.float32)})


def test_the_token_is_required_when_set_and_beyond_loopback(ckpt, tmp_path):
    res = subprocess.run(
        [str(BIN / "vla-serve"), f"checkpoint={ckpt}", "host=0.0.0.0", "port=0"],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "VLA_SERVE_TOKEN"},
    )
    assert res.returncode == 2 and "host=0.0.0.0 is reachable from other machines: give a token" in res.stderr
    proc, address = _serve(ckpt, env={"VLA_SERVE_TOKEN": "s3cret"})
    try:
        for token in ("wrong", ""):
            with pytest.raises(ConnectionError, match="UNAUTHENTICATED: wrong or missing token"):
                RemoteSampler(address, token=token, timeout_s=5)
        with pytest.raises(grpc.RpcError) as err:
            _raw(address, b"junk", metadata=(("authorization", "Bearer nope"),))
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert RemoteSampler(address, token="s3cret")(_obs()).shape == (8, 8)
    finally:
        proc.terminate()
        proc.wait(10)


# ---- LeRobot's async-inference protocol -------------------------------------------------------------------
def test_lerobots_robot_client_messages_get_our_chunks(server):
    """The calls and payloads LeRobot's ``RobotClient`` makes (its stub, dataclasses and chunked sender)."""
    from lerobot.async_inference.helpers import RemotePolicyConfig, TimedObservation
    from lerobot.transport import services_pb2, services_pb2_grpc
    from lerobot.transport.utils import send_bytes_in_chunks

    motors = [f"joint_{i}.pos" for i in range(7)] + ["gripper.pos"]
    features = {
        "observation.state": {"dtype": "float32", "shape": (8,), "names": motors},
        "observation.images.front": {"dtype": "image", "shape": (48, 64, 3), "names": ["h", "w", "c"]},
        "observation.images.wrist": {"dtype": "image", "shape": (48, 64, 3), "names": ["h", "w", "c"]},
    }
    spec = RemotePolicyConfig(
        policy_type="smolvla",
        pretrained_name_or_path="ignored",
        lerobot_features=features,
        actions_per_chunk=5,
        rename_map={"observation.images.front": "observation.images.agentview"},
    )
    rng = np.random.default_rng(0)
    raw = {m: float(v) for m, v in zip(motors, rng.normal(size=8), strict=True)}
    raw |= {c: rng.integers(0, 255, (48, 64, 3), dtype=np.uint8) for c in ("front", "wrist")}
    raw["task"] = "reach the red cube"
    with grpc.insecure_channel(server) as ch:
        stub = services_pb2_grpc.AsyncInferenceStub(ch)
        stub.Ready(services_pb2.Empty())
        stub.SendPolicyInstructions(services_pb2.PolicySetup(data=pickle.dumps(spec)))
        obs = TimedObservation(timestamp=100.0, timestep=7, observation=raw, must_go=True)
        stub.SendObservations(send_bytes_in_chunks(pickle.dumps(obs), services_pb2.Observation))
        actions = pickle.loads(stub.GetActions(services_pb2.Empty()).data)
        assert [a.timestep for a in actions] == [7, 8, 9, 10, 11]
        assert actions[1].timestamp == pytest.approx(100.0 + 1 / 30)
        assert all(a.action.shape == (8,) and torch.isfinite(a.action).all() for a in actions)
        assert stub.GetActions(services_pb2.Empty()).ByteSize() == 0  # no new observation: an empty reply

        class Evil:
            def __reduce__(self):
                return (os.system, ("true",))

        with pytest.raises(grpc.RpcError) as err:
            stub.SendPolicyInstructions(services_pb2.PolicySetup(data=pickle.dumps(Evil())))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "refused: the message names posix.system" in err.value.details()
        stub.SendObservations(send_bytes_in_chunks(pickle.dumps(obs), services_pb2.Observation))
        assert len(pickle.loads(stub.GetActions(services_pb2.Empty()).data)) == 5  # still serving


# ---- vla-eval against the server --------------------------------------------------------------------------
def _eval(tmp_path, name, *args):
    out = tmp_path / name
    res = subprocess.run(
        [str(BIN / "vla-eval"), "task=reach", "episodes=2", "videos=0", f"out={out}", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    records = json.loads((out / "eval.json").read_text())["episodes"]
    return res.stdout, [(r["success"], r["length"], r["policy_calls"], round(r["jerk"], 6)) for r in records]


def test_vla_eval_on_a_server_plays_the_local_episodes(ckpt, server, tmp_path):
    _, local = _eval(tmp_path, "local", f"checkpoint={ckpt}", "workers=1")
    out, remote = _eval(tmp_path, "remote", f"deploy.remote={server}", "workers=2")  # no checkpoint here
    assert remote == local and len(local) == 2 and all(jerk > 0 for *_, jerk in local)  # the arm moved
    assert "success: " in out
