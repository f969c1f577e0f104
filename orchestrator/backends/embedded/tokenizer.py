"""A character tokenizer for the synthetic tasks: one token per character, plus PAD/BOS/EOS."""

from __future__ import annotations

from collections.abc import Sequence

PAD, BOS, EOS = 0, 1, 2
_SPECIALS = ("<pad>", "<bos>", "<eos>")
# Every character any task may put in a prompt or an answer.
ALPHABET = "0123456789+-*=,"


class CharTokenizer:
    """Maps characters of :data:`ALPHABET` to ids; ids 0..2 are PAD, BOS and EOS."""

    def __init__(self, alphabet: str = ALPHABET) -> None:
        if len(set(alphabet)) != len(alphabet):
            raise ValueError("alphabet has repeated characters")
        self.alphabet = alphabet
        self._to_id = {ch: i + len(_SPECIALS) for i, ch in enumerate(alphabet)}

    @property
    def vocab_size(self) -> int:
        """Number of distinct ids, specials included."""
        return len(_SPECIALS) + len(self.alphabet)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``; a character outside the alphabet raises ``ValueError``."""
        try:
            return [self._to_id[ch] for ch in text]
        except KeyError as exc:
            raise ValueError(
                f"character {exc.args[0]!r} is not in the tokenizer alphabet") from None

    def encode_prompt(self, text: str) -> list[int]:
        """``BOS`` followed by the ids of ``text``: what the model conditions on."""
        return [BOS, *self.encode(text)]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` up to (excluding) the first EOS; PAD and BOS are dropped."""
        out = []
        for i in ids:
            if i == EOS:
                break
            if i >= len(_SPECIALS):
                out.append(self.alphabet[i - len(_SPECIALS)])
        return "".join(out)


TOKENIZER = CharTokenizer()
