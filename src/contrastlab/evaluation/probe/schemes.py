"""The transfer probe's protocol (SentEval's ``tools/validation.py``), written once for its fitter.

SentEval scores a transfer task with a logistic-regression probe under one of three cross-validation
schemes, each picking the L2 penalty by the first best rounded accuracy and returning (model-selection
accuracy, test accuracy) in percent rounded to 2 decimals:

- :func:`inner_kfold` (``InnerKFoldClassifier``: MR, CR, SUBJ, MPQA): outer stratified k-fold for the
  score, an inner one on each outer training part picks L2;
- :func:`kfold_then_test` (``KFoldClassifier``: TREC, MRPC): a k-fold on train picks L2, that L2's probe
  on all of train is scored on test;
- :func:`split_then_test` (``SplitClassifier``: SST2): one probe per L2 on train, picked on dev, scored
  on test.

A scheme lists the fits it needs (:class:`Fit`: training rows and, where SentEval passes
``validation_data``, validation rows) and hands them all, with the L2 grid, to a :data:`Fitter` in one
call, so the fitter can train them as one batch; a fit without validation rows holds out
``validation_split`` (:mod:`.senteval`). Folds are ``StratifiedKFold(k, shuffle=True, random_state=seed)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import StratifiedKFold


@dataclass(frozen=True)
class Fit:
    """One ``MLP.fit`` call (made for every L2 value of the grid): rows of the shared feature matrix.

    ``train`` are the rows passed as ``X``, in their order; ``dev`` the rows of ``validation_data``,
    or None (SentEval then draws ``validation_split`` of ``train`` for early stopping)."""

    train: np.ndarray
    dev: np.ndarray | None = None


@dataclass(frozen=True)
class Fitted:
    """The probes a fitter trained, one per fit x L2 value.

    ``dev_accuracy [fits, L2]``: fraction correct of each probe on its fit's ``dev`` rows (NaN for a
    fit without them); ``accuracy(fit, l2_index, rows)``: fraction correct of that probe on ``rows``."""

    dev_accuracy: np.ndarray
    accuracy: Callable[[int, int, np.ndarray], float]


#: ``fitter(X [n, d], y [n], fits, l2_grid, nclasses) -> Fitted``.
Fitter = Callable[[np.ndarray, np.ndarray, Sequence[Fit], Sequence[float], int], Fitted]


def first_best(scores: Sequence[float]) -> int:
    """Index of the first best score (SentEval compares accuracies rounded to 2 decimals)."""
    return int(np.argmax(scores))


def _folds(n_splits: int, seed: int, X, y) -> list[tuple[np.ndarray, np.ndarray]]:
    return list(StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed).split(X, y))


def _percent(fraction: float) -> float:
    return round(100 * fraction, 2)


def inner_kfold(
    X: np.ndarray, y: np.ndarray, *, nclasses: int, k: int, grid: Sequence[float], seed: int, fitter: Fitter
) -> tuple[float, float]:
    """``InnerKFoldClassifier`` (MR, CR, SUBJ, MPQA); (dev acc, test acc) in percent.

    Inner probes are fitted on the inner training folds and scored on (and, by SentEval's fitter,
    early-stopped on) their inner test fold; the outer probe of the chosen L2 is fitted on the outer
    training part and scored on the outer test fold. The dev accuracy is the mean over outer folds
    of the best mean inner accuracy."""
    y = np.asarray(y)
    outer = _folds(k, seed, X, y)
    fits = []
    for train_idx, _ in outer:
        fits += [Fit(train_idx[a], train_idx[b]) for a, b in _folds(k, seed, train_idx, y[train_idx])]
        fits.append(Fit(train_idx))
    fitted = fitter(X, y, fits, grid, nclasses)
    dev, test = [], []
    for o, (_, test_idx) in enumerate(outer):
        first = o * (k + 1)  # the k inner fits of outer fold o, then its outer fit
        inner = fitted.dev_accuracy[first : first + k]
        scores = [_percent(float(np.mean(inner[:, r]))) for r in range(len(grid))]
        best = first_best(scores)
        dev.append(max(scores))
        test.append(_percent(fitted.accuracy(first + k, best, test_idx)))
    return round(float(np.mean(dev)), 2), round(float(np.mean(test)), 2)


def kfold_then_test(
    X_train: np.ndarray,
    y_train: np.ndarray,
    X_test: np.ndarray,
    y_test: np.ndarray,
    *,
    nclasses: int,
    k: int,
    grid: Sequence[float],
    seed: int,
    fitter: Fitter,
) -> tuple[float, float]:
    """``KFoldClassifier`` (TREC, MRPC): k-fold on train picks L2 (probes scored on, and early-stopped
    by SentEval's fitter on, their test fold); the probe of that L2 fitted on all of train is scored on
    test. Returns (cv acc, test acc) in percent."""
    n_train = len(y_train)
    X = np.concatenate([X_train, X_test])
    y = np.concatenate([y_train, y_test])
    fits = [Fit(a, b) for a, b in _folds(k, seed, X_train, y_train)] + [Fit(np.arange(n_train))]
    fitted = fitter(X, y, fits, grid, nclasses)
    scores = [_percent(float(np.mean(fitted.dev_accuracy[:k, r]))) for r in range(len(grid))]
    best = first_best(scores)
    return float(max(scores)), _percent(fitted.accuracy(k, best, np.arange(n_train, len(y))))


def split_then_test(
    X_train: np.ndarray,
    y_train: np.ndarray,
    X_dev: np.ndarray,
    y_dev: np.ndarray,
    X_test: np.ndarray,
    y_test: np.ndarray,
    *,
    nclasses: int,
    grid: Sequence[float],
    fitter: Fitter,
) -> tuple[float, float]:
    """``SplitClassifier`` (SST2): one probe per L2 fitted on train (early-stopped on dev by SentEval's
    fitter), the first best on dev is scored on test (SentEval's refit with that L2 is the same probe).
    Returns (dev acc, test acc) in percent."""
    n_tr, n_dev = len(y_train), len(y_dev)
    X = np.concatenate([X_train, X_dev, X_test])
    y = np.concatenate([y_train, y_dev, y_test])
    fitted = fitter(X, y, [Fit(np.arange(n_tr), np.arange(n_tr, n_tr + n_dev))], grid, nclasses)
    scores = [_percent(float(fitted.dev_accuracy[0, r])) for r in range(len(grid))]
    best = first_best(scores)
    return float(max(scores)), _percent(fitted.accuracy(0, best, np.arange(n_tr + n_dev, len(y))))
