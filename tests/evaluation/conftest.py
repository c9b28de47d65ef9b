"""Fixtures of the evaluator tests: a bag-of-words encoder (the generated SentEval tree, ``fixture_dir``, is
tests/conftest.py's: tests/senteval/ reads it too)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest


def _word_vec(word: str, dim: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32)


class CountingEncoder:
    """Mean of fixed per-word Gaussian vectors; records every call."""

    def __init__(self, dim: int = 16):
        self.dim, self.calls = dim, []

    def __call__(self, sentences):
        self.calls.append(list(sentences))
        out = np.zeros((len(sentences), self.dim), np.float32)
        for i, s in enumerate(sentences):
            out[i] = np.mean([_word_vec(w, self.dim) for w in (s.lower().split() or ["<empty>"])], axis=0)
        return out


@pytest.fixture
def encoder():
    return CountingEncoder()
