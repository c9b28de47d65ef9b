"""Several small cells on one GPU (``resources.gpu_share``): which cells share a GPU, and what the packed
grid costs.

A BERT-base cell at batch 64 uses a few GB of an 80 GB card and is launch-bound at that size, so n such
cells on one GPU may finish sooner than n in a row. With ``resources.gpu_share: k`` (1, the default:
off) a training job whose cell's estimated peak memory (:attr:`~contrastlab.cost.flops.CellWork.peak_gib`)
fits n times in :data:`MEMORY_FRACTION` of the card's memory (the calibration's ``gpu_memory_gib``)
shares its GPU with up to n - 1 others, n of :data:`SHARES` up to k, the one whose speed-up for the
cell's precision is the largest (:func:`chosen_share`; none above 1: a GPU of its own); the slot locks
of :mod:`contrastlab.workflow.gpus` hold every GPU to that.

Price: n copies that run together at a summed speed-up s (the sum of their steps/s over one copy's
alone) each take n/s times as long on 1/n of a GPU, so a packed job costs its GPU-seconds alone ÷ s
(:func:`packed_seconds`). s comes from the calibration's packing speed-ups (precision -> copies ->
speed-up): measured by ``make gpu-check``, else the shipped default's, which are docs/measured.md's H100
figures of ``benchmarks/gpu_share.py`` (assumed for any other machine; the plan says which). Both
measure with :func:`packing_rows`: 1, 2 and 4 copies of the trainer's step, each in a process of its
own (:func:`sentence_step_copy`), timed together.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from contrastlab.config import Grid
from contrastlab.cost.flops import cell_work
from contrastlab.precision import RESOLVED

#: GPU jobs per GPU a cell may share with (``resources.gpu_share``'s values): what make gpu-check
#: measures (1, 2 and 4 concurrent cells), so that every packed price has a figure behind it.
SHARES = (1, 2, 4)
#: The part of the card's memory packed cells may fill together: the peak estimate is an estimate
#: (±20% against the H100's measured peaks), and each process keeps its own allocator cache.
MEMORY_FRACTION = 0.8


def cell_share(peak_gib: float, gpu_memory_gib: float, gpu_share: int) -> int:
    """How many jobs of a cell whose peak GPU memory is ``peak_gib`` may share a card of
    ``gpu_memory_gib``: the largest n of :data:`SHARES` up to ``gpu_share`` with n × peak ≤
    :data:`MEMORY_FRACTION` × the card (1 when none fits twice).

    >>> [cell_share(peak, 80.0, 4) for peak in (5.0, 16.0, 20.0, 40.0)], cell_share(5.0, 80.0, 2)
    ([4, 4, 2, 1], 2)
    """
    if gpu_share not in SHARES:
        raise ValueError(
            f"resources.gpu_share must be one of {', '.join(map(str, SHARES))}, got {gpu_share!r}"
        )
    return max(
        n for n in SHARES if n == 1 or (n <= gpu_share and n * peak_gib <= MEMORY_FRACTION * gpu_memory_gib)
    )


def chosen_share(peak_gib: float, precision: str, calibration: Any, gpu_share: int) -> int:
    """The jobs per GPU of a cell of ``precision`` whose peak is ``peak_gib``: of the counts that fit
    (:func:`cell_share` on the calibration's card), the one with the largest :func:`speedup`, so a cell
    whose precision gains nothing from sharing (fp32 at 0.92× on an H100) or has no figure keeps a
    GPU of its own."""
    fits = [n for n in SHARES if n <= cell_share(peak_gib, calibration.gpu_memory_gib, gpu_share)]
    return max(fits, key=lambda n: (speedup(calibration.packing_speedup, precision, n), -n))


def job_share(grid: Grid, cell: Any, calibration: Any, point: Any = None) -> int:
    """The ``gpu_share`` resource of a training job (rules ``train``, ``train_vision``): its cell's
    :func:`chosen_share` as configured; 1 when packing is off or the job runs on the CPU
    (``resources.gpu: 0``). ``calibration()`` gives the calibration, called only when packing is on
    (as :func:`contrastlab.cost.plan.runtime_resource` does: the DAG asks every training job);
    ``grid``: the workflow's :class:`~contrastlab.config.Grid`."""
    resources = grid.compute
    share = resources.get("gpu_share", 1)
    if share == 1 or not resources.get("gpu"):
        return 1

    work = cell_work(grid, cell, point=point)
    return chosen_share(work.peak_gib, work.precision, calibration(), share)


def speedup(figures: Mapping[str, Mapping[int, float]], precision: str, share: int) -> float:
    """The summed speed-up of ``share`` concurrent cells of ``precision`` (``figures``: precision ->
    copies -> speed-up, a calibration's ``packing_speedup``): the figure of the largest measured count
    up to ``share``; 1 (priced as if alone) for one copy or a precision without figures."""
    counts = [k for k in (figures.get(precision) or {}) if 1 < k <= share]
    return figures[precision][max(counts)] if counts else 1.0


def packed_seconds(
    seconds: float, precision: str, share: int, figures: Mapping[str, Mapping[int, float]]
) -> float:
    """GPU-seconds of a training job sharing its GPU with ``share - 1`` others (module docstring):
    ``seconds`` alone ÷ :func:`speedup`."""
    return seconds / speedup(figures, precision, share)


def packing_lines(grid: Grid, jobs: Sequence[Any], calibration: Any) -> list[str]:
    """The plan's paragraph on packing: off, or which jobs share a GPU, the speed-ups priced and
    whether they were measured (``jobs``: the plan's, with their ``share``)."""
    share = grid.compute.get("gpu_share", 1)
    if share == 1:
        return [
            "GPU sharing: off (`resources.gpu_share: 1`): every GPU job has a GPU of its own. "
            f"`resources.gpu_share: 2` or 4 lets small cells share one; {_figures_text(calibration)}.",
            "",
        ]
    packed = [j for j in jobs if j.share > 1]
    counts = {n: sum(j.share == n for j in packed) for n in SHARES if n > 1}
    spread = ", ".join(f"{c} training jobs {n} per GPU" for n, c in counts.items() if c)
    return [
        f"GPU sharing on (`resources.gpu_share: {share}`; a cell shares when its peak memory estimate fits "
        f"n times in {MEMORY_FRACTION:.0%} of {calibration.gpu_memory_gib:.0f} GiB and n cells of its "
        "precision run faster together than in a row): "
        f"{spread or 'no training job is small enough'}. Their GPU-hours are the hours alone ÷ the summed "
        f"speed-up of n cells of their precision; {_figures_text(calibration)}. On one machine give "
        f"Snakemake {share} GPU slots per GPU (`--resources gpu=<GPUs × {share}>`).",
        "",
    ]


def _figures_text(calibration: Any) -> str:
    figures = "; ".join(
        f"{precision} " + ", ".join(f"{s:.2f}× with {k}" for k, s in sorted(by_count.items()))
        for precision in RESOLVED
        if (by_count := calibration.packing_speedup.get(precision))
    )
    state = "measured" if calibration.packing_measured else "assumed (not measured on this machine)"
    return f"speed-ups {state}: {figures or 'none'} (source: {calibration.packing_source})"


# ------------------------------------------------------------------------------- measuring the speed-up
#: What :func:`sentence_step_copy` imports (the toy's tiny BERT's modelling included): the modules a
#: fork server imports once for all copies (``forkserver_preload`` of :func:`concurrent_rates`).
STEP_COPY_MODULES = (
    "torch",
    "transformers",
    "transformers.models.bert.modeling_bert",
    "contrastlab.cost.packing",
    "contrastlab.losses",
    "contrastlab.training.runtime",
    "contrastlab.training.sentence",
)


def concurrent_rates(
    copy: Callable[[Callable[[], Any]], Mapping[str, Any]],
    k: int,
    *,
    timeout: float = 600,
    forkserver_preload: Sequence[str] | None = None,
):
    """What each of ``k`` copies of ``copy`` returns when they run at once, each in a process of its own
    (spawned, as k Snakemake jobs on one GPU would be), in copy order. ``copy(ready)`` builds and warms
    up its model, calls ``ready()`` (a barrier: the copies time their steps together, not one copy's
    warm-up against another's steps) and returns ``{"steps_per_s": ..., ...}``; it must be a
    module-level function (or a ``functools.partial`` of one), since a spawned process imports it.

    ``forkserver_preload`` (``make gpu-check --toy``, on the CPU): fork each copy from a server process
    that imported these modules (and ``__main__``) once, instead of spawning it: a spawned copy imports
    torch and transformers itself, which at toy size costs far more than the steps it times. The imports
    precede the barrier either way, so only the untimed start-up differs."""
    if forkserver_preload is None:
        ctx = mp.get_context("spawn")
    else:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["__main__", *forkserver_preload])
    results, barrier = ctx.Queue(), ctx.Barrier(k)
    procs = [ctx.Process(target=_run_copy, args=(copy, i, barrier, results)) for i in range(k)]
    for p in procs:
        p.start()
    try:
        found = [results.get(timeout=timeout) for _ in procs]
    except queue.Empty:
        raise RuntimeError(f"a copy of {k} gave no result within {timeout:.0f} s") from None
    finally:
        for p in procs:
            p.join(timeout=timeout)
    if any(p.exitcode for p in procs):
        raise RuntimeError(f"a copy of {k} failed (exit codes {[p.exitcode for p in procs]})")
    return [row for _, row in sorted(found, key=lambda item: item[0])]


def _run_copy(copy, index: int, barrier, results) -> None:
    results.put((index, dict(copy(barrier.wait))))


def packing_rows(
    copy,
    counts: Sequence[int] = SHARES,
    *,
    timeout: float = 600,
    forkserver_preload: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """For each k of ``counts`` (the first 1): each copy's steps/s when k run at once
    (:func:`concurrent_rates`, ``forkserver_preload`` passed on), their sum, the speed-up of the sum
    over one copy alone, and the largest ``peak_gib`` a copy reported."""
    if not counts or counts[0] != 1:
        raise ValueError(f"counts must start with 1 (one copy alone: the speed-ups' base), got {counts!r}")
    rows: list[dict[str, Any]] = []
    for k in counts:
        copies = concurrent_rates(copy, k, timeout=timeout, forkserver_preload=forkserver_preload)
        rates = [float(c["steps_per_s"]) for c in copies]
        peaks = [c["peak_gib"] for c in copies if c.get("peak_gib") is not None]
        total = sum(rates)
        rows.append(
            {
                "k": k,
                "steps_per_s": rates,
                "sum": total,
                "speedup": total / rows[0]["sum"] if rows else 1.0,
                "peak_gib": max(peaks, default=None),
            }
        )
    return rows


def sentence_step_copy(
    ready: Callable[[], Any],
    *,
    model_config: Mapping[str, Any],
    batch: int,
    length: int,
    precision: str,
    device: str,
    steps: int,
    warmup: int,
    state_dir: str,
    config_class: str = "BertConfig",
    threads: int = 1,
) -> dict[str, Any]:
    """Steps/s of the sentence trainer's step (:func:`contrastlab.training.sentence.train_step`, InfoNCE,
    the SimCSE head, the runtime's optimiser step and precision switches) on a randomly initialised
    encoder (``config_class(**model_config)`` of ``transformers``) at ``batch`` sentences × ``length``
    tokens: ``warmup`` untimed steps, ``ready()``, then ``steps`` timed ones; with the peak GPU
    memory on CUDA. A copy for :func:`concurrent_rates`."""
    import time

    # torch and transformers: imported only when a copy runs, not by the workflow's parse
    import torch
    import transformers

    from contrastlab.losses import build_loss
    from contrastlab.training.runtime import TrainingRun, build_optimizer, resolve_precision
    from contrastlab.training.sentence import CLIP_NORM, build_head, train_step

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    where = torch.device(device)
    config = getattr(transformers, config_class)(**model_config)
    model = transformers.AutoModel.from_config(config).to(where).train()
    head = build_head("simcse", config.model_type, config.hidden_size)[0].to(where).train()
    params = [*model.parameters(), *head.parameters()]
    run = TrainingRun(
        state_dir,
        device=where,
        precision=resolve_precision(precision, where),
        state_every=None,
        progress=False,
    )
    optimizer = build_optimizer("adamw", params, where, lr=1e-5)
    loss_fn = build_loss("infonce")
    ids = torch.randint(1000, config.vocab_size, (batch, length), device=where)
    # Padded rows as the trainer's batches have them (one at the full length, the rest shorter): an
    # all-ones mask would let SDPA drop the mask and time another kernel (docs/gpu-defects.md, G5).
    lengths = torch.randint(min(8, length), length + 1, (batch,), device=where)
    lengths[0] = length
    chunk = (ids, (torch.arange(length, device=where) < lengths[:, None]).to(ids.dtype))

    def step() -> None:
        with run.step_context():
            train_step(
                model, head, loss_fn, [chunk], autocast=run.autocast, with_stats=False, scale=run.scale
            )
            run.optimizer_step(optimizer, params, CLIP_NORM)

    def sync() -> None:
        if where.type == "cuda":
            torch.cuda.synchronize(where)

    for _ in range(warmup):  # optimiser state, kernel choice, allocator
        step()
    sync()
    if where.type == "cuda":
        torch.cuda.reset_peak_memory_stats(where)
    ready()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    elapsed = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated(where) / 2**30 if where.type == "cuda" else None
    return {"steps_per_s": steps / elapsed, "peak_gib": peak}
