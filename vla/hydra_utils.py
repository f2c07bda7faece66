"""Where the Hydra YAML lives, and turning a composed config into its typed dataclass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vla.errors import InputError

CONFIG_DIR = str(Path(__file__).resolve().parents[1] / "configs")
# keys renamed on the command line (old -> new): an old spelling is refused with one line naming the new key
RENAMED_KEYS = {
    "deploy.executor.horizon": "deploy.horizon",
    "env.horizon": "deploy.horizon",
    "loop.rollouts_dir": "loop.base_rollouts_dir",  # round 1's only now: rounds >= 2 are each run's own
}


def typed_config(cfg: Any) -> Any:
    """The typed dataclass of a composed Hydra config (``OmegaConf.to_object``).

    Raises:
        InputError: A mandatory value (``???``) was not given: one line naming its key, e.g.
            ``checkpoint= is required``, instead of OmegaConf's traceback; or a config class refused a
            value (its ``__post_init__``'s ``ValueError`` or ``KeyError``, e.g. ``unknown task 'nope'``).
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue

    try:
        return OmegaConf.to_object(cfg)
    except MissingMandatoryValue as exc:
        key = getattr(exc, "full_key", None) or str(exc).splitlines()[0]
        raise InputError(f"{key}= is required: pass {key}=<value> on the command line") from None
    except (ValueError, KeyError) as exc:  # a config class's own check (InputError is a ValueError)
        raise InputError(str(exc.args[0]) if exc.args else repr(exc)) from None


def refuse_renamed(overrides: Sequence[str], renamed: Mapping[str, str] = RENAMED_KEYS) -> None:
    """Refuse an override that spells a key the old way (``deploy.executor.horizon=3``): one line naming
    the key it is now, instead of Hydra's multi-line error for an unknown key.

    Raises:
        InputError: An override's key (``+``, ``++``, ``~`` prefixes aside) is one of ``renamed``.
    """
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if key in renamed:
            raise InputError(f"{key}= is now {renamed[key]}=: pass {renamed[key]}=<value>")


def schema_node(schema: type, open_dicts: Sequence[str] = ()) -> Any:
    """A structured config of ``schema`` for the ConfigStore, with the ``dict`` fields at ``open_dicts``
    (dotted paths, e.g. ``"data.keys.image"``) open to new keys: ``data.keys.image.agentview=...`` then
    works on the command line without Hydra's ``+`` (Hydra makes every node struct, dicts included)."""
    from omegaconf import OmegaConf

    node = OmegaConf.structured(schema)
    for path in open_dicts:
        child = node
        for part in path.split("."):
            child = child[part]  # item access: ``keys`` is also a DictConfig method
        OmegaConf.set_struct(child, False)
    return node
