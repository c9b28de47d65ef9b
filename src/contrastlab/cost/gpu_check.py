"""``make gpu-check`` (config/gpu-check.yaml): :func:`run` trains the preset's cells through Snakemake,
runs the checks and the packing measurement, and after each of these three parts writes the report and
calibration (:mod:`contrastlab.cost.gpu_report`), so that a check cut short leaves every finished part.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from contrastlab import config as cl_config
from contrastlab import cuda
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost.flops import AS_CONFIGURED, DATASET_IMAGES, cell_work
from contrastlab.cost.gpu_report import PARTS, cell_row, dev_work_seconds, write_report
from contrastlab.cost.measured import read_job_costs
from contrastlab.cost.packing import SHARES
from contrastlab.cost.packing_measure import (
    STEP_COPY_MODULES,
    mps_daemon,
    pooled_rows,
    sentence_step,
    vision_step,
)
from contrastlab.cost.plan import make_plan
from contrastlab.data.acquire import data_marker_path
from contrastlab.data.fixtures import write_demo_corpus
from contrastlab.evaluation.senteval import evaluate_checkpoint
from contrastlab.models import load_backbone, make_encoder
from contrastlab.paths import REPO_ROOT, read_json, write_text
from contrastlab.senteval.tasks import load_sts_pairs
from contrastlab.training.snapshots import MARKER, MARKER_VARIABLE

STS_TASKS = ("STS12", "STSBenchmark", "SICKRelatedness")
#: Largest ‖e_gpu − e_cpu‖ / ‖e_cpu‖ of one checkpoint's sentence embeddings, both IEEE fp32: fp32
#: rounding stays near 1e-6, TF32 leaking into evaluation gives about 1e-3. Scores are not compared:
#: on the 8-pair STS fixtures one swapped rank moves Spearman by points.
EMBEDDING_TOLERANCE = 1e-4
#: The cells evaluated end to end, by method: one sentence and one image cell exercise the evaluation
#: rules; the others are trained only (an encoding job is start-up for no figure the plan reads).
EVALUATED = ("fp32", "macl")
#: An environment variable naming a part of :data:`~contrastlab.cost.gpu_report.PARTS`: after writing
#: that part's files the check waits (up to :data:`WAIT_S`) instead of going on, so that a test can kill
#: it there and read what a check cut short leaves.
WAIT_AFTER = "CONTRASTLAB_GPU_CHECK_WAIT_AFTER"
WAIT_S = 600


def encoding_difference(model_dir: str | Path, sentences: list[str], device: str) -> float:
    """Largest relative L2 difference between the embeddings of ``sentences`` by the checkpoint at
    ``model_dir`` encoded on ``device`` and on the CPU (the evaluator's encoder, IEEE fp32 on both)."""
    embeddings = {}
    for where in dict.fromkeys([device, "cpu"]):
        model, tokenizer = load_backbone(model_dir, device=where)
        embeddings[where] = make_encoder(model, tokenizer, pooling="cls", progress=False)(sentences)
    gap = np.linalg.norm(embeddings[device] - embeddings["cpu"], axis=1)
    return float((gap / np.maximum(np.linalg.norm(embeddings["cpu"], axis=1), 1e-12)).max())


def environment() -> dict[str, Any]:
    """Device, driver, torch and CUDA versions of this machine."""
    env = {"host": platform.node(), "torch": torch.__version__, "cuda": torch.version.cuda}
    env["date"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    if torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name(0)
        env["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
        env["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
        try:
            env["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            env["driver"] = "unknown (no nvidia-smi)"
    else:
        env["device"] = "cpu (toy size: no GPU figures)"
    return env


#: The steps each packed copy (:func:`measure_packing`) times per count, and the untimed ones before
#: (capture, kernel choice, optimiser state).
PACKING_PRECISIONS = ("fp32", "bf16")
PACKING_STEPS = 30
PACKING_WARMUP = 10
#: Seconds without a result after which a packing round gives up (a copy that hangs: e.g. an MPS client
#: whose server cannot start); the round is then a row saying so, and the check goes on.
PACKING_TIMEOUT_S = 120
#: The batches the MACL image step is packed at: the smallest and the largest of MACL's image cells.
#: The plan packs an image cell only at a batch measured here; those between are priced as if alone.
VISION_PACKING_BATCHES = (64, 1024)


def packing_series(
    grid: cl_config.Grid,
    device: str,
    *,
    warmup: int,
    state_dir: Path,
    vision_batches: Sequence[int] | None = VISION_PACKING_BATCHES,
) -> dict[str, Any]:
    """The steps :func:`measure_packing` packs: per name its track, configured precision, the factory of
    one copy (the cell's own settings: its mode) and its batch; MACL's at each of ``vision_batches``
    (None: its own). OAR's 224-px fp32 step fills the GPU alone: left out."""
    series = {}
    for cell in grid.cells:
        s = grid.settings_copy(cell)
        folder = str(Path(state_dir, cell.method))
        common = {"device": device, "warmup": warmup, "state_dir": folder}
        if _is_vision(grid, cell):
            if not s.get("oar_fraction"):
                n_images = DATASET_IMAGES[s["dataset"]][0]
                n_train = n_images - int(float(s.get("val_fraction") or 0) * n_images)
                for batch in vision_batches or (s["batch_size"],):
                    at = {**s, "batch_size": batch}
                    build = functools.partial(vision_step, settings=at, n_images=n_train, **common)
                    name = f"vision {cell.method} batch {batch}"
                    series[name] = ("vision", s.get("precision") or "auto", build, batch)
        elif s.get("precision") in PACKING_PRECISIONS:
            model = grid.backbone(cell.backbone)["random"]
            size = {"batch": s["batch_size"], "length": s["max_length"], "precision": s["precision"]}
            build = functools.partial(sentence_step, model_config=model, settings=s, **size, **common)
            series[f"sentence {s['precision']}"] = ("sentence", s["precision"], build, s["batch_size"])
    return series


def measure_packing(
    series: Mapping[str, tuple[str, str, Callable]],
    *,
    steps: int,
    timeout: float = 600,
    forkserver_preload: Sequence[str] | None = None,
    pool: Callable[..., Mapping[str, list]] = pooled_rows,
    done: Callable[[list[dict[str, Any]]], Any] | None = None,
) -> list[dict[str, Any]]:
    """Every step of ``series`` timed by ``pool`` (1, 2 and 4 copies at once), without and then under a
    private MPS daemon: per step and round its ``step``, ``track``, ``precision``, ``batch``, ``mps`` and
    ``rows``, or the ``error`` that kept it from being measured. ``done(series so far)`` after each round."""
    out: list[dict[str, Any]] = []
    builds = {name: build for name, (_, _, build, _) in series.items()}
    for mps in (False, True):
        with mps_daemon() if mps else contextlib.nullcontext({}) as env:
            if env is None:
                error = "nvidia-cuda-mps-control is not on PATH here, or its daemon did not start"
                measured: Mapping[str, Any] | str = error
            else:
                options = {"steps": steps, "timeout": timeout, "env": env}
                try:
                    measured = pool(builds, SHARES, forkserver_preload=forkserver_preload, **options)
                except RuntimeError as err:
                    measured = str(err)
        for name, (track, precision, _, batch) in series.items():
            row = {"step": name, "track": track, "precision": precision, "batch": batch, "mps": mps}
            out.append(row | ({"error": measured} if isinstance(measured, str) else {"rows": measured[name]}))
        if done is not None:
            done(list(out))
    return out


# --------------------------------------------------------------------------------------------- the run

PRESET = REPO_ROOT / "config" / "gpu-check.yaml"
DEMO = REPO_ROOT / "config" / "demo.yaml"
KILLED_METHOD = "fp16"  # the cell killed after its first snapshot and resumed
#: The preset's training corpus (``data.wiki_path``, written in its results folder) has six of the
#: fixture's sentences a line, 40 tokens or more, so that every batch fills the plan's 64 x 32 rows and the
#: padding-free fp32 cell measures the rate ``sentence.fp32`` means: a step of those rows. On the fixture's
#: own lines (12.5 tokens of 32) the H200 of 2026-11-28 ran that cell at 24.8 TFLOP/s against the 37.2 of
#: full rows, and its calibration priced config.yaml's fp32 training 30% too slow (179.0 -> 198.5 GPU-h).
SENTENCES_PER_LINE = 6
#: --toy: the same cells at a toy size on the CPU. Its tiny BERT is config/demo.yaml's, read from there:
#: the presets share ``resources/`` (the tests one resources folder), where a second spec under the same
#: name would rebuild the model and retrain what was trained on it.
TOY = {
    "backbones": {
        "tiny-bert": yaml.safe_load(DEMO.read_text())["backbones"]["tiny-bert"],
        "resnet18-cifar": {"vision": {"arch": "resnet18", "stem": "cifar", "width": 8}},
        "resnet18-oar": {"vision": {"arch": "resnet18", "stem": "imagenet", "width": 8}},
    },
    "data": {"fixture_corpus_sentences": 600},
    "training": {"max_steps": 12, "eval_every": 4, "log_every": 4, "state_every": 4, "batch_size": 16},
    "resources": {"gpu": 0, "threads": 1},
    "experiments": {
        # the fp16 cell's two snapshots at the toy's size (the preset's 50 would leave it none)
        "gpu_check": {"backbones": ["tiny-bert"], "methods": {"fp16": {"training": {"state_every": 4}}}},
        "gpu_check_macl": {"training": {"batch_size": 32, "max_steps": 4, "log_every": 2, "state_every": 2}},
        "gpu_check_oar": {
            "training": {"input_size": 32, "batch_size": 32, "max_steps": 4, "log_every": 2, "state_every": 2}
        },
    },
}


def run(args: argparse.Namespace) -> Path:
    """``make gpu-check`` (``args``: ``scripts/gpu_check.py``'s): parts ``cells`` (the fp16 cell killed
    after its first snapshot and resumed), ``checks`` and ``packing``, each followed by ``report.md`` and
    ``calibration.json``; returns the report's path. Without a usable GPU (nor ``--toy``): one line."""
    if not args.toy:  # one line where torch cannot use this node's GPU (contrastlab.cuda) or sees none
        if problem := cuda.diagnose(cuda.probe()):
            raise SystemExit(f"contrastlab: make gpu-check: {problem}")
        if line := cuda.no_gpu_line("make gpu-check"):
            raise SystemExit(line)
    config, configfile = _preset(args)
    grid = cl_config.Grid(config)
    results = Path(grid.results.root)
    senteval_dir = grid.data.locations()["senteval_dir"]
    killed = _run_cells(grid, configfile, args.cores, args.workdir)
    device = "cuda" if torch.cuda.is_available() and not args.toy else "cpu"
    env = environment()
    shipped = cl_calibration.shipped_calibration(str(env.get("device")))
    pairs = load_sts_pairs(senteval_dir, "STSBenchmark", "dev")
    dev_sentences = len(set(pairs.a) | set(pairs.b))  # the unique sentences one dev evaluation encodes
    rows, jobs, evaluations = _measured(grid, results, shipped, dev_sentences)
    write = functools.partial(
        write_report,
        results,
        rows,
        env,
        dev_sentences=dev_sentences,
        evaluations=evaluations,
        jobs=jobs,
        price=lambda path: planned_seconds(grid, cl_calibration.load_calibration(path)),
    )
    write({}, missing=PARTS[1:])
    _wait_after("cells")
    checks = _checks(grid, rows, killed, senteval_dir, device)
    report = write(checks, missing=PARTS[2:])
    _wait_after("checks")
    print("== 1, 2 and 4 cells at once on one device", flush=True)
    series = packing_series(
        grid,
        device,
        warmup=1 if args.toy else PACKING_WARMUP,
        state_dir=Path(grid.results.state("packing")),
        vision_batches=None if args.toy else VISION_PACKING_BATCHES,  # the toy's own: batch 1024 on 2 cores
    )
    packing = measure_packing(
        series,
        steps=2 if args.toy else PACKING_STEPS,
        timeout=5 * PACKING_TIMEOUT_S if args.toy else PACKING_TIMEOUT_S,  # the toy shares 2 cores
        # --toy: the copies fork from one process that imported torch (a spawned copy's imports cost
        # more than the toy's steps); the GPU run spawns them, as Snakemake starts its jobs.
        forkserver_preload=STEP_COPY_MODULES if args.toy else None,
        done=lambda so_far: write(checks, packing=so_far, missing=PARTS[2:]),
    )
    report = write(checks, packing=packing)
    _wait_after("packing")
    return report


def _wait_after(part: str) -> None:
    """Wait after ``part`` when :data:`WAIT_AFTER` names it (a test kills the check there)."""
    if os.environ.get(WAIT_AFTER) == part:
        print(f"== {part} written; waiting ({WAIT_AFTER}={part})", flush=True)
        time.sleep(WAIT_S)


def _checks(grid: cl_config.Grid, rows, killed: bool, senteval_dir: str, device: str) -> dict[str, Any]:
    """The check part: kill and resume, the evaluation split, GPU against CPU."""
    killed_row = next(r for r in rows if r["cell"] == f"sentence {KILLED_METHOD}")
    resumed = killed_row["resumed_from"]
    when = "this run" if killed else "an earlier run of the check, on this results folder"
    return {
        "kill and resume": (
            bool(resumed),
            f"the {KILLED_METHOD} cell was killed after its first snapshot ({when}) and resumed from step "
            f"{', '.join(map(str, resumed))}"
            if resumed
            else f"the {KILLED_METHOD} cell never resumed (it finished before it could be killed)",
        ),
        "evaluation split": _encoded_on(grid, device),
        "GPU vs CPU evaluation": _gpu_vs_cpu(grid, senteval_dir, device),
    }


def planned_seconds(
    grid: cl_config.Grid, calibration: cl_calibration.Calibration
) -> dict[tuple[str, str], float]:
    """The plan's seconds as configured of each job of ``grid`` under ``calibration``, by (rule, cell):
    training, encoding, and the CPU probe jobs."""
    out: dict[tuple[str, str], float] = {}
    probe = cl_calibration.probe_seconds(grid, calibration)
    for job in make_plan(grid, calibration):
        out[job.rule, job.cell] = job.seconds[AS_CONFIGURED]
        if job.rule == "encode":
            out["evaluate", job.cell] = probe
        elif job.rule == "encode_vision":
            out["evaluate_vision", job.cell] = job.cpu_after_s
    return out


def _measured(grid: cl_config.Grid, results: Path, shipped: cl_calibration.Calibration, dev_sentences: int):
    """From the summaries and benchmark files in ``results``: the cells' rows
    (:func:`~contrastlab.cost.gpu_report.cell_row`), the jobs' rows of the actual-against-plan table (priced
    with ``shipped``) and the encoding jobs' wall and encoding seconds."""
    costs = read_job_costs(results, skipped=[])
    walls = {(j.rule, j.cell): j.seconds for j in costs}
    works = {cell.path: cell_work(grid, cell) for cell in grid.cells}
    rows, trained = [], {}
    for cell in grid.cells:
        vision, work = _is_vision(grid, cell), works[cell.path]
        rule = "train_vision" if vision else "train"
        name = "settings.json" if vision else "train_summary.json"
        summary = json.loads((_trained_path(grid, cell) / name).read_text())
        kind = f"vision {cell.experiment.removeprefix('gpu_check_')}" if vision else f"sentence {cell.method}"
        # the calibration's rate class: OAR's 224-px cell measures vision_large, MACL's 32-px one vision
        row = cell_row(
            summary,
            work.step_flops,
            kind,
            work.rate_class,
            snapshots=work.snapshots,
            snapshot_gib=work.snapshot_gib,
            wall_s=walls.get((rule, cell.path)),
            dev_work_s=dev_work_seconds(work, shipped, dev_sentences),
        )
        rows.append(row)
        trained[rule, cell.path] = row
    planned = planned_seconds(grid, shipped)
    jobs, evaluations = [], []
    cells = {cell.path: cell for cell in grid.cells}
    for j in costs:
        place = (j.rule, j.cell)
        encoding = j.rule in ("encode", "encode_vision") and j.cell in cells
        if encoding:  # its start and phases as its cell's metrics keep them (``encoding``)
            record = read_json(_metrics_path(grid, cells[j.cell])).get("encoding") or {}
            row = {"start": record.get("start"), "phases": record.get("phases")}
        else:
            row = trained.get(place) or {}
        jobs.append(
            {"rule": j.rule, "cell": j.cell, "wall_s": j.seconds, "planned": {"shipped": planned.get(place)}}
            | {key: row.get(key) for key in ("start", "phases", "startup_s")}
        )
        if encoding:
            # The job's own encoding seconds where its metrics keep them: the preset encodes a fixture of
            # a few hundred sentences, and the full benchmark's FLOPs that the plan prices took longer than
            # the whole job on the H200 (a start-up below 0, written as 0 s).
            work_s = (row.get("phases") or {}).get("encode_s")
            if work_s is None:
                work = works[j.cell]
                work_s = shipped.seconds(
                    work.eval_flops, work.rate_class, cl_calibration.EVALUATION_PRECISION
                )
            evaluations.append({"rule": j.rule, "cell": j.cell, "wall_s": j.seconds, "work_s": work_s})
    return rows, jobs, evaluations


def _preset(args: argparse.Namespace) -> tuple[dict, Path]:
    """The validated preset (toy-sized with ``--toy``, in ``args``' folders) and the config file
    Snakemake reads it from, written in its results folder."""
    raw = yaml.safe_load(PRESET.read_text())
    if args.toy:
        raw = cl_config.deep_merge(raw, TOY)
    for key in ("results_dir", "resources_dir"):
        if getattr(args, key):
            raw[key] = getattr(args, key)
    corpus = Path(raw["results_dir"]).resolve() / "corpus.txt"
    lines = raw["data"]["fixture_corpus_sentences"]
    raw["data"]["wiki_path"] = str(write_demo_corpus(corpus, lines, per_line=SENTENCES_PER_LINE))
    config = cl_config.validate(raw)
    configfile = Path(config["results_dir"]) / "gpu-check.config.yaml"
    write_text(configfile, yaml.safe_dump(raw, sort_keys=False))
    return config, configfile


def _run_cells(grid: cl_config.Grid, configfile: Path, cores: int, workdir: str) -> bool:
    """Every cell trained and the :data:`EVALUATED` ones evaluated, through Snakemake; first (unless done
    before) the image cells and the :data:`KILLED_METHOD` cell, SIGKILLed once that cell wrote its first
    snapshot; True if it was killed."""
    results = grid.results.root
    killed_cell = next(c for c in grid.cells if c.method == KILLED_METHOD)
    marker = Path(grid.results.state("train", killed_cell), MARKER)
    killed = False
    if not _trained_path(grid, killed_cell).exists():
        print(f"== {killed_cell.path}: started, to be killed after its first snapshot", flush=True)
        vision = [_trained_path(grid, c) for c in grid.cells if _is_vision(grid, c)]
        first = [_trained_path(grid, killed_cell), *vision]
        datasets = dict.fromkeys(grid.experiment(c.experiment).dataset for c in grid.cells)
        image_markers = [Path(data_marker_path(results, f"images-{d}")) for d in datasets if d]
        command = _snakemake(configfile, [*first, *image_markers], cores)
        killed = _kill_after_first_snapshot(command, marker, timeout_s=1800, cwd=workdir)
    print("== every cell (the killed one resumes)", flush=True)
    evaluated = [_metrics_path(grid, cell) for cell in grid.cells if cell.method in EVALUATED]
    targets = [*(_trained_path(grid, cell) for cell in grid.cells), *evaluated]
    # The evaluated cells first: their CPU probe jobs then run beside the other cells' training.
    command = [*_snakemake(configfile, targets, cores), "--prioritize", *map(str, evaluated)]
    done = subprocess.run(command, cwd=workdir)
    if done.returncode:
        raise SystemExit(
            f"contrastlab: the gpu-check workflow failed (exit {done.returncode}); logs under {results}/logs"
        )
    return killed


def _metrics_path(grid: cl_config.Grid, cell) -> Path:
    return Path(grid.results.metrics(cell, grid.experiment(cell.experiment).track))


def _snakemake(configfile: Path, targets: list[Path], cores: int) -> list[str]:
    return [
        *(sys.executable, "-m", "snakemake", *map(str, targets), "-s", str(REPO_ROOT / "Snakefile")),
        *("--workflow-profile", str(REPO_ROOT / "profiles" / "local")),
        *("--configfile", str(configfile), "--cores", str(cores), "--quiet", "rules"),
    ]


def _kill_after_first_snapshot(command: list[str], marker: Path, timeout_s: float, cwd: str) -> bool:
    """Run ``command`` in ``cwd`` and SIGKILL it (and its jobs) once ``marker`` says a snapshot is on disk
    while another was just submitted, so the kill cannot land after the cell's end; True if killed."""
    env = {**os.environ, MARKER_VARIABLE: "1"}
    proc = subprocess.Popen(command, cwd=cwd, start_new_session=True, env=env)
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and not _snapshot_on_disk(marker) and time.monotonic() < deadline:
        time.sleep(0.05)  # --toy: a dozen steps of tiny BERT take a fraction of a second
    if proc.poll() is not None:
        return False
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return True


def _snapshot_on_disk(marker: Path) -> bool:
    """Whether the trainer's snapshot marker (:func:`~contrastlab.training.snapshots.note_submitted`)
    says a snapshot was submitted with an earlier one complete on disk."""
    try:
        return json.loads(marker.read_text())["on_disk"] >= 1
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _is_vision(grid: cl_config.Grid, cell) -> bool:
    return grid.experiment(cell.experiment).track == "vision"


def _trained_path(grid: cl_config.Grid, cell) -> Path:
    """The folder a cell's training job writes: its sentence checkpoint or its image encoder."""
    return Path(grid.results.checkpoint(cell, "encoder" if _is_vision(grid, cell) else "model"))


def _encoded_on(grid: cl_config.Grid, device: str) -> tuple[bool, str]:
    """Every evaluated sentence cell's encoding job ran on ``device`` (its metrics' ``encoding``): rule
    encode got the GPU, while its probe job, rule evaluate, asked for none."""
    found = {
        c.method: (json.loads(_metrics_path(grid, c).read_text()).get("encoding") or {}).get("device")
        for c in grid.cells
        if not _is_vision(grid, c) and c.method in EVALUATED
    }
    wrong = {method: where for method, where in found.items() if where != device}
    return (
        not wrong,
        f"{len(found) - len(wrong)} of {len(found)} SentEval encoding jobs on {device}, their probe jobs on "
        "the CPU" + (f"; elsewhere: {wrong}" if wrong else ""),
    )


def _gpu_vs_cpu(grid: cl_config.Grid, senteval: str, device: str) -> tuple[bool, str]:
    """The fp32 cell's checkpoint encodes STS-B test on ``device`` as on the CPU (relative
    :data:`EMBEDDING_TOLERANCE`); the STS scores of both are reported, not compared."""
    cell = next(c for c in grid.cells if c.method == "fp32")
    model = Path(grid.results.checkpoint(cell, "model"))
    pairs = load_sts_pairs(senteval, "STSBenchmark", "test")
    worst = encoding_difference(model, pairs.a + pairs.b, device)
    scores = {
        where: evaluate_checkpoint(model, senteval, STS_TASKS, "fasttest", device=where)["scores"]
        for where in dict.fromkeys([device, "cpu"])
    }
    gaps = ", ".join(f"{t} {scores[device][t] - scores['cpu'][t]:+.2f}" for t in STS_TASKS)
    return (
        worst <= EMBEDDING_TOLERANCE,
        f"{device} vs cpu: largest relative embedding difference {worst:.1e} (tolerance "
        f"{EMBEDDING_TOLERANCE:.0e}); STS score differences {gaps}",
    )
