"""Critics that turn episodes into credit: RECAP's distributional value, AWBC's expectile value, ALOE's
chunk-level Q ensemble and HABC's viability/efficiency heads (``CRITICS`` registry)."""

from training.critics.base import (
    CRITICS,
    Critic,
    CriticConfig,
    critic_config,
    load_critic_weights,
    read_critic_config,
)
from training.critics.habc import HABCConfig, ViabilityEfficiencyCritic
from training.critics.q_chunk import ChunkQCritic, QChunkConfig
from training.critics.value import DistributionalValue, ExpectileValue, ValueConfig

__all__ = [
    "CRITICS",
    "ChunkQCritic",
    "Critic",
    "CriticConfig",
    "DistributionalValue",
    "ExpectileValue",
    "HABCConfig",
    "QChunkConfig",
    "ValueConfig",
    "ViabilityEfficiencyCritic",
    "critic_config",
    "load_critic_weights",
    "read_critic_config",
]
