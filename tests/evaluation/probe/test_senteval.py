"""The batched replica of SentEval's probe (evaluation/probe/senteval.py, under the schemes of
evaluation/probe/schemes.py) against a literal, one-probe-at-a-time implementation of SentEval's
procedure (written here from its documented steps: seeded ``nn.Linear``, ``torch.optim.Adam`` with
``weight_decay``, ``nn.CrossEntropyLoss``, NumPy permutations, early stopping with a never-reset
counter), on tiny data."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch
from sklearn.model_selection import StratifiedKFold

from contrastlab.evaluation import probe
from contrastlab.evaluation.probe import senteval as SP

CFG = SP.ProbeConfig(batch_size=16, max_epoch=40)


class LiteralProbe:
    """One SentEval ``MLP(nhid=0)`` probe, unbatched, using torch's own modules and optimiser."""

    def __init__(self, d, nclasses, l2, cfg):
        np.random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.cfg = cfg
        self.model = torch.nn.Linear(d, nclasses)
        self.loss_fn = torch.nn.CrossEntropyLoss(reduction=cfg.reduction)
        if cfg.optim == "rmsprop":  # SentEval: optim.RMSprop(params) at its defaults, then weight_decay
            self.opt = torch.optim.RMSprop(self.model.parameters())
            self.opt.param_groups[0]["weight_decay"] = l2
        else:
            self.opt = torch.optim.Adam(
                self.model.parameters(), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=l2
            )

    def fit(self, X, y, validation_data=None):
        cfg = self.cfg
        if validation_data is None:
            perm = np.random.permutation(len(X))
            cut = int(cfg.validation_split * len(X))
            X, y, dX, dy = X[perm[cut:]], y[perm[cut:]], X[perm[:cut]], y[perm[:cut]]
        else:
            dX, dy = validation_data
        X, y = torch.tensor(X, dtype=torch.float32), torch.tensor(y)
        nepoch, best, count, stop, best_model = 0, -1.0, 0, False, None
        while not stop and nepoch <= cfg.max_epoch:
            for _ in range(cfg.epoch_size):
                perm = np.random.permutation(len(X))
                for i in range(0, len(X), cfg.batch_size):
                    idx = torch.from_numpy(perm[i : i + cfg.batch_size])
                    loss = self.loss_fn(self.model(X[idx]), y[idx])
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
            nepoch += cfg.epoch_size
            acc = self.score(dX, dy)
            if acc > best:
                best, best_model = acc, copy.deepcopy(self.model)
            else:
                stop = count >= cfg.tenacity
                count += 1
        self.model = best_model
        return best

    def score(self, X, y):
        with torch.no_grad():
            pred = self.model(torch.tensor(X, dtype=torch.float32)).argmax(1).numpy()
        return float(np.mean(pred == y))


def _data(n=150, d=6, nclasses=2, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, nclasses, n)
    centres = rng.standard_normal((nclasses, d))
    X = (centres[y] + 1.5 * rng.standard_normal((n, d))).astype(np.float32)
    return X, y


def test_initial_weights_are_torch_linear_after_seeding():
    state = torch.random.get_rng_state()
    W0 = SP.initial_weights(5, 3, 1111)
    assert torch.equal(torch.random.get_rng_state(), state)  # caller's RNG untouched
    torch.manual_seed(1111)
    layer = torch.nn.Linear(5, 3)
    assert torch.equal(W0[:5], layer.weight.detach().T) and torch.equal(W0[5], layer.bias.detach())


@pytest.mark.parametrize("nclasses", [2, 3])
@pytest.mark.parametrize("reduction, optim", [("mean", "adam"), ("sum", "adam"), ("mean", "rmsprop")])
def test_batched_fit_equals_literal_probe(nclasses, reduction, optim):
    base = SP.FASTTEST_CONFIG if optim == "rmsprop" else SP.DEFAULT_CONFIG
    cfg = dataclasses.replace(base, batch_size=16, max_epoch=40, reduction=reduction)
    X, y = _data(nclasses=nclasses)
    tr, dev = np.arange(110), np.arange(110, 150)
    grid = [1e-5, 1e-3, 1e-1]
    W, acc, Xa = SP.train_probes(X, y, [probe.Fit(tr, dev), probe.Fit(tr)], grid, nclasses, cfg)
    for r, l2 in enumerate(grid):
        for f, validation in enumerate([(X[dev], y[dev]), None]):  # None: validation_split
            lit = LiteralProbe(X.shape[1], nclasses, l2, cfg)
            assert lit.fit(X[tr], y[tr], validation_data=validation) == pytest.approx(acc[f, r])
            got = torch.cat([lit.model.weight.detach().T, lit.model.bias.detach()[None]])
            assert torch.allclose(W[f, r], got, atol=1e-4), (l2, (W[f, r] - got).abs().max())
        assert SP.accuracy(Xa, y, W[1, r], dev) == pytest.approx(lit.score(X[dev], y[dev]))


def test_batched_l2_and_folds_equal_separate_runs():
    X, y = _data(n=120)
    folds = [probe.Fit(a, b) for a, b in StratifiedKFold(4, shuffle=True, random_state=1).split(X, y)]
    folds.append(probe.Fit(np.arange(100)))
    grid = [1e-5, 1e-4, 1e-3, 1e-2]
    W, acc, _ = SP.train_probes(X, y, folds, grid, 2, CFG)
    for f, fit in enumerate(folds):
        for r, l2 in enumerate(grid):
            W1, acc1, _ = SP.train_probes(X, y, [fit], [l2], 2, CFG)
            assert acc1[0, 0] == acc[f, r]
            assert torch.allclose(W1[0, 0], W[f, r], atol=1e-5)


def _literal_kfold_scores(X, y, grid, skf):
    """SentEval's k-fold L2 scores (percent, rounded): one literal probe per fold and L2 value."""
    scores = []
    for l2 in grid:
        accs = []
        for a, b in skf.split(X, y):
            p = LiteralProbe(X.shape[1], 2, l2, CFG)
            p.fit(X[a], y[a], validation_data=(X[b], y[b]))
            accs.append(p.score(X[b], y[b]))
        scores.append(round(100 * np.mean(accs), 2))
    return scores


def test_schemes_equal_literal_validation():
    """``inner_kfold`` / ``kfold_then_test`` against SentEval's loops written literally."""
    X, y = _data(n=90, seed=3)
    grid, k = [1e-5, 1e-2], 3
    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=CFG.seed)
    dev, test = [], []
    for tr, te in skf.split(X, y):
        scores = _literal_kfold_scores(X[tr], y[tr], grid, skf)
        dev.append(np.max(scores))
        p = LiteralProbe(X.shape[1], 2, grid[int(np.argmax(scores))], CFG)
        p.fit(X[tr], y[tr])
        test.append(round(100 * p.score(X[te], y[te]), 2))
    want = (round(np.mean(dev), 2), round(np.mean(test), 2))
    assert probe.inner_kfold(X, y, nclasses=2, k=k, grid=grid, seed=CFG.seed, fitter=SP.fitter(CFG)) == want

    Xt, yt = _data(n=40, seed=4)
    fitter = SP.fitter(CFG)
    got = probe.kfold_then_test(X, y, Xt, yt, nclasses=2, k=k, grid=grid, seed=CFG.seed, fitter=fitter)
    scores = _literal_kfold_scores(X, y, grid, skf)
    p = LiteralProbe(X.shape[1], 2, grid[int(np.argmax(scores))], CFG)
    p.fit(X, y)
    assert got == (np.max(scores), round(100 * p.score(Xt, yt), 2))


def test_split_then_test_picks_on_dev():
    X, y = _data(n=130, seed=5)
    grid = [1e-5, 1e-1]
    dev_acc, test_acc = probe.split_then_test(
        X[:80], y[:80], X[80:100], y[80:100], X[100:], y[100:], nclasses=2, grid=grid, fitter=SP.fitter(CFG)
    )
    scores, probes = [], []
    for l2 in grid:
        p = LiteralProbe(X.shape[1], 2, l2, CFG)
        p.fit(X[:80], y[:80], validation_data=(X[80:100], y[80:100]))
        scores.append(round(100 * p.score(X[80:100], y[80:100]), 2))
        probes.append(p)
    best = int(np.argmax(scores))
    assert (dev_acc, test_acc) == (max(scores), round(100 * probes[best].score(X[100:], y[100:]), 2))


def test_early_stopping_counter_is_never_reset():
    """Training stops at the 6th non-improvement in total (tenacity 5), and max_epoch bounds it."""
    X, y = _data(n=60, seed=6)
    cfg = SP.ProbeConfig(batch_size=8, max_epoch=8, epoch_size=1)
    W, acc, _ = SP.train_probes(X, y, [probe.Fit(np.arange(40), np.arange(40, 60))], [1e-3], 2, cfg)
    lit = LiteralProbe(X.shape[1], 2, 1e-3, cfg)
    assert lit.fit(X[:40], y[:40], validation_data=(X[40:], y[40:])) == pytest.approx(acc[0, 0])


def test_fasttest_classifier_is_simcses():
    """SimCSE's evaluation.py, fasttest/dev: {nhid 0, optim rmsprop, batch_size 128, tenacity 3,
    epoch_size 2}; RMSprop at torch's defaults (SentEval passes no arguments). The folds per mode:
    tests/senteval/test_protocol_constants.py."""
    cfg = SP.CONFIG_BY_MODE["fasttest"]
    assert (cfg.optim, cfg.batch_size, cfg.tenacity, cfg.epoch_size) == ("rmsprop", 128, 3, 2)
    defaults = torch.optim.RMSprop([torch.zeros(1, requires_grad=True)]).defaults
    assert (cfg.lr, cfg.alpha, cfg.eps) == (defaults["lr"], defaults["alpha"], defaults["eps"])
    assert SP.CONFIG_BY_MODE["dev"] == cfg
    test = SP.CONFIG_BY_MODE["test"]
    assert (test.optim, test.batch_size, test.tenacity, test.epoch_size) == ("adam", 64, 5, 4)
