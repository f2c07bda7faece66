"""A policy behind the network: ``vla-serve`` (:mod:`vla.serving.server`) answers chunk requests from
:class:`vla.runtime.remote.RemoteSampler` (our protocol, :mod:`vla.serving.wire`) and from LeRobot's
async-inference robot client (:mod:`vla.serving.lerobot_protocol`)."""
