"""Is the captured sentence step the eager step? The two checks that can prove it on a GPU.

Eager GPU kernels are not bit-reproducible (the backward's reductions, SDPA's memory-efficient attention
backward among them, split their sums differently from run to run), so "bit-equal to eager" cannot be
asked of any path. What can be asked:

1. :func:`deterministic_check`: under :func:`~contrastlab.training.capture.deterministic_algorithms` the
   captured step and the eager step, both with the same capturable fused AdamW, give bit-equal losses
   at every step and bit-equal parameters at the end. Both are the trainer's own code; the graph adds
   nothing.
2. :func:`spread_check`: in the default mode, ``repeat`` eager and ``repeat`` graph runs; the median
   over graph x eager pairs of the largest relative loss difference must be at most
   :data:`SPREAD_MARGIN` (2) times the same median over eager pairs (:func:`within_spread`). Two
   medians over pairs of the same kind estimate the same gap, so their ratio scatters about 1 (past 2
   in about 2 % of simulated 3 + 3 readings), while a step that computes something else (other dropout
   masks) lies orders of magnitude beyond it (docs/measured.md).

Both take ``make_model`` (a fresh ``(encoder, head)`` on the device, the same weights at every call) and
``batches``, static-shape ``(ids, mask)`` device tensors used in turn. The graph needs CUDA
(``benchmarks/gpu_bench.py``, ``tests/training/test_cuda.py``); ``tests/training/test_equivalence.py``
runs the eager half on a CPU.
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from contrastlab.losses import build_loss
from contrastlab.models.packed import PaddingFree
from contrastlab.training import capture
from contrastlab.training.runtime import TrainingRun, build_optimizer
from contrastlab.training.sentence_step import ADAMW as TRAINER_ADAMW
from contrastlab.training.sentence_step import CLIP_NORM, train_step

Batch = tuple[torch.Tensor, torch.Tensor]
#: How far the typical gap to the reference runs may exceed their own typical gap (:func:`within_spread`).
SPREAD_MARGIN = 2.0
#: The trainer's AdamW at its default rate (training.sentence_step: ``ADAMW``, ``CLIP_NORM``).
ADAMW = {"lr": 3e-5, **TRAINER_ADAMW}


def run_steps(
    make_model: Callable[[], tuple[torch.nn.Module, torch.nn.Module]],
    batches: Sequence[Batch],
    *,
    precision: str,
    device: torch.device,
    graph: bool,
    steps: int,
    seed: int = 0,
    loss: str = "infonce",
    keep_params: bool = False,
    padding_free: bool | str = False,
) -> dict[str, Any]:
    """``steps`` training steps of a fresh model on ``batches`` (in turn) with a ``steps``-step run's linear
    lr decay, captured (``graph``) or eager, the same capturable fused AdamW either way. Returns
    ``losses`` (every step), ``seconds`` (capture excluded), ``steps_per_s``, ``capture_s`` and, with
    ``keep_params``, ``params`` (the final parameters as one flat device tensor). ``padding_free``: the
    eager step through :class:`~contrastlab.models.packed.PaddingFree` (true: its default dropout
    draws; a string: those ``dropout_draws``)."""
    model, head = make_model()
    params = [p for p in itertools.chain(model.parameters(), head.parameters()) if p.requires_grad]
    cuda = device.type == "cuda"  # PyTorch's capturable AdamW exists for CUDA only: a CPU runs plain
    optimizer = build_optimizer("adamw", params, device, capturable=cuda, **ADAMW)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: max(0.0, (steps - k) / steps))
    if cuda:
        capture.tensor_lr(optimizer, device)  # after the scheduler took the float as its initial lr
    with tempfile.TemporaryDirectory() as scratch:
        run = TrainingRun(Path(scratch), device=device, precision=precision, state_every=None, progress=False)
        torch.manual_seed(seed)
        t = time.perf_counter()
        parts = (run, model, head, build_loss(loss), optimizer, params)
        step = training_step(*parts, batches[0], graph=graph, padding_free=padding_free)
        sync(device)
        capture_s, t = time.perf_counter() - t, time.perf_counter()
        losses = []
        for k in range(steps):
            losses.append(step(*batches[k % len(batches)]).loss.detach().clone())
            scheduler.step()
        sync(device)
        seconds = time.perf_counter() - t
    flat = torch.cat([p.detach().reshape(-1) for p in params]) if keep_params else None
    return {
        "losses": torch.stack(losses).float().cpu().tolist(),
        "params": flat,
        "seconds": seconds,
        "steps_per_s": steps / seconds if seconds else None,
        "capture_s": capture_s,
    }


def training_step(
    run: TrainingRun,
    model,
    head,
    loss_fn,
    optimizer,
    params,
    first: Batch,
    *,
    graph: bool,
    padding_free: bool | str = False,
):
    """The sentence trainer's step as a callable ``(ids, mask) -> loss output``: captured once as a CUDA
    graph (``graph``; warmed up on ``first``, :func:`~contrastlab.training.capture.capture_sentence_step`)
    or eager (:func:`~contrastlab.training.capture.sentence_update`, as the trainer runs it), the
    encoder padding-free with ``padding_free`` (eager only, as in the trainer)."""
    if padding_free and graph:
        raise ValueError("padding_free runs the eager step: its token count changes every batch")
    draws = padding_free if isinstance(padding_free, str) else "padded"
    encoder = PaddingFree(model, dropout_draws=draws) if padding_free else model
    parts = (encoder, head, loss_fn, optimizer, params)
    if graph:
        captured = capture.capture_sentence_step(
            run, train_step, parts, first, head_autocast=False, clip_norm=CLIP_NORM
        )
        return lambda ids, mask: captured(ids, mask)[0]

    options = dict(autocast=run.autocast, head_autocast=False, clip_norm=CLIP_NORM)

    def step(ids, mask):
        return capture.sentence_update(run, train_step, parts, [(ids, mask)], **options)[0]

    return step


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (timing); nothing to wait for on a CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def max_rel_diff(a: Sequence[float], b: Sequence[float]) -> float:
    """The largest |a_k - b_k| / |a_k| over the steps (0 for identical runs)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(x - y) / np.maximum(np.abs(x), np.finfo(np.float64).tiny)))


def within_spread(gaps: Sequence[float], spread: Sequence[float]) -> bool:
    """The spread rule (module docstring, check 2): the median of ``gaps`` (each pair of a tested run and a
    reference run) is at most :data:`SPREAD_MARGIN` times the median of ``spread`` (each pair of two
    reference runs). Medians of an even count are the mean of the middle two."""
    return statistics.median(gaps) <= SPREAD_MARGIN * statistics.median(spread)


def deterministic_check(
    make_model,
    batches,
    *,
    precision: str,
    device: torch.device,
    steps: int = 200,
    seed: int = 0,
    captured: bool = True,
) -> dict[str, Any]:
    """Check 1 (module docstring): one eager and one captured run under deterministic algorithms.
    ``bit_equal`` = every loss and every final parameter equal bit for bit. Where they differ, a second
    eager run says whether determinism itself held (``eager_repeat_bit_equal``). ``captured`` False puts
    an eager run in the graph's place (a CPU's smoke test of the plumbing; the row says so)."""
    common = dict(precision=precision, device=device, steps=steps, seed=seed)
    with capture.deterministic_algorithms(True):
        eager = run_steps(make_model, batches, graph=False, keep_params=True, **common)
        graphed = run_steps(make_model, batches, graph=captured, keep_params=True, **common)
        row = _pair("eager", eager, "graph", graphed)
        if not row["bit_equal"]:
            again = run_steps(make_model, batches, graph=False, keep_params=True, **common)
            row["eager_repeat_bit_equal"] = _pair("eager", eager, "eager", again)["bit_equal"]
    return {"check": "deterministic", "precision": precision, "steps": steps, "captured": captured, **row}


def spread_check(
    make_model,
    batches,
    *,
    precision: str,
    device: torch.device,
    steps: int = 100,
    repeat: int = 3,
    seed: int = 0,
    captured: bool = True,
) -> dict[str, Any]:
    """Check 2 (module docstring): ``repeat`` eager and ``repeat`` captured runs in the default mode.
    ``within`` = the median graph-vs-eager difference <= :data:`SPREAD_MARGIN` x the median
    eager-vs-eager difference (:func:`within_spread`). ``captured`` as in :func:`deterministic_check`."""
    if repeat < 2:
        raise ValueError(f"the eager spread needs at least 2 runs of each kind, got repeat={repeat}")
    common = dict(precision=precision, device=device, steps=steps, seed=seed)
    eager = [run_steps(make_model, batches, graph=False, **common) for _ in range(repeat)]
    graphed = [run_steps(make_model, batches, graph=captured, **common) for _ in range(repeat)]
    spread = [max_rel_diff(a["losses"], b["losses"]) for a, b in itertools.combinations(eager, 2)]
    gaps = [max_rel_diff(e["losses"], g["losses"]) for e in eager for g in graphed]
    return {
        "check": "spread",
        "precision": precision,
        "steps": steps,
        "repeat": repeat,
        "captured": captured,
        "eager_vs_eager_median": statistics.median(spread),
        "eager_vs_eager_max": max(spread),
        "graph_vs_eager_median": statistics.median(gaps),
        "graph_vs_eager_max": max(gaps),
        "graph_vs_graph_max": max(
            max_rel_diff(a["losses"], b["losses"]) for a, b in itertools.combinations(graphed, 2)
        ),
        "spread_margin": SPREAD_MARGIN,
        "within": within_spread(gaps, spread),
        "eager_steps_per_s": max(r["steps_per_s"] for r in eager),
        "graph_steps_per_s": max(r["steps_per_s"] for r in graphed),
        "final_loss_eager": [r["losses"][-1] for r in eager],
        "final_loss_graph": [r["losses"][-1] for r in graphed],
    }


def padding_free_check(
    make_model,
    batches,
    *,
    precision: str,
    device: torch.device,
    steps: int = 100,
    repeat: int = 2,
    seed: int = 0,
    graph: bool | None = None,
    draws: str = "padded",
) -> dict:
    """Is the padding-free step the padded one, and how much faster? ``repeat`` padded and ``repeat``
    padding-free eager runs of one seed and batches, and with ``graph`` (default: on CUDA) one captured
    padded run. ``within`` is :func:`within_spread` of the padded-vs-padding-free gaps against the padded
    runs' spread (a CPU's spread is 0: read ``packed_vs_padded_max`` against fp32 rounding); ``ratio`` the
    padding-free step's time over the padded eager step's (best runs); ``draws`` the ``dropout_draws``."""
    common = dict(precision=precision, device=device, steps=steps, seed=seed)
    padded = [run_steps(make_model, batches, graph=False, **common) for _ in range(repeat)]
    packed = [
        run_steps(make_model, batches, graph=False, padding_free=draws, **common) for _ in range(repeat)
    ]
    spread = [max_rel_diff(a["losses"], b["losses"]) for a, b in itertools.combinations(padded, 2)]
    gaps = [max_rel_diff(a["losses"], b["losses"]) for a in padded for b in packed]
    row = {
        "check": "padding_free",
        "precision": precision,
        "draws": draws,
        "steps": steps,
        "repeat": repeat,
        "padded_ms": 1e3 / max(r["steps_per_s"] for r in padded),
        "packed_ms": 1e3 / max(r["steps_per_s"] for r in packed),
        "padded_vs_padded_median": statistics.median(spread) if spread else None,
        "padded_vs_padded_max": max(spread) if spread else None,
        "packed_vs_padded_median": statistics.median(gaps),
        "packed_vs_padded_max": max(gaps),
        "within": bool(spread) and within_spread(gaps, spread),
        "final_loss_padded": [r["losses"][-1] for r in padded],
        "final_loss_packed": [r["losses"][-1] for r in packed],
    }
    row["ratio"] = row["packed_ms"] / row["padded_ms"]
    if graph if graph is not None else device.type == "cuda":
        row["graph_ms"] = 1e3 / run_steps(make_model, batches, graph=True, **common)["steps_per_s"]
    return row


def _pair(name_a: str, a: dict[str, Any], name_b: str, b: dict[str, Any]) -> dict[str, Any]:
    losses_equal = a["losses"] == b["losses"]
    params_equal = bool(torch.equal(a["params"], b["params"]))
    return {
        "bit_equal": losses_equal and params_equal,
        "losses_bit_equal": losses_equal,
        "params_bit_equal": params_equal,
        "max_rel_diff": max_rel_diff(a["losses"], b["losses"]),
        f"{name_a}_steps_per_s": a["steps_per_s"],
        f"{name_b}_steps_per_s": b["steps_per_s"],
        "final_loss": b["losses"][-1],
    }
