"""Which of a calibration's figures a card measured, and how far a calibration moves the plan against the
shipped file of its card, said before the plan uses it (``make plan``'s first lines): a ``make
gpu-check`` on toy-sized fixtures can measure a figure the plan then multiplies by thousands of jobs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from contrastlab.cost.calibration import (
    DEFAULT_CALIBRATION,
    Calibration,
    eval_seconds,
    load_calibration,
    shipped_calibration,
    train_seconds,
)
from contrastlab.cost.flops import CellWork

#: A rule whose total moves by more than this fraction against the shipped card's file is named.
MOVE_LIMIT = 0.25
#: The start-up figures: a plan that prices them as assumed says so first.
STARTUPS = ("overheads_s.train_startup", "overheads_s.evaluate_startup")


def figure_status(calibration: Calibration, figure: str) -> str:
    """``"measured"`` or ``"assumed"``: whether a card measured ``figure`` (``overheads_s.<key>`` or
    ``achieved_tflops.<track>.<precision>``), by the file's ``measured_entries``/``assumed_entries``; a
    figure taken from the default has the default's status; a file scaled from another card's, assumed."""
    rate = figure.removeprefix("achieved_tflops.").replace(".", "/")
    if figure in calibration.filled_from_default or rate in calibration.filled_from_default:
        return figure_status(load_calibration(DEFAULT_CALIBRATION), figure)
    if calibration.note:
        return "assumed"
    if calibration.measured:
        return "assumed" if figure in calibration.assumed_entries else "measured"
    return "measured" if figure in calibration.measured_entries else "assumed"


def figures(calibration: Calibration) -> dict[str, float]:
    """Every figure the plan prices with, by name (as :func:`figure_status` takes them)."""
    out = {f"overheads_s.{key}": value for key, value in calibration.overheads_s.items()}
    for track, rates in calibration.achieved_tflops.items():
        out |= {f"achieved_tflops.{track}.{precision}": value for precision, value in rates.items()}
    return out


def status_items(calibration: Calibration) -> list[str]:
    """The plan's first bullets: the start-ups when assumed, and one listing the assumed figures."""
    assumed = [f for f in figures(calibration) if figure_status(calibration, f) == "assumed"]
    items = []
    startups = [f for f in STARTUPS if f in assumed]
    if startups:
        keys = [f.split(".")[-1] for f in startups]
        values = ", ".join(f"{key} {calibration.overheads_s[key]:g} s" for key in keys)
        items.append(
            f"**Start-ups assumed, not measured on a card** ({values}): every job's fixed cost is a guess "
            "until `make gpu-check` measures it."
        )
    items.append(
        f"Figures: {len(figures(calibration)) - len(assumed)} measured on a card, {len(assumed)} assumed"
        + (f" ({', '.join(a.split('.', 1)[1] for a in assumed)})." if assumed else ".")
    )
    return items


def _with(reference: Calibration, figure: str, value: float) -> Calibration:
    """``reference`` with one figure replaced by ``value``."""
    kind, _, rest = figure.partition(".")
    if kind == "overheads_s":
        return replace(reference, overheads_s={**reference.overheads_s, rest: value})
    track, precision = rest.split(".")
    rates = {t: dict(r) for t, r in reference.achieved_tflops.items()}
    rates[track][precision] = value
    return replace(reference, achieved_tflops=rates)


def rule_seconds(works: Iterable[CellWork], calibration: Calibration) -> dict[str, float]:
    """Per GPU rule, the seconds of ``works``' training and encoding jobs under ``calibration``."""
    out: dict[str, float] = {}
    for work in works:
        vision = work.track == "vision"
        train, encode = ("train_vision", "encode_vision") if vision else ("train", "encode")
        out[train] = out.get(train, 0.0) + train_seconds(work, calibration)
        out[encode] = out.get(encode, 0.0) + eval_seconds(work, calibration)
    return out


def moved_rules(works: Mapping[str, CellWork], calibration: Calibration) -> list[str]:
    """One bullet per GPU rule whose total under ``calibration`` moves by more than :data:`MOVE_LIMIT`
    against the shipped file of its card (the default's for an unknown card), naming the figure that moves
    it most; none when ``calibration`` is a shipped file itself."""
    reference = shipped_calibration(calibration.device)
    if reference.path == calibration.path:
        return []
    cells = list(works.values())
    before, after = rule_seconds(cells, reference), rule_seconds(cells, calibration)
    ours, theirs = figures(calibration), figures(reference)
    changed = [f for f, v in ours.items() if theirs.get(f) != v]
    items = []
    for rule, seconds in after.items():
        if not before.get(rule) or abs(seconds / before[rule] - 1) <= MOVE_LIMIT:
            continue
        moves = {f: rule_seconds(cells, _with(reference, f, ours[f]))[rule] - before[rule] for f in changed}
        figure = max(moves, key=lambda f: abs(moves[f]), default=None)
        why = (
            f"{figure} {ours[figure]:g} against the shipped {theirs[figure]:g} "
            f"({moves[figure] / 3600:+.1f} GPU-h alone)"
            if figure
            else "no single figure"
        )
        items.append(
            f"**calibration moves rule {rule}** by {seconds / before[rule] - 1:+.0%} against "
            f"{reference.path} ({before[rule] / 3600:.1f} -> {seconds / 3600:.1f} GPU-h): {why}."
        )
    return items
