"""Several small cells on one GPU (``resources.gpu_share``): which cells share a GPU, and what the packed
grid costs.

A BERT-base cell at batch 64 uses a few GB of an 80 GB card and is launch-bound at that size, so n such
cells on one GPU may finish sooner than n in a row. With ``resources.gpu_share: k`` (1, the default:
off) a training job whose cell's estimated peak memory (:attr:`~contrastlab.cost.flops.CellWork.peak_gib`)
fits n times in :data:`MEMORY_FRACTION` of the card's memory (the calibration's ``gpu_memory_gib``)
shares its GPU with up to n - 1 others, n the largest of :data:`SHARES` up to k (:func:`cell_share`);
the slot locks of :mod:`contrastlab.workflow.gpus` hold every GPU to that.

Price: n copies that run together at a summed speed-up s (the sum of their steps/s over one copy's
alone) each take n/s times as long on 1/n of a GPU, so a packed job costs its GPU-seconds alone ÷ s
(:func:`packed_seconds`). s comes from the calibration's packing speed-ups (precision -> copies ->
speed-up): measured by ``make gpu-check``, else the shipped default's, which are the README's H100
figures of ``benchmarks/gpu_share.py`` (assumed for any other machine; the plan says which).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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


def job_share(config: Mapping[str, Any], cell: Any, calibration: Any, point: Any = None) -> int:
    """The ``gpu_share`` resource of a training job (rules ``train``, ``train_vision``): its cell's
    :func:`cell_share` at the configured precision on the calibration's card; 1 when packing is off
    or the job runs on the CPU (``resources.gpu: 0``)."""
    resources = config["resources"]
    share = resources.get("gpu_share", 1)
    if share == 1 or not resources.get("gpu"):
        return 1
    from contrastlab.cost.flops import cell_work

    return cell_share(cell_work(config, cell, point=point).peak_gib, calibration.gpu_memory_gib, share)


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


def packing_lines(config: Mapping[str, Any], jobs: Sequence[Any], calibration: Any) -> list[str]:
    """The plan's paragraph on packing: off, or which jobs share a GPU, the speed-ups priced and
    whether they were measured (``jobs``: the plan's, with their ``share``)."""
    share = config["resources"].get("gpu_share", 1)
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
        f"n times in {MEMORY_FRACTION:.0%} of {calibration.gpu_memory_gib:.0f} GiB): "
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
