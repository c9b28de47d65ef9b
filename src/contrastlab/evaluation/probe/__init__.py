"""The transfer probe of the SentEval protocol: one protocol (:mod:`.schemes`) and its fitter.

:mod:`.schemes` writes SentEval's three cross-validation schemes (``tools/validation.py``) once; each
hands its fits to the fitter (:mod:`.senteval`): SentEval's own early-stopped procedure replicated step
for step and batched, with SimCSE's classifier settings for the mode (Adam for ``test``, RMSprop for
``fasttest``/``dev``), which reproduces SentEval's accuracies.
"""

from __future__ import annotations

from contrastlab.evaluation.probe import senteval
from contrastlab.evaluation.probe.schemes import (
    Fit,
    Fitter,
    first_best,
    inner_kfold,
    kfold_then_test,
    split_then_test,
)

__all__ = [
    "Fit",
    "first_best",
    "fitter",
    "inner_kfold",
    "kfold_then_test",
    "split_then_test",
]


def fitter(mode: str) -> Fitter:
    """SentEval's fitter with SimCSE's classifier settings for SentEval ``mode``."""
    return senteval.fitter(senteval.CONFIG_BY_MODE[mode])
