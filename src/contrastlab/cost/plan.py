"""The bill before the first GPU-hour: projected GPU-hours and peak GPU memory of a config's cells.

Projection of a job = its FLOPs (:mod:`contrastlab.cost.flops`) ÷ a throughput calibration
(:mod:`contrastlab.cost.calibration`) + per-job overheads. The plan lists the jobs that hold a GPU
(training, ``encode``, ``encode_pretrained``, ``encode_vision``); the CPU probe jobs (:func:`probe_jobs`,
:attr:`PlannedJob.cpu_after_s`) are counted on one line. Nothing runs and Snakemake's DAG is not built:
the cells come from one :class:`contrastlab.config.Grid` (:func:`make_plan`; ``make plan``).
"""

from __future__ import annotations

import csv
import functools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contrastlab import config as cl_config
from contrastlab import search as cl_search
from contrastlab.blocks import Bullets, Heading, Paragraph, literals_of, rows_table, to_markdown
from contrastlab.config import paper_of
from contrastlab.cost.backbones import Transformer, backbone_transformer, model_type_blocks
from contrastlab.cost.budget import pinned, plan_points, searched_points
from contrastlab.cost.calibration import (
    EVALUATION_PRECISION,
    SIDE_BY_SIDE,
    Calibration,
    calibration_for,
    eval_seconds,
    model_of,
    probe_seconds,
    train_seconds,
    vision_probe_seconds,
)
from contrastlab.cost.cards import native_bf16
from contrastlab.cost.flops import AS_CONFIGURED, CellWork, cell_work, senteval_tokens
from contrastlab.cost.measured import grouped, hms
from contrastlab.cost.packing import chosen_share, gpu_share, packed_seconds, packing_blocks
from contrastlab.cost.provenance import moved_rules, status_items
from contrastlab.cost.schedule import schedule_blocks
from contrastlab.cost.summary import summary_blocks
from contrastlab.papers import TABLES
from contrastlab.paths import write_text
from contrastlab.precision import RESOLVED

#: The GPU counts the makespan section always shows (``make plan GPUS=N`` adds N), and the CPU slots per
#: GPU its probe jobs (SentEval and image) run on (a GPU node has at least this many cores per GPU).
DEFAULT_GPU_COUNTS = (1, 8, 64)
DEFAULT_CPUS_PER_GPU = 8


# ------------------------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class PlannedJob:
    """One job of the plan: its rule, paper, experiment and cell (``""`` for a Pretrained row), its
    projected GPU seconds per precision choice, and its peak GPU memory estimate (the chosen one);
    ``cpu_after_s``: the CPU job that follows it (an ``encode_vision``'s ``evaluate_vision``: the
    probes), not GPU time."""

    rule: str
    paper: str
    experiment: str
    cell: str
    seconds: Mapping[str, float]
    peak_gib: float = 0.0
    kind: str = ""
    precision: Mapping[str, str] = field(default_factory=dict)
    #: training jobs per GPU, itself included (``resources.gpu_share``; the chosen precision's)
    share: int = 1
    cpu_after_s: float = 0.0
    #: A configured cell's training job: its work per choice, priced once (the summary and packing read it).
    works: Mapping[str, CellWork] = field(default_factory=dict, compare=False, repr=False)


class Priced:
    """What the cells of one grid are priced on besides their settings, each resolved once: whether the
    card computes bf16 natively and each sentence backbone, on first use (``cell_work``'s ``bf16``
    and ``model``)."""

    def __init__(self, grid: cl_config.Grid) -> None:
        self.grid = grid
        self.bf16 = native_bf16(grid.compute.get("gpu_model"))
        self.model: Callable[[str], Transformer] = functools.cache(
            functools.partial(backbone_transformer, grid)
        )

    def works(
        self, cell: cl_config.Cell, choices: Sequence[str], point: cl_search.SearchPoint | None = None
    ) -> dict[str, CellWork]:
        """The :class:`CellWork` of ``cell`` (or of the search ``point``) under each precision choice."""
        sentence = self.grid.experiment(cell.experiment).track != "vision"
        model = self.model(cell.backbone) if sentence else None
        return {c: cell_work(self.grid, cell, c, point, model=model, bf16=self.bf16) for c in choices}


def _pretrained_work(grid: cl_config.Grid, backbone: str, priced: Priced | None = None) -> CellWork:
    """The encoding of a Pretrained row: the backbone's forward over every SentEval sentence."""
    n = (priced or Priced(grid)).model(backbone).non_embedding
    return CellWork("sentence", "fp32", 0, 0, 0, 0, 0, 0, 0, 0, 2.0 * n * senteval_tokens(grid), 0, 0, "")


def _training_job(
    share: tuple[int, bool],
    calibration: Calibration,
    works: Mapping[str, CellWork],
    chosen: str,
    configured: bool = False,
    **where: str,
) -> PlannedJob:
    """A training job of the plan: per choice its seconds, packed where its cell shares a GPU (``share``:
    :func:`~contrastlab.cost.packing.gpu_share`); a ``configured`` cell's job keeps its ``works``."""
    shares = {c: chosen_share(w, calibration, *share) for c, w in works.items()}
    return PlannedJob(
        rule="train_vision" if works[chosen].track == "vision" else "train",
        seconds={
            c: packed_seconds(train_seconds(w, calibration), w, shares[c], calibration, share[1])
            for c, w in works.items()
        },
        peak_gib=works[chosen].peak_gib,
        kind=works[chosen].kind,
        precision={c: w.precision for c, w in works.items()},
        share=shares[chosen],
        works=works if configured else {},
        **where,
    )


def _encoding_job(rule: str, choices: Sequence[str], seconds: float, **where: Any) -> PlannedJob:
    """An encoding job of the plan: the same seconds under every choice (the evaluators encode in fp32)."""
    precision = dict.fromkeys(choices, EVALUATION_PRECISION)
    return PlannedJob(rule=rule, seconds=dict.fromkeys(choices, seconds), precision=precision, **where)


def probe_jobs(grid: cl_config.Grid, calibration: Calibration) -> tuple[int, float]:
    """``(jobs, hours)`` of the SentEval probe jobs, which run on the CPU and so are not in the plan's
    GPU-hours: one per sentence cell and per Pretrained row, each :func:`probe_seconds` long."""
    jobs = cell_counts(grid)["sentence"] + len(grid.pretrained)
    return jobs, jobs * probe_seconds(grid, calibration) / 3600


def make_plan(
    grid: cl_config.Grid,
    calibration: Calibration,
    chosen: str = AS_CONFIGURED,
    points: Sequence[cl_search.SearchPoint] = (),
) -> list[PlannedJob]:
    """Every GPU job of the config with its seconds under each precision choice (``config``,
    :data:`SIDE_BY_SIDE`, ``chosen``; memory and kind: ``chosen``'s), and the search ``points``' jobs."""
    choices = list(dict.fromkeys([AS_CONFIGURED, *SIDE_BY_SIDE, chosen]))
    priced = Priced(grid)
    jobs = search_jobs(grid, calibration, chosen, points, priced)
    share = gpu_share(grid)
    for cell in grid.cells:
        works = priced.works(cell, choices)
        vision = works[chosen].track == "vision"
        common = {"paper": paper_of(cell.experiment), "experiment": cell.experiment, "cell": cell.path}
        jobs.append(_training_job(share, calibration, works, chosen, configured=True, **common))
        probes = vision_probe_seconds(works[chosen], calibration) if vision else 0.0
        seconds = eval_seconds(works[chosen], calibration)
        rule = "encode_vision" if vision else "encode"
        jobs.append(_encoding_job(rule, choices, seconds, cpu_after_s=probes, **common))
    for backbone, _ in grid.pretrained:
        seconds = eval_seconds(_pretrained_work(grid, backbone, priced), calibration)
        where = {"paper": "pretrained", "experiment": "pretrained", "cell": f"pretrained/{backbone}"}
        jobs.append(_encoding_job("encode_pretrained", choices, seconds, **where))
    return jobs


def cell_counts(grid: cl_config.Grid) -> dict[str, int]:
    """Training cells: ``sentence`` (of which ``figure``: experiments with no paper table), ``vision``,
    ``total``, and ``pretrained`` evaluations."""
    tabled = {table.experiment for table in TABLES.values()}
    sentence = [c for c in grid.cells if grid.experiment(c.experiment).track != "vision"]
    return {
        "sentence": len(sentence),
        "figure": sum(c.experiment not in tabled for c in sentence),
        "vision": len(grid.cells) - len(sentence),
        "total": len(grid.cells),
        "pretrained": len(grid.pretrained),
    }


# ----------------------------------------------------------------------------------------- rendering
def _choices(jobs: Sequence[PlannedJob]) -> list[str]:
    return list(jobs[0].seconds) if jobs else [AS_CONFIGURED, *SIDE_BY_SIDE]


def _label(choice: str) -> str:
    return "as configured" if choice == AS_CONFIGURED else f"all {choice}"


def _rows(jobs: Sequence[PlannedJob], key, name: str, extra=None) -> list[dict[str, str]]:
    """One row per value of ``key`` (column ``name``): its jobs, ``extra``'s columns, GPU-h per choice;
    then the total."""

    def row(value: str, group: Sequence[PlannedJob], more: Mapping[str, str]) -> dict[str, str]:
        hours = {f"GPU-h {_label(c)}": f"{total_hours(group, c):.2f}" for c in _choices(jobs)}
        return {name: value, "jobs": str(len(group)), **more, **hours}

    rows = [row(value, group, extra(group) if extra else {}) for value, group in grouped(jobs, key).items()]
    return [*rows, row("**total**", jobs, dict.fromkeys(extra(jobs[:1]), "") if extra else {})]


def _cell_extra(group: Sequence[PlannedJob]) -> dict[str, str]:
    train = [j for j in group if j.rule.startswith("train")]
    return {
        "precision": ", ".join(sorted({j.precision.get(AS_CONFIGURED, "") for j in train})),
        "train (each)": hms(train[0].seconds[AS_CONFIGURED]) if train else "—",
        "peak GPU GiB": f"{max(j.peak_gib for j in train):.1f}" if train else "—",
    }


def _seedless(job: PlannedJob) -> str:
    head, _, seed = job.cell.rpartition("/seed")
    return f"{head}/seed*" if head and seed.isdigit() else job.cell


#: GPU memory sizes (GiB) of common cards, for "the smallest card it fits": 24 (RTX 4090, L4),
#: 40 and 80 (A100), 48 (A6000, L40S), 80 (H100), 141 (H200).
CARD_MEMORY_GIB = (24, 40, 48, 80, 141)


def memory_rows(jobs: Sequence[PlannedJob], calibration: Calibration) -> list[dict[str, str]]:
    """One row per kind of cell: how many, its peak GPU memory estimate, whether it fits the
    calibration's GPU, the smallest common card it fits."""
    kinds = grouped([j for j in jobs if j.kind], lambda j: j.kind)
    rows = []
    packed = any(getattr(j, "share", 1) > 1 for j in jobs)  # the column only where cells share a GPU
    memory = calibration.gpu_memory_gib
    for kind, group in sorted(kinds.items()):
        peak = group[0].peak_gib
        rows.append(
            {
                "cell kind": kind,
                "cells": str(len(group)),
                "peak GPU GiB (estimate)": f"{peak:.1f}",
                "fits": "yes" if peak <= memory else f"no (> {memory:.0f})",
                "smallest card": next((f"{n} GiB" for n in CARD_MEMORY_GIB if peak <= n), "none listed"),
                **({"jobs per GPU": str(group[0].share)} if packed else {}),
            }
        )
    return rows


def plan_blocks(
    grid: cl_config.Grid, jobs: Sequence[PlannedJob], calibration: Calibration, chosen: str
) -> list:
    """The plan's blocks: what the jobs are and how they are priced, then per paper, per experiment, per
    rule, peak memory per cell kind, per cell (its seeds in one row)."""
    counts = cell_counts(grid)
    probes, probe_hours = probe_jobs(grid, calibration)
    vision_probes = [j.cpu_after_s for j in jobs if j.rule == "encode_vision"]
    texts = [
        f"{counts['total']} training cells ({counts['sentence']} sentence, {counts['figure']} of them for "
        f"figures only; {counts['vision']} vision), as many evaluations, {counts['pretrained']} Pretrained "
        "evaluations. An evaluation is two jobs: the encoding on the GPU (`encode`, `encode_pretrained`, "
        "`encode_vision`: below) and the probes on the CPU (`evaluate`, `evaluate_pretrained`, "
        "`evaluate_vision`).",
        f"Not GPU time: {probes} SentEval probe jobs on the CPU, {probe_hours:.1f} hours in all "
        f"({probe_seconds(grid, calibration):.0f} s each: start-up and probes); {len(vision_probes)} "
        f"image probe jobs on the CPU (`evaluate_vision`), {sum(vision_probes) / 3600:.1f} hours in all.",
        f"Projected GPU-hours: FLOPs ÷ achieved TFLOP/s + overheads ({calibration.describe()}). "
        "Columns: each cell in its configured precision, then every cell that `precision_override` reaches "
        "in fp32, tf32, bf16 (the evaluators encode in fp32 in every column). Unmeasured figures carry "
        "±40% or more; `make gpu-check` measures them.",
    ]
    sections = [
        ("Per paper", _rows(jobs, lambda j: j.paper, "paper")),
        ("Per experiment (table)", _rows(jobs, lambda j: j.experiment, "experiment")),
        ("Per rule", _rows(jobs, lambda j: j.rule, "rule")),
        (f"Peak GPU memory per cell kind ({_label(chosen)})", memory_rows(jobs, calibration)),
        ("Per cell (its seeds in one row)", _rows(jobs, _seedless, "cell", _cell_extra)),
    ]
    paragraphs = [*map(Paragraph, texts), *step_mode_blocks(grid), *packing_blocks(grid, jobs, calibration)]
    return paragraphs + [b for title, rows in sections for b in (Heading(3, title), rows_table(rows, 1))]


def step_mode_blocks(grid: cl_config.Grid) -> list[Paragraph]:
    """The plan's paragraphs on what its cells' step modes rest on besides their settings: a card without
    native bf16, and the backbones whose model type no config gave (:func:`model_type_blocks`)."""
    card = grid.compute.get("gpu_model")
    if native_bf16(card):
        return model_type_blocks(grid)
    no_bf16 = (
        f"The {model_of(card)} has no native bf16: `precision: auto` trains in fp32 there, as the trainer "
        "resolves it, and is priced so (padding-free where the backbone has a padding-free forward)."
    )
    return [Paragraph(no_bf16), *model_type_blocks(grid)]


def write_plan_csv(path: str | os.PathLike, jobs: Sequence[PlannedJob]) -> Path:
    """One row per job: rule, paper, experiment, cell, projected hours per choice, peak memory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    choices = _choices(jobs)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["rule", "paper", "experiment", "cell", *[f"hours_{c}" for c in choices], "peak_gpu_gib"]
        )
        for j in jobs:
            hours = [f"{j.seconds[c] / 3600:.4f}" for c in choices]
            writer.writerow([j.rule, j.paper, j.experiment, j.cell, *hours, f"{j.peak_gib:.2f}"])
    return path


def projected_hours(jobs: Sequence[PlannedJob], choice: str = AS_CONFIGURED) -> dict[str, dict[str, float]]:
    """Projected GPU-hours per ``paper``, ``rule`` and ``cell`` under one choice (the report's tables)."""
    out: dict[str, dict[str, float]] = {"paper": {}, "rule": {}, "cell": {}}
    for job in jobs:
        hours = job.seconds[choice] / 3600
        for key, value in (("paper", job.paper), ("rule", job.rule), ("cell", job.cell)):
            out[key][value] = out[key].get(value, 0.0) + hours
    return out


def total_hours(jobs: Sequence[PlannedJob], choice: str = AS_CONFIGURED) -> float:
    return sum(j.seconds[choice] for j in jobs) / 3600


def plan_report(
    config: Mapping[str, Any],
    chosen: str = AS_CONFIGURED,
    calibration_path: str | os.PathLike | None = None,
    out_dir: str | os.PathLike | None = None,
    *,
    title: str = "",
    echo: bool = True,
    gpus: Sequence[int] = DEFAULT_GPU_COUNTS,
    cpus_per_gpu: int = DEFAULT_CPUS_PER_GPU,
    sections: Sequence[Callable[[cl_config.Grid, Sequence[PlannedJob]], list]] = (),
    gpu_model: str | None = None,
) -> list[Path]:
    """Plan a validated config (``make plan``): print it (``echo``) and write ``plan.md`` and
    ``plan.csv`` to ``out_dir`` (default ``<results_dir>/plan``); returns the files written. Priced for
    ``gpu_model`` (default: ``resources.gpu_model``); the makespan over each of ``gpus`` GPUs.
    ``sections``: more sections put last (functions of the grid and the jobs returning blocks), e.g. the
    claims' power."""
    if chosen != AS_CONFIGURED and chosen not in RESOLVED:
        raise ValueError(
            f"precision choice must be {AS_CONFIGURED} or one of {', '.join(RESOLVED)}, got {chosen!r}"
        )
    # priced for the card the jobs will get, as their wall-time requests are
    gpu_model = gpu_model or config["resources"].get("gpu_model")
    calibration = calibration_for(gpu_model, calibration_path)
    card = model_of(gpu_model) if gpu_model else model_of(calibration.device)
    if card:  # the grid names the priced card: cost.flops resolves precision and step mode on it
        config = {**config, "resources": {**config["resources"], "gpu_model": card}}
    grid = cl_config.Grid(config)
    jobs = make_plan(grid, calibration, chosen, plan_points(grid, calibration))
    works = {job.cell: job.works[AS_CONFIGURED] for job in jobs if job.works}
    probe_s = probe_seconds(grid, calibration)
    searches_in_all = grid.options.searches_in_all
    every_search = [] if searches_in_all else searched_points(grid, calibration, pins=pinned(grid))
    searches = search_jobs(grid, calibration, chosen, every_search)  # once, for the disk and the searches
    blocks = [
        Heading(2, f"Projected cost{f' of {title}' if title else ''}"),
        # before the totals: what of the calibration is assumed, and any rule it moves far
        Bullets(status_items(calibration) + moved_rules(works, calibration)),
        *summary_blocks(jobs, works, calibration, card, probe_s, cpus_per_gpu, chosen),
        *plan_blocks(grid, jobs, calibration, chosen),
        *disk_blocks(grid, jobs, searches),
        *schedule_blocks(jobs, probe_s, chosen, gpus, cpus_per_gpu),
    ]
    if not searches_in_all:
        blocks += search_plan_blocks(every_search, searches, calibration, chosen)
    for section in sections:
        blocks += section(grid, jobs)
    text = to_markdown(blocks, literals_of(grid.config))  # the config's names are text, as in the report
    if echo:
        print(text)
    out = Path(out_dir or grid.results.plan)
    return [write_text(out / "plan.md", text + "\n"), write_plan_csv(out / "plan.csv", jobs)]


#: A GPU job's wall-time request (SLURM's ``-t``) when the config sets none: its projection × this
#: margin (a projection is ±40%, and the cluster's GPU may be slower than the calibration's), at least
#: :data:`MINIMUM_RUNTIME_MIN`, and × the attempt (a retry after a timeout asks for more).
RUNTIME_MARGIN = 2.0

MINIMUM_RUNTIME_MIN = 30

#: The request of the jobs the plan does not project (figures, CPU runs with ``resources.gpu: 0``).
FALLBACK_RUNTIME_MIN = {"train": 240, "vision_train": 480, "eval": 60}


def runtime_resource(grid: cl_config.Grid, kind: str, rule: str | None, where: Any, calibration: Any) -> Any:
    """A rule's ``runtime`` resource (minutes): ``resources.<kind>_runtime_min`` when set; for a job the
    plan projects (not with ``resources.gpu: 0``), a function of its wildcards and attempt giving
    :func:`job_runtime_minutes` (``where``: its cell or backbone); else :data:`FALLBACK_RUNTIME_MIN`."""
    configured = grid.compute.get(f"{kind}_runtime_min")
    if configured is not None:
        return configured
    if rule is None or not grid.compute.get("gpu"):
        return FALLBACK_RUNTIME_MIN[kind]

    def planned(wildcards: Any, attempt: int) -> int:
        return job_runtime_minutes(grid, rule, calibration(), attempt=attempt, **where(wildcards))

    return planned


def job_runtime_minutes(
    grid: cl_config.Grid,
    rule: str,
    calibration: Calibration,
    *,
    cell: cl_config.Cell | None = None,
    backbone: str | None = None,
    attempt: int = 1,
    point: cl_search.SearchPoint | None = None,
) -> int:
    """Minutes to request for one job of ``rule`` (of ``cell``, or ``backbone`` for a Pretrained row): its
    projected seconds × :data:`RUNTIME_MARGIN` × ``attempt``, at least :data:`MINIMUM_RUNTIME_MIN`."""
    if rule == "encode_pretrained":
        seconds = eval_seconds(_pretrained_work(grid, backbone), calibration)
    elif rule in ("evaluate", "evaluate_pretrained"):
        seconds = probe_seconds(grid, calibration)
    elif rule in ("train", "train_vision"):
        seconds = train_seconds(cell_work(grid, cell, point=point), calibration)
    elif rule in ("encode", "encode_vision"):
        seconds = eval_seconds(cell_work(grid, cell), calibration)
    elif rule == "evaluate_vision":
        seconds = vision_probe_seconds(cell_work(grid, cell), calibration)
    else:
        raise ValueError(f"no projection for rule {rule!r}")
    return max(MINIMUM_RUNTIME_MIN, math.ceil(seconds * RUNTIME_MARGIN * attempt / 60))


def search_jobs(
    grid: cl_config.Grid,
    calibration: Calibration,
    chosen: str,
    points: Sequence[cl_search.SearchPoint],
    priced: Priced | None = None,
) -> list[PlannedJob]:
    """The GPU jobs of the searches' priced ``points`` (:func:`~contrastlab.cost.budget.searched_points`):
    each point's training (not those shared with a configured cell) and each winner's ``search_encode``,
    experiment ``<experiment> (search)``."""
    if not points:
        return []
    choices = list(dict.fromkeys([AS_CONFIGURED, *SIDE_BY_SIDE, chosen]))
    share = gpu_share(grid)
    priced = priced or Priced(grid)
    jobs = []
    for point in points:
        if point.shared_with is not None:
            continue
        works = priced.works(point.cell, choices, point)
        where = {"paper": paper_of(point.experiment), "experiment": f"{point.experiment} (search)"}
        jobs.append(_training_job(share, calibration, works, chosen, cell=point.cell.path, **where))
    firsts: dict[tuple[str, str, str], cl_search.SearchPoint] = {}  # each search's first stage-1 point
    for point in points:
        if point.stage == 1:
            firsts.setdefault((point.experiment, point.backbone, point.method), point)
    for first in firsts.values():  # the winner's encoding on the GPU (its probes: a CPU job)
        seconds = eval_seconds(priced.works(first.cell, [AS_CONFIGURED], first)[AS_CONFIGURED], calibration)
        where = {"paper": paper_of(first.experiment), "experiment": f"{first.experiment} (search)"}
        jobs.append(_encoding_job("search_encode", choices, seconds, cell=first.winner_cell.path, **where))
    return jobs


#: Bytes per parameter of a kept checkpoint (fp32 weights: the sentence model's safetensors, the
#: vision encoder's state dict) and of a training cell's snapshot at its largest (weights, Adam's two
#: moments, the best checkpoint so far).
CHECKPOINT_BYTES_PER_PARAM = 4
SNAPSHOT_BYTES_PER_PARAM = 16


def _weights_gb(grid: cl_config.Grid, cell: str, per_param: int) -> float:
    backbone = cell.split("/")[1]
    millions = float(grid.backbone(backbone).get("params_millions", 110))
    return millions * 1e6 * per_param / 1e9


def _gb(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def disk_blocks(
    grid: cl_config.Grid, jobs: Sequence[PlannedJob], searches: Sequence[PlannedJob]
) -> list[Paragraph]:
    """The disk a run needs: the checkpoints it keeps (fp32 weights, from ``params_millions``), the largest
    snapshot a running cell writes, and the searches' checkpoints (one per point)."""
    trained = [j for j in jobs if j.rule.startswith("train")]
    kept = sum(_weights_gb(grid, j.cell, CHECKPOINT_BYTES_PER_PARAM) for j in trained)
    snapshot = max((_weights_gb(grid, j.cell, SNAPSHOT_BYTES_PER_PARAM) for j in trained), default=0.0)
    points = [j for j in searches if j.rule.startswith("train")]
    searched = sum(_weights_gb(grid, j.cell, CHECKPOINT_BYTES_PER_PARAM) for j in points)
    line = (
        f"Disk: {_gb(kept)} GB of kept checkpoints ({len(trained)} cells, fp32 weights), plus up to "
        f"{_gb(snapshot)} GB per training cell while it runs (its snapshot: weights, Adam moments, the best "
        "checkpoint); the backbones, data and tables are a few GB more."
    )
    if points:
        line += (
            f" The searches (`make search`) keep {_gb(searched)} GB more ({len(points)} points, each its own "
            "checkpoint)."
        )
    return [Paragraph(line)]


def search_plan_blocks(
    points: Sequence[cl_search.SearchPoint], jobs: Sequence[PlannedJob], calibration: Calibration, chosen: str
) -> list:
    """The searches' cost when they do not run with the default target (``searches.in_all: false``): one
    row per search experiment of ``jobs`` (:func:`search_jobs` of ``points``), with totals ([] without
    searches)."""
    if not jobs:
        return []
    shared = sum(1 for p in points if p.shared_with is not None)
    about = (
        f"{len(points)} search points ({shared} of them configured cells, trained once), "
        f"{sum(1 for j in jobs if j.rule == 'search_encode')} winners evaluated on the test sets. A later "
        "stage's points are priced at the configured settings with their grid values (their winner is not "
        "known before the search runs)."
    )
    return [
        Heading(3, "Hyperparameter searches (`make search`; not in the default target)"),
        Paragraph(about),
        rows_table(_rows(jobs, lambda j: j.experiment, "search"), right=1),
        Paragraph(f"Peak GPU memory of the search points ({_label(chosen)}):"),
        rows_table(memory_rows(jobs, calibration), right=1),
    ]
