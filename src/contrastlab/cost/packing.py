"""Several small cells on one GPU (``resources.gpu_share``): which cells share a GPU, and what the packed
grid costs.

With ``resources.gpu_share: k`` (1, the default: off) a training job whose cell's peak memory estimate
fits n times in :data:`MEMORY_FRACTION` of the card shares its GPU with up to n - 1 others, n of
:data:`SHARES` up to k: the one with the largest measured speed-up for the cell's step under the
config's MPS state (:func:`chosen_share`), and only where that speed-up is above 1.
:mod:`contrastlab.workflow.gpus` holds every GPU to that, :mod:`contrastlab.workflow.mps` runs the MPS
daemon, and on SLURM the packed jobs form job groups (:func:`pack_group`).

Price: n copies that run together at a summed speed-up s each take n/s times as long on 1/n of a GPU,
so a packed job costs its GPU-seconds alone ÷ s (:func:`packed_seconds`), s the calibration's measured
figure (:func:`step_figures`, timed by :mod:`contrastlab.cost.packing_measure`). Assumed figures and a
calibration scaled from another card price none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contrastlab import families
from contrastlab.blocks import Paragraph
from contrastlab.config import Grid
from contrastlab.cost.calibration import VISION_PACKING_KEY, vision_packing_key
from contrastlab.cost.flops import AS_CONFIGURED, cell_work
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


def mps_asked(grid: Grid) -> bool:
    """Whether packed training jobs run under an MPS daemon (``resources.mps``), whose figures price them."""
    return bool(grid.compute.get("mps", False))


def measured_mode(track: str, precision: str) -> str:
    """The step mode the calibration's packing figures of ``track`` and ``precision`` were timed in: the
    trainer's default on CUDA for a BERT (padding-free IEEE fp32, the captured graph otherwise)."""
    mode = families.step_mode({}, track=track, device_type="cuda", precision=precision, model_type="bert")
    return mode.name


def _mode(work: Any) -> str:
    """A cell's step mode as :func:`measured_mode` names it (compile + graph counts as the graph)."""
    return "padding-free" if work.padding_free else "graph" if work.graphed else "eager"


def step_name(work: Any) -> str:
    """A cell's step as the packing figures key it: its track, precision, mode and an image cell's batch
    (``sentence bf16 graph``, ``vision fp32 graph batch 512``)."""
    batch = f" batch {work.batch}" if work.track == "vision" else ""
    return f"{work.track} {work.precision} {_mode(work)}{batch}"


def step_figures(work: Any, calibration: Any, mps: bool) -> Mapping[int, float]:
    """The measured summed speed-ups (copies -> speed-up) of cells whose step is ``work``'s, with or
    without MPS: the calibration's figures where measured on this card in this cell's mode
    (:func:`measured_mode`), an image cell's at its own batch. Empty: the cell keeps a GPU of its own."""
    if not _priced(calibration) or work.rate_class == "vision_large":
        return {}
    if _mode(work) != measured_mode(work.track, work.precision):
        return {}
    return _measured(calibration, work.track, work.precision, mps, work.batch)


def _priced(calibration: Any) -> bool:
    """Whether the calibration's packing figures were measured on its card: not assumed, not scaled from
    another card (its ``note``), not a ``make gpu-check`` stopped before its packing part."""
    return (
        calibration.packing_measured and not calibration.note and "packing" not in calibration.missing_parts
    )


def _measured(calibration: Any, track: str, precision: str, mps: bool, batch: int = 0) -> Mapping[int, float]:
    """The calibration's packing figures of ``track`` and ``precision`` with or without MPS (an image
    step's at ``batch``)."""
    key = vision_packing_key(mps, batch) if track == "vision" else "speedup" + ("_mps" if mps else "")
    by_precision = calibration.packing_speedup if key == "speedup" else calibration.packing_variants.get(key)
    return (by_precision or {}).get(precision) or {}


def speedup(figures: Mapping[int, float], share: int) -> float:
    """The summed speed-up of ``share`` concurrent cells (``figures``: copies -> speed-up,
    :func:`step_figures`): the figure of the largest measured count up to ``share``; 1 (priced as if
    alone) for one copy or a step without figures.

    >>> speedup({2: 1.158, 4: 1.219}, 4), speedup({2: 1.158}, 4), speedup({}, 4), speedup({2: 1.2}, 1)
    (1.219, 1.158, 1.0, 1.0)
    """
    counts = [k for k in figures if 1 < k <= share]
    return figures[max(counts)] if counts else 1.0


def chosen_share(work: Any, calibration: Any, gpu_share: int, mps: bool) -> int:
    """The jobs per GPU of a cell whose work is ``work``: of the counts that fit (:func:`cell_share`), the
    one with the largest measured speed-up (:func:`step_figures`) if above 1; else 1, a GPU of its own."""
    figures = step_figures(work, calibration, mps)
    fits = [n for n in SHARES if n <= cell_share(work.peak_gib, calibration.gpu_memory_gib, gpu_share)]
    return max(fits, key=lambda n: (speedup(figures, n), -n))


def gpu_share(grid: Grid) -> tuple[int, bool]:
    """``resources.gpu_share`` (training jobs per GPU at most; 1 when the jobs run on the CPU) and
    whether they run under MPS (:func:`mps_asked`), which picks the packing figures."""
    return (grid.compute.get("gpu_share", 1) if grid.compute.get("gpu") else 1), mps_asked(grid)


def job_share(grid: Grid, cell: Any, calibration: Any, point: Any = None) -> int:
    """The ``gpu_share`` resource of a training job: its cell's :func:`chosen_share` as configured; 1 when
    packing is off or the job runs on the CPU. ``calibration()`` is called only when packing is on."""
    share, mps = gpu_share(grid)
    return 1 if share == 1 else chosen_share(cell_work(grid, cell, point=point), calibration(), share, mps)


def pack_group(share: int) -> str | None:
    """The Snakemake job group of a training job that shares its GPU with ``share - 1`` others
    (``gpu_pack2``, ``gpu_pack4``: one SLURM allocation of ``share`` jobs); None for a GPU of its own."""
    return f"gpu_pack{share}" if share > 1 else None


def packed_seconds(seconds: float, work: Any, share: int, calibration: Any, mps: bool) -> float:
    """GPU-seconds of a training job sharing its GPU with ``share - 1`` others: ``seconds`` alone ÷
    :func:`speedup` of its step's figures."""
    return seconds / speedup(step_figures(work, calibration, mps), share)


def packing_blocks(grid: Grid, jobs: Sequence[Any], calibration: Any) -> list[Paragraph]:
    """The plan's paragraph on packing: off, or which jobs share a GPU and which steps have no measured
    figure, the figures priced and their source (``jobs``: the plan's)."""
    share, mps = grid.compute.get("gpu_share", 1), mps_asked(grid)
    under = "under MPS (`resources.mps: true`)" if mps else "without MPS (`resources.mps: false`)"
    if share == 1 or not grid.compute.get("gpu"):
        return [
            Paragraph(
                f"GPU sharing: off (`resources.gpu_share: {share}`): every GPU job has a GPU of its own. "
                "`resources.gpu_share: 2` or 4 lets a cell share one where n cells of its step were measured "
                f"to run faster together, with `resources.mps: true` under MPS; {_figures_text(calibration)}."
            )
        ]
    counts = {n: sum(j.share == n for j in jobs) for n in SHARES if n > 1}
    spread = ", ".join(f"{c} training jobs {n} per GPU" for n, c in counts.items() if c)
    works = [j.works[AS_CONFIGURED] for j in jobs if j.works]
    alone = sorted({step_name(w) for w in works if not step_figures(w, calibration, mps)})
    text = (
        f"GPU sharing on (`resources.gpu_share: {share}`, {under}; a cell shares when its peak memory "
        f"estimate fits n times in {MEMORY_FRACTION:.0%} of {calibration.gpu_memory_gib:.0f} GiB and n "
        "cells of its step were measured to run faster together): "
        f"{spread or 'no training job shares a GPU'}. No measured figure {under.split(' (')[0]} for "
        f"{', '.join(alone) or 'no step'}: a GPU of their own. Packed GPU-hours are the hours alone ÷ "
        f"the summed speed-up; {_figures_text(calibration)}. On one machine give Snakemake {share} GPU "
        f"slots per GPU (`--resources gpu=<GPUs × {share}>`); on SLURM the packed jobs of one GPU go out "
        "as one allocation (profiles/slurm, group-components) but run there one after another: no "
        "speed-up there (docs/cluster.md)."
    )
    return [Paragraph(text)]


def _figures_text(calibration: Any) -> str:
    """Which packing figures the calibration has, whether they are priced, and their source."""
    if not _priced(calibration):
        why = "measured on another card" if calibration.packing_measured else "assumed, not measured"
        return (
            f"the calibration's packing figures are {why}, so none is priced "
            f"(source: {calibration.packing_source or 'none'})"
        )
    matches = (VISION_PACKING_KEY.fullmatch(key) for key in calibration.packing_variants)
    batches = sorted({int(match.group(2)) for match in matches if match})  # those of the image figures
    steps = [("sentence", 0), *(("vision", batch) for batch in batches)]
    found = [
        f"{track} {precision} {measured_mode(track, precision)}{f' batch {batch}' if batch else ''} "
        f"{'under' if mps else 'without'} MPS "
        + ", ".join(f"{s:.2f}× with {k}" for k, s in sorted(by_count.items()))
        for track, batch in steps
        for precision in RESOLVED
        for mps in (False, True)
        if (by_count := _measured(calibration, track, precision, mps, batch))
    ]
    return (
        f"speed-ups measured: {'; '.join(found) or 'none'}; any other step (an image cell at a batch not "
        f"measured too) is assumed not to gain and priced as if alone (source: {calibration.packing_source})"
    )
