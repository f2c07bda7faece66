"""Where the Hydra YAML lives, and turning a composed config into its typed dataclass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vla.errors import InputError

CONFIG_DIR = str(Path(__file__).resolve().parents[1] / "configs")


def typed_config(cfg: Any) -> Any:
    """The typed dataclass of a composed Hydra config (``OmegaConf.to_object``).

    Raises:
        InputError: A mandatory value (``???``) was not given: one line naming its key, e.g.
            ``checkpoint= is required``, instead of OmegaConf's traceback.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue

    try:
        return OmegaConf.to_object(cfg)
    except MissingMandatoryValue as exc:
        key = getattr(exc, "full_key", None) or str(exc).splitlines()[0]
        raise InputError(f"{key}= is required: pass {key}=<value> on the command line") from None
