"""The plan's summary, first under its title: the totals per precision choice, the share of the bill in
IEEE fp32, the fp32 floor and the makespan on one 8-GPU node (``make plan``; docs/cost.md).

The fp32 floor is the IEEE-fp32 cells' training-step FLOPs at the card's full fp32 data-sheet peak:
what no speed-up goes below, only less fp32 work or another precision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contrastlab.blocks import Bullets, Heading
from contrastlab.cost.calibration import SIDE_BY_SIDE, Calibration
from contrastlab.cost.cards import GPU_PEAKS
from contrastlab.cost.flops import AS_CONFIGURED, CellWork
from contrastlab.cost.schedule import hm, plan_jobs, simulate

#: The node whose makespan the summary states.
NODE_GPUS = 8


def fp32_hours(jobs: Sequence[Any], works: Mapping[str, CellWork], card: str | None) -> tuple[float, float]:
    """``(GPU-hours, floor hours)`` of the cells that train in IEEE fp32 as configured: their jobs'
    projected hours, and their training FLOPs at ``card``'s fp32 peak (0 for an unknown card)."""
    train = [j for j in jobs if j.rule.startswith("train") and j.precision.get(AS_CONFIGURED) == "fp32"]
    cells = {j.cell for j in train}
    hours = sum(j.seconds[AS_CONFIGURED] for j in jobs if j.cell in cells) / 3600
    peak = GPU_PEAKS[card]["fp32"] if card in GPU_PEAKS else 0.0
    flops = sum(works[j.cell].train_flops for j in train if j.cell in works)
    return hours, flops / (peak * 1e12) / 3600 if peak else 0.0


def summary_blocks(
    jobs: Sequence[Any],
    works: Mapping[str, CellWork],
    calibration: Calibration,
    card: str | None,
    probe_seconds: float,
    cpus_per_gpu: int,
    chosen: str = AS_CONFIGURED,
) -> list:
    """The summary's heading and bullets (module docstring); the makespan under ``chosen``, as the makespan
    section's."""
    totals = {c: sum(j.seconds[c] for j in jobs) / 3600 for c in (AS_CONFIGURED, *SIDE_BY_SIDE)}
    fp32, floor = fp32_hours(jobs, works, card)
    node = simulate(plan_jobs(jobs, probe_seconds, chosen), NODE_GPUS, NODE_GPUS * cpus_per_gpu)
    total = totals[AS_CONFIGURED]
    items = [
        f"{calibration.describe()}.",
        f"GPU-hours: **{total:.1f} as configured**; {totals['fp32']:.1f} all fp32, "
        f"{totals['tf32']:.1f} all tf32, {totals['bf16']:.1f} all bf16.",
    ]
    if floor:
        peak = GPU_PEAKS[card]["fp32"]
        items.append(
            f"IEEE fp32: {fp32:.1f} of the {total:.1f} GPU-h ({fp32 / total:.0%}) are cells training in "
            "fp32; "
            f"their steps at the card's full fp32 peak ({peak:g} TFLOP/s) would still take {floor:.1f} "
            "GPU-h (the fp32 floor: no speed-up goes below it, only less fp32 work or another precision)."
        )
    which = "" if chosen == AS_CONFIGURED else f", all {chosen}"
    items.append(f"Makespan on one {NODE_GPUS}-GPU node{which}: {hm(node.makespan_s)} (h:mm).")
    return [Heading(3, f"Summary ({card or calibration.device})"), Bullets(items)]
