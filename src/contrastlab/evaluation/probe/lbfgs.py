"""The converged fitter of the transfer probe (``probe="lbfgs"``): SentEval's objective solved by L-BFGS.

The fast, non-default fitter of :mod:`.schemes`: :mod:`.senteval` (``probe="senteval"``, the default)
replicates SentEval's Adam procedure and matches its numbers; this one is ~4x faster but can sit up
to 1.3 points away from SentEval on single-test-set tasks (above protocol.md's 0.5).

SentEval's probe (``tools/classifier.py``, ``MLP`` with ``nhid=0``) is ``nn.Linear(d, C)`` trained on
the mean cross-entropy by Adam with ``weight_decay = l2`` on all parameters (weight and bias) and early
stopping. Adam's coupled weight decay adds ``l2 * w`` to the gradient, i.e. it minimises

    mean_i CE(W x_i + b, y_i) + (l2 / 2) * (||W||^2 + ||b||^2).                          (1)

We minimise (1) itself, to convergence, full-batch with L-BFGS, so the result no longer depends on
batch order, learning rate or early stopping. For two classes the optimum of (1) has ``W = [-v/2, v/2]``,
so (1) is the binary logistic loss of ``v`` with penalty ``(l2 / 4) * ||v||^2``, which is what is
solved (half the work). In scikit-learn terms (penalised bias aside) that is ``C = 2 / (n * l2)`` for
two classes and ``C = 1 / (n * l2)`` for the multinomial case. Validated against SentEval's own scores
on a fixed encoder (tests/evaluation/test_reference.py): MR/CR/SUBJ/MPQA within 0.5 points; SST2, TREC
and MRPC differ by up to 1.3 points, which is the size of the seed-to-seed spread of SentEval's
early-stopped Adam probe itself on those single-test-set tasks (no deterministic probe can track one
draw of it more closely).

A fit without validation rows (SentEval's ``validation_split``, there for early stopping) is fitted
on all its training rows, which a converged probe does not need to hold out.

Speed: all fits a protocol needs (every fold x every L2 value) are one batch of independent problems
sharing the feature matrix, so each L-BFGS step is two GEMMs ``[n, d] x [d, problems]``; each problem
has its own L-BFGS memory, line search and stopping test.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from contrastlab.evaluation.probe.schemes import Fit, Fitted

# Stopping rule of the batched L-BFGS: a problem stops when the largest gradient entry is below
# GTOL or when an iteration lowers its objective by less than FTOL (relative), as SciPy's L-BFGS-B.
GTOL = 1e-5
FTOL = 1e-7
MAX_ITER = 1000
HISTORY = 10


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-problem inner product of two ``[D, B, K]`` tensors -> ``[B]``."""
    return (a * b).sum(dim=(0, 2))


class _Objective:
    """Batched objective (1): ``B`` problems, each a row mask over the shared features."""

    def __init__(
        self, X: torch.Tensor, y: torch.Tensor, masks: torch.Tensor, l2: torch.Tensor, nclasses: int
    ):
        self.Xa = torch.cat([X, torch.ones(len(X), 1, dtype=X.dtype)], dim=1)  # bias as a feature
        self.y = y
        self.binary = nclasses == 2
        self.K = 1 if self.binary else nclasses
        weights = masks.to(X.dtype)
        self.weights = (weights / weights.sum(1, keepdim=True)).T.contiguous()  # [n, B], columns sum to 1
        self.coef = l2 / 2 if self.binary else l2  # gradient of the penalty is coef * w
        if not self.binary:
            self.onehot = torch.nn.functional.one_hot(y, nclasses).to(X.dtype)  # [n, K]
        else:
            self.yf = y.to(X.dtype).unsqueeze(1)  # [n, 1]

    def __call__(self, W: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Objective ``[b]`` and gradient ``[D, b, K]`` of problems ``idx`` at ``W [D, b, K]``."""
        D, b, K = W.shape
        Z = (self.Xa @ W.reshape(D, b * K)).view(-1, b, K)
        wts = self.weights[:, idx]  # [n, b]
        coef = self.coef[idx]
        if self.binary:
            z = Z[:, :, 0]
            loss = torch.nn.functional.softplus(z) - self.yf * z
            resid = (torch.sigmoid(z) - self.yf) * wts
            R = resid.unsqueeze(2)
        else:
            logp = torch.log_softmax(Z, dim=2)
            loss = -(logp * self.onehot.unsqueeze(1)).sum(2)
            R = (logp.exp() - self.onehot.unsqueeze(1)) * wts.unsqueeze(2)
        f = (loss * wts).sum(0) + 0.5 * coef * _dot(W, W)
        G = (self.Xa.T @ R.reshape(-1, b * K)).view(D, b, K) + coef.view(1, b, 1) * W
        return f, G


def _lbfgs(fun: _Objective, W0: torch.Tensor, *, max_iter: int = MAX_ITER) -> torch.Tensor:
    """Minimise ``B`` independent smooth convex problems at once; per-problem memory and step size."""
    D, B, K = W0.shape
    W = W0.clone()
    all_idx = torch.arange(B)
    f, G = fun(W, all_idx)
    S = torch.zeros((HISTORY, D, B, K), dtype=W.dtype)
    Yh = torch.zeros_like(S)
    rho = torch.zeros((HISTORY, B), dtype=W.dtype)
    stored = 0
    active = G.abs().amax(dim=(0, 2)) > GTOL
    for _ in range(max_iter):
        idx = active.nonzero().squeeze(1)
        if idx.numel() == 0:
            break
        g = G[:, idx]
        # Two-loop recursion (Nocedal & Wright, Alg. 7.4), batched over problems.
        q = g.clone()
        order = [(stored - 1 - j) % HISTORY for j in range(min(stored, HISTORY))]
        alphas = []
        for j in order:
            a = rho[j, idx] * _dot(S[j][:, idx], q)
            q -= a.view(1, -1, 1) * Yh[j][:, idx]
            alphas.append(a)
        if order:
            s_last, y_last = S[order[0]][:, idx], Yh[order[0]][:, idx]
            gamma = _dot(s_last, y_last) / _dot(y_last, y_last).clamp_min(1e-30)
        else:
            gamma = 1.0 / g.abs().sum(dim=(0, 2)).clamp_min(1.0)
        q *= gamma.view(1, -1, 1)
        for j, a in zip(reversed(order), reversed(alphas), strict=True):
            beta = rho[j, idx] * _dot(Yh[j][:, idx], q)
            q += (a - beta).view(1, -1, 1) * S[j][:, idx]
        d = -q
        gd = _dot(g, d)
        bad_dir = gd >= 0
        if bad_dir.any():  # safeguard: steepest descent where the direction is not a descent one
            d[:, bad_dir] = -g[:, bad_dir]
            gd = _dot(g, d)
        # Backtracking (Armijo) line search, per problem; only the failing problems are re-evaluated.
        w, f_old = W[:, idx], f[idx]
        t = torch.ones(len(idx), dtype=W.dtype)
        w_new = w + d
        f_new, g_new = fun(w_new, idx)
        for _ls in range(40):
            fail = ~(f_new <= f_old + 1e-4 * t * gd)  # also true for nan
            if not fail.any():
                break
            t[fail] *= 0.5
            sub = fail.nonzero().squeeze(1)
            w_new[:, sub] = w[:, sub] + t[sub].view(1, -1, 1) * d[:, sub]
            f_sub, g_sub = fun(w_new[:, sub], idx[sub])
            f_new[sub], g_new[:, sub] = f_sub, g_sub
        s, yv = w_new - w, g_new - g
        slot = stored % HISTORY
        S[slot][:, idx], Yh[slot][:, idx] = s, yv
        sy = _dot(s, yv)
        rho[slot, idx] = torch.where(sy > 1e-20, 1.0 / sy.clamp_min(1e-20), torch.zeros_like(sy))
        stored += 1
        W[:, idx], f[idx], G[:, idx] = w_new, f_new, g_new
        small_step = (f_old - f_new) <= FTOL * torch.maximum(f_old.abs(), torch.ones_like(f_old))
        done = (g_new.abs().amax(dim=(0, 2)) <= GTOL) | small_step
        active[idx[done]] = False
    return W


def fit_predict(
    X: np.ndarray,
    y: np.ndarray,
    train_masks: np.ndarray,
    l2: Sequence[float],
    nclasses: int,
    *,
    dtype: torch.dtype = torch.float32,
) -> np.ndarray:
    """Fit ``B`` probes (problem ``b`` on rows ``train_masks[b]`` with weight decay ``l2[b]``) and predict.

    Returns predicted labels ``[B, n]`` for every row of ``X`` (callers pick the held-out rows).
    ``X [n, d]``, ``y [n]`` in ``0..nclasses-1``; rows outside a problem's mask do not affect it.
    """
    if nclasses < 2:
        raise ValueError(f"nclasses must be >= 2, got {nclasses}")
    Xt = torch.as_tensor(np.ascontiguousarray(X), dtype=dtype)
    yt = torch.as_tensor(np.asarray(y), dtype=torch.long)
    masks = torch.as_tensor(np.asarray(train_masks, dtype=bool))
    if masks.ndim != 2 or masks.shape[1] != len(Xt) or not masks.any(1).all():
        raise ValueError("train_masks must be [problems, n] with at least one row per problem")
    fun = _Objective(Xt, yt, masks, torch.as_tensor(np.asarray(l2), dtype=dtype), nclasses)
    W0 = torch.zeros((Xt.shape[1] + 1, len(masks), fun.K), dtype=dtype)
    W = _lbfgs(fun, W0)
    D, B, K = W.shape
    Z = (fun.Xa @ W.reshape(D, B * K)).view(-1, B, K)
    pred = (Z[:, :, 0] > 0).long() if fun.binary else Z.argmax(2)
    return pred.T.numpy()


def fit(
    X: np.ndarray,
    y: np.ndarray,
    fits: Sequence[Fit],
    grid: Sequence[float],
    nclasses: int,
    *,
    dtype: torch.dtype = torch.float32,
) -> Fitted:
    """The :data:`~.schemes.Fitter` of this module: every fit x L2 value solved in one batch of
    :func:`fit_predict` (problem ``fit * len(grid) + r``), each on all of its fit's training rows."""
    y = np.asarray(y)
    masks = np.zeros((len(fits) * len(grid), len(y)), dtype=bool)
    for f, one in enumerate(fits):
        masks[f * len(grid) : (f + 1) * len(grid), one.train] = True
    pred = fit_predict(X, y, masks, [reg for _ in fits for reg in grid], nclasses, dtype=dtype)

    def accuracy(f: int, r: int, rows: np.ndarray) -> float:
        return float(np.mean(pred[f * len(grid) + r, rows] == y[rows]))

    dev = np.full((len(fits), len(grid)), np.nan)
    for f, one in enumerate(fits):
        if one.dev is not None:
            dev[f] = [accuracy(f, r, one.dev) for r in range(len(grid))]
    return Fitted(dev, accuracy)
