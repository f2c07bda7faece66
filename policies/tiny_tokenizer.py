"""A small byte-level BPE tokenizer trained offline on a few strings (tiny test/benchmark backbones).

Byte-level, so any string tokenises (digits, ``"\\n"``, pi0.5's state prompts); nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def train_tiny_tokenizer(
    texts: Sequence[str], special: Sequence[str], *, vocab_size: int = 384, **named_special: Any
) -> Any:
    """A ``PreTrainedTokenizerFast`` whose vocabulary starts with ``special`` (in order) and holds the byte
    alphabet plus merges learnt from ``texts``. ``named_special`` go to the tokenizer (``pad_token=...``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special),
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator([f"{t}\n" for t in texts] * 4, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, **named_special)
