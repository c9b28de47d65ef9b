"""SentEval's own fitter of the transfer probe, re-implemented step for step and batched (the default).

SentEval (``tools/classifier.py`` ``MLP`` with ``nhid=0``, ``tools/validation.py``) trains every probe
the same way; this module reproduces that procedure, not just its objective:

- ``MLP.__init__`` seeds NumPy and torch with ``seed`` (1111), then builds ``nn.Linear(d, C)``: every
  probe of a run starts from the same torch default initialisation;
- ``fit`` early-stops on ``validation_data``; with ``validation_split=0.05`` it first draws
  ``np.random.permutation(n)`` and holds out its first ``int(0.05 * n)`` rows;
- ``trainepoch`` runs ``epoch_size`` (4) epochs, each over a fresh ``np.random.permutation`` in
  minibatches of 64 (the last shorter), minimising the batch-mean cross-entropy (``size_average =
  False`` is set after construction, which PyTorch >= 1.0 ignores) with Adam (lr 1e-3, betas (0.9,
  0.999), eps 1e-8, ``weight_decay = l2`` on weight and bias);
- after every ``epoch_size`` epochs the probe is scored on the validation rows; a strictly better
  accuracy keeps a copy, otherwise a never-reset counter grows and training stops when it reaches
  ``tenacity`` (5); at most ``max_epoch`` (200) epochs start; the kept copy is the final probe;
- the schemes, folds, L2 grid, rounding and first-best choice are SentEval's (:mod:`.schemes`).

Speed without changing the arithmetic: probes that consume the same NumPy permutation stream (same
seed, row count and kind of validation) take the same minibatch positions from the same weights, so
every fold of one size and every L2 value trains in lockstep (batched GEMMs over ``folds x L2`` probes,
early stopping per probe with masks); SentEval's refit with the chosen L2 (the same probe) is not
repeated. Float32 on the CPU (SentEval's on CUDA): results match up to rounding order (0.00 points off on the
reference encoder, tests/evaluation/test_reference.py; timings: docs/pipeline.md). Training runs with
one torch thread (restored after): intra-op threads make these small ops many times slower.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from contrastlab.evaluation.probe.schemes import Fit, Fitted, Fitter


@dataclass(frozen=True)
class ProbeConfig:
    """SentEval's classifier settings (SimCSE's ``test`` mode: ``{nhid 0, optim adam, batch_size 64,
    tenacity 5, epoch_size 4}``, ``max_epoch`` default 200, ``validation_split`` 0.05, seed 1111).

    ``optim`` is ``"adam"`` (``torch.optim.Adam(lr, betas, eps)``) or ``"rmsprop"``
    (``torch.optim.RMSprop`` at its defaults: lr 0.01, alpha 0.99, eps 1e-8, no momentum), each with
    ``weight_decay = l2`` as SentEval sets it."""

    batch_size: int = 64
    tenacity: int = 5
    epoch_size: int = 4
    max_epoch: int = 200
    optim: str = "adam"
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    alpha: float = 0.99  # RMSprop's smoothing constant
    eps: float = 1e-8
    validation_split: float = 0.05
    seed: int = 1111
    reduction: str = "mean"  # "sum" mimics PyTorch < 1.0 honouring ``size_average = False``


DEFAULT_CONFIG = ProbeConfig()
#: SimCSE's ``fasttest``/``dev`` classifier: ``{nhid 0, optim rmsprop, batch_size 128, tenacity 3,
#: epoch_size 2}`` (with k = 5 folds, see ``protocol.KFOLD``); SentEval builds ``torch.optim.RMSprop``
#: with no arguments, i.e. lr 0.01.
FASTTEST_CONFIG = ProbeConfig(batch_size=128, tenacity=3, epoch_size=2, optim="rmsprop", lr=1e-2)
CONFIG_BY_MODE = {"test": DEFAULT_CONFIG, "fasttest": FASTTEST_CONFIG, "dev": FASTTEST_CONFIG}
OPTIMS = ("adam", "rmsprop")


def initial_weights(d: int, nclasses: int, seed: int) -> torch.Tensor:
    """``[d + 1, C]``: ``nn.Linear(d, C)`` built right after ``torch.manual_seed(seed)``, weight
    transposed with the bias as the last row. The caller's torch RNG state is left untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = torch.nn.Linear(d, nclasses, dtype=torch.float32)
    return torch.cat([layer.weight.detach().T, layer.bias.detach().unsqueeze(0)]).contiguous()


def _pad(rows: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Ragged row lists -> ``[F, max]`` indices (padding repeats row 0) and a validity mask."""
    lengths = np.array([len(r) for r in rows])
    mask = np.arange(lengths.max()) < lengths[:, None]
    idx = np.zeros(mask.shape, dtype=np.int64)
    idx[mask] = np.concatenate(rows)
    return torch.from_numpy(idx), torch.from_numpy(mask)


def _correct(Xa: torch.Tensor, y: torch.Tensor, W: torch.Tensor, idx, mask, nclasses: int) -> torch.Tensor:
    """Correct predictions ``[F, P]`` of probes ``W [F, D, P*C]`` on padded rows ``idx [F, m]``."""
    F, D, PC = W.shape
    out = torch.empty((F, PC // nclasses), dtype=torch.long)
    for start in range(0, F, 16):  # chunks bound the memory of the gathered rows
        sl = slice(start, start + 16)
        x = Xa[idx[sl]]  # [f, m, D]
        z = torch.bmm(x, W[sl]).view(x.shape[0], x.shape[1], -1, nclasses)
        hit = (z.argmax(3) == y[idx[sl]].unsqueeze(2)) & mask[sl].unsqueeze(2)
        out[sl] = hit.sum(1)
    return out


def _train_group(
    Xa: torch.Tensor,
    y: torch.Tensor,
    onehot: torch.Tensor,
    fits: list[Fit],
    l2: Sequence[float],
    nclasses: int,
    cfg: ProbeConfig,
    W0: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Train the fits of one permutation stream in lockstep; returns best ``W [F, P, D, C]`` and the
    best validation accuracy ``[F, P]`` (as ``correct / n_dev``)."""
    split = fits[0].dev is None
    stream = np.random.RandomState(cfg.seed)  # the NumPy permutations one probe draws, in SentEval's order
    n_input = len(fits[0].train)
    held = int(cfg.validation_split * n_input) if split else 0  # validation_split's rows
    split_perm = stream.permutation(n_input) if split else None
    train_rows, dev_rows = [], []
    for fit in fits:
        rows = np.asarray(fit.train, dtype=np.int64)
        if split:
            dev_rows.append(rows[split_perm[:held]])
            rows = rows[split_perm[held:]]
        else:
            dev_rows.append(np.asarray(fit.dev, dtype=np.int64))
        train_rows.append(rows)
    if min(len(r) for r in dev_rows) == 0:
        raise ValueError("a probe has no validation rows")
    train = torch.from_numpy(np.stack(train_rows))  # [F, n]
    dev_idx, dev_mask = _pad(dev_rows)
    n_dev = dev_mask.sum(1, keepdim=True)  # [F, 1]

    F, P, C, D = len(fits), len(l2), nclasses, Xa.shape[1]
    PC = P * C
    W = W0.repeat(1, P).unsqueeze(0).repeat(F, 1, 1).contiguous()  # [F, D, P*C]
    m, v = torch.zeros_like(W), torch.zeros_like(W)
    wd = torch.tensor(l2, dtype=torch.float32).repeat_interleave(C).view(1, 1, PC)
    best_W = W.clone()
    best = torch.full((F, P), -1, dtype=torch.long)
    count = torch.zeros((F, P), dtype=torch.long)
    stopped = torch.zeros((F, P), dtype=torch.bool)
    live = torch.arange(F)  # fits still in the batch (some probe not stopped)
    beta1, beta2 = cfg.betas
    bs, n = cfg.batch_size, n_input - held
    step, nepoch = 0, 0
    buf: dict[int, torch.Tensor] = {}
    while live.numel() and nepoch <= cfg.max_epoch:
        f = live.numel()
        for _ in range(cfg.epoch_size):
            order = train[live][:, torch.from_numpy(stream.permutation(n))]  # [f, n] rows in batch order
            for i in range(0, n, bs):
                rows = order[:, i : i + bs].reshape(-1)
                b = rows.numel() // f
                if b not in buf or buf[b].shape[0] != f * b:
                    buf[b] = torch.empty((f * b, D))  # reused: allocation is a visible cost here
                xb = torch.index_select(Xa, 0, rows, out=buf[b]).view(f, b, D)
                z = torch.bmm(xb, W).view(f, b, P, C)
                r = torch.softmax(z, dim=3).sub_(onehot.index_select(0, rows).view(f, b, 1, C))
                if cfg.reduction == "mean":
                    r.div_(b)
                g = torch.baddbmm(W * wd, xb.transpose(1, 2), r.view(f, b, PC))
                step += 1
                if cfg.optim == "adam":  # torch.optim.Adam (single-tensor path), coupled weight decay
                    m.lerp_(g, 1 - beta1)
                    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                    denom = (v.sqrt() / (1 - beta2**step) ** 0.5).add_(cfg.eps)
                    W.addcdiv_(m, denom, value=-cfg.lr / (1 - beta1**step))
                else:  # torch.optim.RMSprop (single-tensor path, no momentum, not centred)
                    v.mul_(cfg.alpha).addcmul_(g, g, value=1 - cfg.alpha)
                    W.addcdiv_(g, v.sqrt().add_(cfg.eps), value=-cfg.lr)
        nepoch += cfg.epoch_size
        acc = _correct(Xa, y, W, dev_idx[live], dev_mask[live], C)  # [f, P]
        active = ~stopped[live]
        improve = (acc > best[live]) & active  # same denominator within a fit: compare counts
        worse = active & ~improve
        if improve.any():
            fi, pi = improve.nonzero(as_tuple=True)
            best[live[fi], pi] = acc[fi, pi]
            best_W.view(F, D, P, C)[live[fi], :, pi] = W.view(f, D, P, C)[fi, :, pi]
        fi, pi = worse.nonzero(as_tuple=True)
        stop_now = count[live[fi], pi] >= cfg.tenacity
        stopped[live[fi[stop_now]], pi[stop_now]] = True
        count[live[fi], pi] += 1
        keep = ~stopped[live].all(1)
        if not keep.all():
            W, m, v = W[keep].contiguous(), m[keep].contiguous(), v[keep].contiguous()
            live = live[keep]
    best_acc = best.double() / n_dev.double()
    return best_W.view(F, D, P, C).permute(0, 2, 1, 3), best_acc


def train_probes(
    X: np.ndarray,
    y: np.ndarray,
    fits: Sequence[Fit],
    l2: Sequence[float],
    nclasses: int,
    probe: ProbeConfig = DEFAULT_CONFIG,
) -> tuple[torch.Tensor, np.ndarray, torch.Tensor]:
    """Run SentEval's ``MLP.fit`` for every fit x L2 value on rows of the shared ``X [n, d]``.

    Returns (``W [fits, P, d + 1, C]`` the kept probes, validation accuracies ``[fits, P]`` as
    fractions, ``Xa`` the float32 features with a ones column, for :func:`accuracy`).
    """
    if nclasses < 2:
        raise ValueError(f"nclasses must be >= 2, got {nclasses}")
    if probe.optim not in OPTIMS:
        raise ValueError(f"optim must be one of {', '.join(OPTIMS)}, got {probe.optim!r}")
    if probe.reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {probe.reduction!r}")
    Xt = torch.as_tensor(np.ascontiguousarray(X, dtype=np.float32))
    Xa = torch.cat([Xt, torch.ones(len(Xt), 1)], dim=1).contiguous()
    yt = torch.as_tensor(np.asarray(y, dtype=np.int64))
    onehot = torch.nn.functional.one_hot(yt, nclasses).to(torch.float32)
    W0 = initial_weights(Xt.shape[1], nclasses, probe.seed)
    groups: dict[tuple[int, bool], list[int]] = {}
    for i, fit in enumerate(fits):
        groups.setdefault((len(fit.train), fit.dev is None), []).append(i)
    W = torch.empty((len(fits), len(l2), Xa.shape[1], nclasses))
    acc = np.empty((len(fits), len(l2)))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tens of thousands of small ops: intra-op threads only add contention
    try:
        for members in groups.values():
            fs = [fits[i] for i in members]
            bw, ba = _train_group(Xa, yt, onehot, fs, l2, nclasses, probe, W0)
            W[members], acc[members] = bw, ba.numpy()
    finally:
        torch.set_num_threads(threads)
    return W, acc, Xa


def accuracy(Xa: torch.Tensor, y: np.ndarray, W: torch.Tensor, rows: np.ndarray) -> float:
    """``PyTorchClassifier.score``: fraction of ``rows`` whose argmax logit under ``W [D, C]`` is right."""
    rows_t = torch.as_tensor(np.asarray(rows, dtype=np.int64))
    pred = (Xa[rows_t] @ W).argmax(1).numpy()
    return float(np.mean(pred == np.asarray(y)[np.asarray(rows)]))


def fitter(probe: ProbeConfig = DEFAULT_CONFIG) -> Fitter:
    """The :data:`~.schemes.Fitter` of SentEval's procedure with classifier settings ``probe``: every
    fit x L2 value trained by :func:`train_probes`, validation accuracies those of the kept probes."""

    def fit(
        X: np.ndarray, y: np.ndarray, fits: Sequence[Fit], grid: Sequence[float], nclasses: int
    ) -> Fitted:
        W, acc, Xa = train_probes(X, y, fits, grid, nclasses, probe)
        return Fitted(acc, lambda f, r, rows: accuracy(Xa, y, W[f, r], rows))

    return fit
