"""What a run cost: wall time, peak memory and GPU-hours per cell, per rule and per paper.

Read from Snakemake's benchmark files, one TSV per job under ``<results_dir>/benchmarks`` (the rules'
``benchmark:``: ``train/<experiment>/<backbone>/<method>/seed<N>.tsv``, the same under ``evaluate/``,
``evaluate/pretrained/<backbone>.tsv``, ``figures/<name>.tsv``; columns ``s`` (wall seconds) and
``max_rss`` (peak resident memory, MB), one row per repeat), and from the training logs
(``<results_dir>/checkpoints/<cell>/train_log.jsonl``: the device of the ``start`` event, the
``peak_gpu_memory_gib`` of the ``end`` event). A job counts GPU-hours (its wall hours, one GPU per job as
the rules request) only when its log says it ran on a CUDA device; evaluation jobs do not log their
device, so their GPU-hours show as "—" as do those of every CPU run.

Example (a training job and its evaluation, on the CPU)::

    >>> import pathlib, tempfile
    >>> r = pathlib.Path(tempfile.mkdtemp())
    >>> for kind, s in (("train", "12.4"), ("evaluate", "3.0")):
    ...     f = r / "benchmarks" / kind / "nie2023/bert-base/mpt/seed42.tsv"
    ...     f.parent.mkdir(parents=True)
    ...     _ = f.write_text(f"s\\th:m:s\\tmax_rss\\n{s}\\t0:00:12\\t900.7\\n")
    >>> [(j.rule, j.cell, j.seconds) for j in read_job_costs(r)]
    [('evaluate', 'nie2023/bert-base/mpt/seed42', 3.0), ('train', 'nie2023/bert-base/mpt/seed42', 12.4)]
    >>> per_paper(read_job_costs(r))
    [{'paper': 'nie2023', 'jobs': '2', 'cells': '1', 'wall': '0:00:15', 'peak RSS (MB)': '901', 'GPU-h': '—'}]
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from contrastlab.tables.markdown import markdown_table

#: Shown where a number is unknown or zero by construction (no GPU job, no memory figure).
NONE = "—"


@dataclass(frozen=True)
class JobCost:
    """One finished job: its rule, the paper and cell it belongs to (``cell`` is ``""`` for jobs of no
    cell, such as a figure's), its wall seconds and peak resident memory (MB, ``None`` when Snakemake
    could not measure it), and, for a job logged on a CUDA device, its GPU-hours and peak GPU memory."""

    rule: str
    paper: str
    cell: str
    seconds: float
    max_rss_mb: float | None
    gpu_hours: float | None = None
    peak_gpu_gib: float | None = None


def paper_of(experiment: str) -> str:
    """The paper an experiment or figure job belongs to: the config names experiments ``<paper>`` or
    ``<paper>_<study>`` (``nie2023_fig3``, ``macl_cifar10``, ``oar_synthetic``) and analytic figures
    ``<paper>-analytic``."""
    return experiment.split("-", 1)[0].split("_", 1)[0]


def _number(text: str | None) -> float | None:
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None  # Snakemake writes "NA" where psutil could not measure
    return value if math.isfinite(value) else None


def read_benchmark(path: str | os.PathLike) -> tuple[float, float | None]:
    """``(wall seconds, peak RSS in MB)`` of one Snakemake benchmark TSV: the mean wall time and the
    largest peak over its rows (one row per ``repeat``)."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    seconds = [s for s in (_number(r.get("s")) for r in rows) if s is not None]
    if not seconds:
        raise ValueError(f"benchmark file {path} has no 's' (wall seconds) value")
    rss = [m for m in (_number(r.get("max_rss")) for r in rows) if m is not None]
    return sum(seconds) / len(seconds), (max(rss) if rss else None)


def training_device(log_path: str | os.PathLike) -> tuple[str | None, float | None]:
    """``(device, peak GPU memory in GiB)`` from a training log: the ``device`` of its ``start`` event
    and the ``peak_gpu_memory_gib`` of its last ``end`` event (``None`` where absent)."""
    device = peak = None
    try:
        lines = Path(log_path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None, None
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill: the events around it still count
        if event.get("event") == "start":
            device = event.get("device")
        elif event.get("event") == "end":
            peak = event.get("peak_gpu_memory_gib")
    return device, peak


def _job(results: Path, parts: Sequence[str], seconds: float, rss: float | None) -> JobCost:
    """The :class:`JobCost` of the benchmark file ``benchmarks/<parts...>.tsv`` (suffix removed)."""
    kind, rest = parts[0], list(parts[1:])
    if kind in ("train", "evaluate") and len(rest) == 4:
        cell = "/".join(rest)
        if kind == "train":
            vision = (results / "checkpoints" / cell / "encoder").is_dir()
            device, peak = training_device(results / "checkpoints" / cell / "train_log.jsonl")
            on_gpu = str(device or "").startswith("cuda")
            return JobCost(
                "train_vision" if vision else "train",
                paper_of(rest[0]),
                cell,
                seconds,
                rss,
                gpu_hours=seconds / 3600 if on_gpu else None,
                peak_gpu_gib=peak if on_gpu else None,
            )
        vision = (results / "metrics" / cell / "vision.json").is_file()
        return JobCost("evaluate_vision" if vision else "evaluate", paper_of(rest[0]), cell, seconds, rss)
    if kind == "evaluate" and len(rest) == 2 and rest[0] == "pretrained":
        return JobCost("evaluate_pretrained", "pretrained", "/".join(rest), seconds, rss)
    if kind == "figures" and len(rest) == 1:
        name = rest[0]
        rule = f"figure_analytic_{paper_of(name)}" if name.endswith("-analytic") else name
        return JobCost(rule, paper_of(name), "", seconds, rss)
    return JobCost("/".join(parts[:-1]) or kind, paper_of(rest[0] if rest else kind), "", seconds, rss)


def read_job_costs(results_dir: str | os.PathLike, skipped: list[Path] | None = None) -> list[JobCost]:
    """Every job with a benchmark file under ``<results_dir>/benchmarks``, sorted by rule and cell.

    A file without a wall time raises ``ValueError``, or, given a ``skipped`` list, is appended to it and
    left out (the report must not fail over one damaged timing file).
    """
    results = Path(results_dir)
    root = results / "benchmarks"
    jobs = []
    for path in sorted(root.rglob("*.tsv")):
        try:
            seconds, rss = read_benchmark(path)
        except (OSError, ValueError):
            if skipped is None:
                raise
            skipped.append(path)
            continue
        jobs.append(_job(results, path.relative_to(root).with_suffix("").parts, seconds, rss))
    return sorted(jobs, key=lambda j: (j.rule, j.cell, j.paper))


def hms(seconds: float) -> str:
    """``h:mm:ss`` of a duration in seconds (rounded to the second)."""
    total = round(seconds)
    return f"{total // 3600}:{total % 3600 // 60:02d}:{total % 60:02d}"


def _rss(jobs: Iterable[JobCost]) -> str:
    known = [j.max_rss_mb for j in jobs if j.max_rss_mb is not None]
    return f"{max(known):.0f}" if known else NONE


def _gpu_hours(jobs: Iterable[JobCost]) -> str:
    known = [j.gpu_hours for j in jobs if j.gpu_hours is not None]
    return f"{sum(known):.2f}" if known else NONE


def _grouped(jobs: Sequence[JobCost], key: Callable[[JobCost], str]) -> dict[str, list[JobCost]]:
    groups: dict[str, list[JobCost]] = {}
    for job in jobs:
        groups.setdefault(key(job), []).append(job)
    return groups


#: Projected GPU-hours per "paper", "rule" and "cell" (:func:`contrastlab.tables.plan.projected_hours`).
Projected = Mapping[str, Mapping[str, float]]


def _projected(projected: Projected | None, kind: str, key: str) -> dict[str, str]:
    """The "projected GPU-h" column of one row, or nothing without a projection."""
    if projected is None:
        return {}
    value = projected[kind].get(key)
    return {"projected GPU-h": NONE if value is None else f"{value:.2f}"}


def per_paper(jobs: Sequence[JobCost], projected: Projected | None = None) -> list[dict[str, str]]:
    """One row per paper: jobs, cells, total wall time, the largest peak RSS, GPU-hours (and the
    projected GPU-hours of the paper's whole grid, with ``projected``)."""
    return [
        {
            "paper": paper,
            "jobs": str(len(group)),
            "cells": str(len({j.cell for j in group if j.cell})),
            "wall": hms(sum(j.seconds for j in group)),
            "peak RSS (MB)": _rss(group),
            "GPU-h": _gpu_hours(group),
            **_projected(projected, "paper", paper),
        }
        for paper, group in sorted(_grouped(jobs, lambda j: j.paper).items())
    ]


def per_rule(jobs: Sequence[JobCost], projected: Projected | None = None) -> list[dict[str, str]]:
    """One row per rule: jobs, total and mean wall time, the largest peak RSS, GPU-hours (and the
    projected GPU-hours of all the rule's jobs in the grid, with ``projected``)."""
    return [
        {
            "rule": rule,
            "jobs": str(len(group)),
            "wall": hms(sum(j.seconds for j in group)),
            "mean per job": hms(sum(j.seconds for j in group) / len(group)),
            "peak RSS (MB)": _rss(group),
            "GPU-h": _gpu_hours(group),
            **_projected(projected, "rule", rule),
        }
        for rule, group in sorted(_grouped(jobs, lambda j: j.rule).items())
    ]


def per_cell(jobs: Sequence[JobCost], projected: Projected | None = None) -> list[dict[str, str]]:
    """One row per cell (training and evaluation together): wall time of each, the larger peak RSS, the
    training's peak GPU memory, GPU-hours (and the projected GPU-hours, with ``projected``)."""
    rows = []
    for cell, group in sorted(_grouped([j for j in jobs if j.cell], lambda j: j.cell).items()):
        train = [j for j in group if j.rule.startswith("train")]
        evaluate = [j for j in group if j.rule.startswith("evaluate")]
        peaks = [j.peak_gpu_gib for j in group if j.peak_gpu_gib is not None]
        rows.append(
            {
                "cell": cell,
                "train": hms(sum(j.seconds for j in train)) if train else NONE,
                "evaluate": hms(sum(j.seconds for j in evaluate)) if evaluate else NONE,
                "peak RSS (MB)": _rss(group),
                "peak GPU mem (GiB)": f"{max(peaks):.1f}" if peaks else NONE,
                "GPU-h": _gpu_hours(group),
                **_projected(projected, "cell", cell),
            }
        )
    return rows


def cost_lines(
    results_dir: str | os.PathLike, projected: Projected | None = None, projected_note: str = ""
) -> list[str]:
    """The report's cost section (Markdown lines) for the run in ``results_dir``: per paper, per rule
    and per cell; one line saying so when no job has written a benchmark file yet. With ``projected``
    (:func:`contrastlab.tables.plan.projected_hours`), the projected GPU-hours beside the measured
    ones (``projected_note`` says how they were projected), or alone before any job ran."""
    skipped: list[Path] = []
    jobs = read_job_costs(results_dir, skipped)
    lines = ["## Cost", ""]
    if projected_note:
        lines += [projected_note, ""]
    if not jobs:
        lines += [f"No benchmark files under `{Path(results_dir) / 'benchmarks'}` yet: no cost to show.", ""]
        if projected is not None:
            for kind in ("paper", "rule"):
                rows = [{kind: k, "projected GPU-h": f"{v:.2f}"} for k, v in sorted(projected[kind].items())]
                lines += [f"### Projected, per {kind}", ""] + markdown_table(rows, numeric_after_first=True)
                lines.append("")
        return lines
    lines += [
        f"From the {len(jobs)} jobs' Snakemake benchmark files (`benchmarks/`: wall time and peak resident "
        "memory of each job) and the training logs (device, peak GPU memory). GPU-h: wall hours of the jobs "
        f"whose log records a CUDA device, one GPU each; {NONE} where none did (CPU runs; evaluation jobs "
        "do not log their device yet)."
        + (
            f" Left out: {len(skipped)} benchmark files without a wall time ({skipped[0]}, ...)."
            if skipped
            else ""
        ),
        "",
    ]
    for title, rows in (
        ("Per paper", per_paper(jobs, projected)),
        ("Per rule", per_rule(jobs, projected)),
        ("Per cell", per_cell(jobs, projected)),
    ):
        lines += [f"### {title}", ""] + markdown_table(rows, numeric_after_first=True) + [""]
    return lines
