"""What a run cost: wall time, peak memory and GPU-hours per cell, per rule and per paper.

Read from Snakemake's benchmark files (one TSV per job, :meth:`contrastlab.paths.Results.benchmark`;
wall seconds ``s`` and peak RSS ``max_rss`` in MB; a warm-started job's own peak:
:func:`warm_usage_path`), the training logs (the ``start`` event's device, the ``end`` event's
``peak_gpu_memory_gib``) and the metrics files (``encoding.device``). A job counts GPU-hours (its wall
hours, one GPU per job) only when its record says it ran on a CUDA device; the probe jobs and every CPU
run show "—". :func:`migrate_benchmarks` moves the files of a results folder written before the
benchmark folders were named by rule.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrastlab.blocks import Heading, Paragraph, rows_table
from contrastlab.config import paper_of
from contrastlab.paths import Results, read_json
from contrastlab.search import SEARCHED

#: Shown where a number is unknown or zero by construction (no GPU job, no memory figure).
NONE = "—"


@dataclass(frozen=True)
class JobCost:
    """One finished job: its rule, paper and cell (``""`` for a figure's job), wall seconds, peak resident
    memory (MB, ``None`` where unmeasured), and, for a job logged on a CUDA device, its GPU-hours and peak
    GPU memory."""

    rule: str
    paper: str
    cell: str
    seconds: float
    max_rss_mb: float | None
    gpu_hours: float | None = None
    peak_gpu_gib: float | None = None
    phases: Mapping[str, float] | None = None  # a training job's (contrastlab.training.phases)
    start: Mapping[str, Any] | None = None  # warm or cold, and why (contrastlab.workflow.warm)


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
    rss += [m for m in [_warm_rss(path)] if m is not None]
    return sum(seconds) / len(seconds), (max(rss) if rss else None)


def warm_usage_path(benchmark: str | os.PathLike) -> Path:
    """Beside a benchmark file ``<place>.tsv``, ``<place>.warm.json``: the peak memory (``max_rss``, MB)
    and CPU seconds a job started warm measured of itself (:func:`contrastlab.workflow.warm.record_usage`):
    Snakemake's benchmark measured the process that handed the job over, not the job."""
    return Path(benchmark).with_suffix(".warm.json")


def _warm_rss(benchmark: str | os.PathLike) -> float | None:
    usage = warm_usage_path(benchmark)
    try:
        age = Path(benchmark).stat().st_mtime - usage.stat().st_mtime
    except OSError:
        return None
    rss = _number(read_json(str(usage)).get("max_rss"))
    # Written as the job ended, just before Snakemake wrote the benchmark file; one left by an earlier run
    # of the job (run again since without a warm start) is older than the benchmark file by far more.
    return rss if -5 <= age <= 60 else None


def training_device(log_path: str | os.PathLike) -> tuple[str | None, dict]:
    """``(device, end)`` from a training log: its ``start`` event's ``device`` (``None`` where absent) and
    its last ``end`` event (``{}`` where absent)."""
    device, end = None, {}
    try:
        lines = Path(log_path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return device, end
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill: the events around it still count
        if event.get("event") == "start":
            device = event.get("device")
        elif event.get("event") == "end":
            end = event
    return device, end


def metrics_device(metrics_path: str | os.PathLike) -> str | None:
    """The device a cell's GPU-side evaluation ran on, from its metrics file's ``encoding.device`` (an
    older ``vision.json``: its ``device``); ``None`` where absent."""
    data = read_json(metrics_path)
    encoding = data.get("encoding")
    if Path(metrics_path).name == "vision.json" and not isinstance(encoding, dict):
        return data.get("device")
    return encoding.get("device") if isinstance(encoding, dict) else None


#: The rules of a cell whose job may hold a GPU, and where the job's device is recorded: the training log,
#: or the metrics file of the cell's track (the probe jobs run on the CPU).
_DEVICE_RECORD = {
    **dict.fromkeys(("train", "train_vision"), "log"),
    **dict.fromkeys(("encode", "encode_pretrained", "search_encode"), "sentence"),
    **dict.fromkeys(("encode_vision", "evaluate_vision"), "vision"),
}


def _job(results: Results, parts: Sequence[str], seconds: float, rss: float | None) -> JobCost:
    """The :class:`JobCost` of ``benchmarks/<rule>/<place>.tsv`` (``parts``: the rule, then the place's
    parts), or of ``benchmarks/<rule>.tsv`` for a job of no cell."""
    rule, place = parts[0], "/".join(parts[1:])
    if not place:  # a figure's job: oar_synthetic, figure_analytic_<paper>
        return JobCost(rule, paper_of(rule.removeprefix("figure_analytic_")), "", seconds, rss)
    device, end = None, {}
    record = _DEVICE_RECORD.get(rule)
    if record == "log":
        device, end = training_device(results.checkpoint(place, "train_log.jsonl"))
    elif record is not None:
        metrics = results.metrics(place, record)
        # The image probes run on the CPU; a vision.json without `encoding` predates that split: its one
        # GPU job extracted the features and fitted the probes.
        if rule != "evaluate_vision" or "encoding" not in read_json(metrics):
            device = metrics_device(metrics)
    gpu_hours = seconds / 3600 if str(device or "").startswith("cuda") else None
    peak = end.get("peak_gpu_memory_gib") if gpu_hours is not None else None
    phases, start = (end.get("phases"), end.get("start")) if end.get("phases") else (None, None)
    return JobCost(rule, paper_of(parts[1]), place, seconds, rss, gpu_hours, peak, phases, start)


def read_job_costs(results_dir: str | os.PathLike, skipped: list[Path] | None = None) -> list[JobCost]:
    """Every job with a benchmark file under ``<results_dir>/benchmarks``, sorted by rule and cell. A file
    without a wall time raises ``ValueError``, or, given a ``skipped`` list, is appended to it."""
    results = Results(results_dir)
    root = Path(results.benchmarks)
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


def migrate_benchmarks(results_dir: str | os.PathLike) -> list[tuple[Path, Path]]:
    """Move the benchmark files a run wrote before they were named by rule to ``benchmarks/<rule>/``;
    returns the moves, ``(from, to)``. Moving again moves nothing."""
    results = Results(results_dir)
    root = Path(results.benchmarks)
    moves = []
    for old in sorted(root.glob("*/**/*.tsv")):
        step, *place = old.relative_to(root).with_suffix("").parts
        rule = None
        if step == "figures" and len(place) == 1:
            name = place[0]
            rule = f"figure_analytic_{name.removesuffix('-analytic')}" if name.endswith("-analytic") else name
            place = []
        elif step in ("encode", "evaluate") and place[:1] == ["pretrained"]:
            rule = f"{step}_pretrained"
        elif step in ("train", "encode", "evaluate") and len(place) == 4:
            cell = "/".join(place)
            if place[2].endswith(SEARCHED):
                rule = f"search_{step}"
            elif (
                Path(results.checkpoint(cell, "encoder")).is_dir()
                or Path(results.metrics(cell, "vision")).is_file()
            ):
                rule = f"{step}_vision"
        if rule is not None:
            new = Path(results.benchmark(rule, "/".join(place) or None))
            new.parent.mkdir(parents=True, exist_ok=True)
            old.rename(new)
            moves.append((old, new))
    return moves


def hms(seconds: float) -> str:
    """``h:mm:ss`` of a duration in seconds (rounded to the second)."""
    total = round(seconds)
    return f"{total // 3600}:{total % 3600 // 60:02d}:{total % 60:02d}"


def known_total(values: Iterable[float | None], total: Callable[[list[float]], float], spec: str) -> str:
    """``total`` (max, sum) of the known ``values`` formatted by ``spec``; "—" where none is known."""
    known = [v for v in values if v is not None]
    return format(total(known), spec) if known else NONE


def grouped(jobs: Iterable[Any], key: Callable[[Any], str]) -> dict[str, list[Any]]:
    """``jobs`` by ``key``, in the order each key first comes."""
    groups: dict[str, list[Any]] = {}
    for job in jobs:
        groups.setdefault(key(job), []).append(job)
    return groups


#: Projected GPU-hours per "paper", "rule" and "cell" (:func:`contrastlab.cost.plan.projected_hours`).
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
            "peak RSS (MB)": known_total((j.max_rss_mb for j in group), max, ".0f"),
            "GPU-h": known_total((j.gpu_hours for j in group), sum, ".2f"),
            **_projected(projected, "paper", paper),
        }
        for paper, group in sorted(grouped(jobs, lambda j: j.paper).items())
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
            "peak RSS (MB)": known_total((j.max_rss_mb for j in group), max, ".0f"),
            "GPU-h": known_total((j.gpu_hours for j in group), sum, ".2f"),
            **_projected(projected, "rule", rule),
        }
        for rule, group in sorted(grouped(jobs, lambda j: j.rule).items())
    ]


def _step(rule: str) -> str:
    """A cell's step a rule runs: ``train``, ``encode`` or ``evaluate`` (``search_encode``,
    ``encode_vision`` and ``encode_pretrained`` encode)."""
    return rule.removeprefix("search_").split("_", 1)[0]


def per_cell(jobs: Sequence[JobCost], projected: Projected | None = None) -> list[dict[str, str]]:
    """One row per cell: wall time of its training, encoding and probes (``evaluate``), the larger peak
    RSS, the training's peak GPU memory, GPU-hours (and the projected GPU-hours, with ``projected``)."""
    rows = []
    for cell, group in sorted(grouped([j for j in jobs if j.cell], lambda j: j.cell).items()):
        steps = {s: [j.seconds for j in group if _step(j.rule) == s] for s in ("train", "encode", "evaluate")}
        rows.append(
            {
                "cell": cell,
                **{step: hms(sum(seconds)) if seconds else NONE for step, seconds in steps.items()},
                "peak RSS (MB)": known_total((j.max_rss_mb for j in group), max, ".0f"),
                "peak GPU mem (GiB)": known_total((j.peak_gpu_gib for j in group), max, ".1f"),
                "GPU-h": known_total((j.gpu_hours for j in group), sum, ".2f"),
                **_projected(projected, "cell", cell),
            }
        )
    return rows


def cost_blocks(
    results_dir: str | os.PathLike, projected: Projected | None = None, projected_note: str = ""
) -> list:
    """The report's cost section (blocks) for the run in ``results_dir``: per paper, rule and cell; one
    line when no job has written a benchmark file yet. With ``projected``
    (:func:`contrastlab.cost.plan.projected_hours`), the projected GPU-hours beside the measured ones (or
    alone before any job ran), with ``projected_note`` saying how they were projected."""
    skipped: list[Path] = []
    jobs = read_job_costs(results_dir, skipped)
    blocks: list = [Heading(2, "Cost"), *([Paragraph(projected_note)] if projected_note else [])]
    if not jobs:
        where = Path(Results(results_dir).benchmarks)
        blocks.append(Paragraph(f"No benchmark files under `{where}` yet: no cost to show."))
        for kind in ("paper", "rule") if projected is not None else ():
            rows = [{kind: k, "projected GPU-h": f"{v:.2f}"} for k, v in sorted(projected[kind].items())]
            blocks += [Heading(3, f"Projected, per {kind}"), rows_table(rows, right=1)]
        return blocks
    blocks.append(
        Paragraph(
            f"From the {len(jobs)} jobs' Snakemake benchmark files (`benchmarks/`: wall time and peak "
            "resident memory of each job; for a job started warm, the peak of its own process, which leaves "
            "out the library pages only a fresh import touches), the training logs (device, peak GPU "
            "memory) and the metrics files (the device of the SentEval encoding and of the vision "
            "evaluation). GPU-h: wall hours of the jobs that record a CUDA device, one GPU each (training, "
            f"`encode`, `encode_vision`); {NONE} where none did (CPU runs; the SentEval probe jobs, "
            "`evaluate`, run on the CPU)."
            + (
                f" Left out: {len(skipped)} benchmark files without a wall time ({skipped[0]}, ...)."
                if skipped
                else ""
            )
        )
    )
    for title, rows in (
        ("Per paper", per_paper(jobs, projected)),
        ("Per rule", per_rule(jobs, projected)),
        ("Per cell", per_cell(jobs, projected)),
    ):
        blocks += [Heading(3, title), rows_table(rows, right=1)]
    if phases := per_training_job(jobs):
        blocks += [Heading(3, "Where the training jobs' time went"), Paragraph(PHASES_NOTE)]
        blocks.append(rows_table(phases, right=1))
    return blocks


#: A training job's phases (contrastlab.training.phases), in their order, by the column that shows them.
PHASE_COLUMNS = {
    "interpreter": "interpreter_s",
    "imports": "imports_s",
    "CUDA": "cuda_init_s",
    "data": "data_s",
    "model": "model_load_s",
    "setup": "setup_s",
    "1st step": "first_step_s",
    "steps": "steps_s",
    "dev": "dev_s",
    "snapshots": "snapshots_s",
    "writes": "writes_s",
    "total": "total_s",
}
#: The phases that are the job's work; the rest of its total is start-up.
WORK_PHASES = ("steps_s", "dev_s", "snapshots_s", "writes_s")
PHASES_NOTE = (
    "Seconds of each phase from the job's process start, as its training log's end record says "
    "(`contrastlab.training.phases`): the interpreter and Snakemake's preamble (and any wait for a warm "
    "starter), the script's imports, CUDA's start, the tokenised corpus or images, the model, the dev set "
    "and snapshot, the first step (a capture or compilation included), the other steps, dev evaluations, "
    "what snapshots cost the loop, the best checkpoint's write. *outside*: the total less steps, dev, "
    "snapshots and writes; *job*: Snakemake's wall time of the job."
)


def start_text(start: Mapping[str, Any] | None) -> str:
    """A job's ``start``: ``warm``, ``cold`` (with why where said), or "—" where not recorded."""
    if not start:
        return NONE
    if start.get("warm"):
        return "warm"
    return f"cold ({start['why_cold']})" if start.get("why_cold") else "cold"


def per_training_job(jobs: Sequence[JobCost]) -> list[dict[str, str]]:
    """One row per training job that recorded its phases: how it started, each phase's seconds
    (:data:`PHASE_COLUMNS`), the part of its total outside its work (:data:`WORK_PHASES`), its wall time."""
    rows = []
    for job in (j for j in jobs if j.phases):
        phases = job.phases or {}
        seconds = {name: phases.get(key) for name, key in PHASE_COLUMNS.items()}
        outside = phases.get("total_s", 0.0) - sum(phases.get(key, 0.0) for key in WORK_PHASES)
        rows.append(
            {
                "job": f"{job.rule} {job.cell}",
                "start": start_text(job.start),
                **{name: NONE if value is None else f"{value:.1f}" for name, value in seconds.items()},
                "outside": f"{outside:.1f}",
                "job wall": f"{job.seconds:.1f}",
            }
        )
    return rows
