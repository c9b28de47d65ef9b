"""``make gpu-check`` (config/gpu-check.yaml) and its figures: :func:`run` trains the preset's cells
through Snakemake (one killed and resumed), then measures per cell steps/s, achieved TFLOP/s, MFU and
peak memory, runs the resume, evaluation-split and GPU-vs-CPU evaluation checks and the packing
measurement, and writes the report and the calibration file ``make plan`` reads.

FLOPs per training step are the plan's (:func:`contrastlab.cost.flops.cell_work`), so that the
calibration written here is in the units ``make plan`` divides by. MFU = achieved FLOP/s ÷ the
device's dense peak for the cell's precision (:data:`contrastlab.cost.calibration.GPU_PEAKS`, vendors'
data sheets; fp32 cells against the non-tensor-core fp32 peak).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from contrastlab import config as cl_config
from contrastlab import cuda
from contrastlab.config.data import data_locations
from contrastlab.cost.calibration import Measurement, calibration_from_measurements, peak_tflops
from contrastlab.cost.flops import STSB_DEV_SENTENCES, cell_work
from contrastlab.cost.packing import SHARES, STEP_COPY_MODULES, packing_rows, sentence_step_copy
from contrastlab.data.acquire import data_marker_path
from contrastlab.evaluation.senteval import evaluate_checkpoint
from contrastlab.models import load_backbone, make_encoder
from contrastlab.paths import REPO_ROOT, Results
from contrastlab.senteval.tasks import load_sts_pairs

STS_TASKS = ("STS12", "STSBenchmark", "SICKRelatedness")
#: Largest ‖e_gpu − e_cpu‖ / ‖e_cpu‖ of one checkpoint's sentence embeddings, both IEEE fp32. Twelve
#: layers of fp32 rounding stay near 1e-6; TF32 (10-bit products) leaking into evaluation gives about
#: 1e-3, half precision more. Scores are not compared to a tolerance: on the 8-pair STS fixtures one
#: swapped rank moves Spearman by up to 2.4 points, and a relative 1e-6 noise on the CPU's own
#: embeddings already moves the fixture's STS12 by about 1 point.
EMBEDDING_TOLERANCE = 1e-4


def encoding_difference(
    model_dir: str | Path, sentences: list[str], device: str, *, pooling: str = "cls"
) -> float:
    """Largest relative L2 difference between the embeddings of ``sentences`` by the checkpoint at
    ``model_dir`` encoded on ``device`` and on the CPU (the evaluator's encoder, IEEE fp32 on both)."""
    embeddings = {}
    for where in dict.fromkeys([device, "cpu"]):
        model, tokenizer = load_backbone(model_dir, device=where)
        embeddings[where] = make_encoder(model, tokenizer, pooling=pooling, progress=False)(sentences)
    gap = np.linalg.norm(embeddings[device] - embeddings["cpu"], axis=1)
    return float((gap / np.maximum(np.linalg.norm(embeddings["cpu"], axis=1), 1e-12)).max())


def cell_row(summary: Mapping[str, Any], step_flops: float, kind: str, track: str) -> dict[str, Any]:
    """One row of the report from a cell's training summary and its FLOPs per step."""
    timings = summary["timings"]
    if timings.get("steady_train_s"):  # without each process's first log interval (warm-up)
        steps_per_s = timings["steady_steps"] / timings["steady_train_s"]
    else:
        steps_per_s = summary["steps"] / timings["train_s"] if timings.get("train_s") else None
    max_length = (summary.get("settings") or {}).get("max_length")
    if track == "sentence" and timings.get("sentences") and max_length:
        # The plan counts max_length tokens per sentence; dynamic padding runs fewer (the preset's
        # fixture pads to about 21 of 32): count what ran, or the calibration comes out too fast.
        ran = "padded_tokens"
        if (summary.get("settings") or {}).get("padding_free") and timings.get("real_tokens"):
            # A padding-free step's token-wise work runs on the real tokens (attention's two score
            # products, about 3% of a BERT step at 32 tokens, still at the padded width: left out).
            ran = "real_tokens"
        step_flops *= timings[ran] / timings["sentences"] / max_length
    achieved = step_flops * steps_per_s / 1e12 if steps_per_s else None
    peak, source = peak_tflops(summary.get("device_name", ""), summary["precision"])
    return {
        "cell": kind,
        "track": track,
        "step_flops": step_flops,
        "precision": summary["precision"],
        "tf32": bool(summary.get("tf32_matmul")),
        "steps": summary["steps"],
        "steps_per_s": steps_per_s,
        "tflops_per_s": achieved,
        "mfu": achieved / peak if achieved and peak else None,
        "peak_source": source,
        "peak_gpu_memory_gib": summary.get("peak_gpu_memory_gib"),
        "skipped_steps": summary.get("skipped_steps", 0),
        "resumed_from": summary.get("resumed_from", []),
        "startup_s": timings.get("total_s", 0) - timings.get("train_s", 0) - timings.get("eval_s", 0),
        "eval_s": timings.get("eval_s"),
        "evals": len(summary.get("evals", [])) or None,
        "state_s": timings.get("state_s"),
    }


def environment() -> dict[str, Any]:
    """Device, driver, torch and CUDA versions of this machine."""
    env = {
        "host": platform.node(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
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


def sts_dev_sentences(senteval_dir: str | Path) -> int:
    """Unique sentences of the STS-B dev split under ``senteval_dir`` (what one dev evaluation encodes)."""
    pairs = load_sts_pairs(senteval_dir, "STSBenchmark", "dev")
    return len(set(pairs.a) | set(pairs.b))


def calibration(
    rows: Iterable[Mapping[str, Any]],
    env: Mapping[str, Any],
    *,
    dev_sentences: int | None = None,
    packing: Mapping[str, Mapping[int, float]] | None = None,
) -> dict[str, Any]:
    """What ``make plan`` reads (:func:`contrastlab.cost.calibration.calibration_from_measurements`): the
    achieved TFLOP/s per track and precision, start-up and dev-evaluation overheads, GPU memory, and the
    packing speed-ups measured (``packing``: precision -> concurrent cells -> speed-up). A dev
    evaluation timed on ``dev_sentences`` unique sentences (the preset's fixture has a few dozen) is
    scaled to STS-B dev's :data:`~contrastlab.cost.flops.STSB_DEV_SENTENCES`, the set a real cell
    evaluates (an encoding's time grows with its sentences; the fixed part, under a millisecond of
    launches per batch, is scaled with it, which errs long)."""

    rows = [r for r in rows if r["steps_per_s"]]
    measured = [
        Measurement(r["track"], r["precision"], step_flops=r["step_flops"], steps_per_s=r["steps_per_s"])
        for r in rows
    ]
    sentence = [r for r in rows if r["track"] == "sentence"]
    evals = [r["eval_s"] / r["evals"] for r in sentence if r.get("eval_s") and r.get("evals")]
    overheads = {"train_startup": max((r["startup_s"] for r in rows), default=0.0)}
    if evals:
        scale = STSB_DEV_SENTENCES / dev_sentences if dev_sentences else 1.0
        overheads["dev_evaluation"] = sum(evals) / len(evals) * scale
    return calibration_from_measurements(
        measured,
        device=str(env.get("device")),
        source=f"make gpu-check on {env.get('device')} ({env.get('date')})",
        overheads_s=overheads,
        gpu_memory_gib=env.get("gpu_memory_gib"),
        packing_speedup=packing,
    )


def _fmt(value: Any, spec: str) -> str:
    return "—" if value is None else format(value, spec)


#: make gpu-check's packing measurement (:func:`measure_packing`): concurrent copies of the preset's
#: sentence cell, and the precisions timed (the README's benchmark: fp32 gains nothing, bf16 does).
PACKING_COUNTS = SHARES
PACKING_PRECISIONS = ("fp32", "bf16")


def measure_packing(
    model_config: Mapping[str, Any],
    *,
    batch: int,
    length: int,
    device: str,
    precisions: Iterable[str] = PACKING_PRECISIONS,
    steps: int = 100,
    warmup: int = 10,
    state_dir: str | Path,
    forkserver_preload: Sequence[str] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Per precision, :func:`~contrastlab.cost.packing.packing_rows` of 1, 2 and 4 concurrent copies of
    a sentence cell's training step (:func:`~contrastlab.cost.packing.sentence_step_copy`: a random
    encoder of ``model_config``, ``batch`` sentences × ``length`` tokens on ``device``);
    ``forkserver_preload``: see :func:`~contrastlab.cost.packing.concurrent_rates` (``--toy``)."""
    Path(state_dir).mkdir(parents=True, exist_ok=True)
    out = {}
    for precision in precisions:
        copy = functools.partial(
            sentence_step_copy,
            model_config=dict(model_config),
            batch=batch,
            length=length,
            precision=precision,
            device=device,
            steps=steps,
            warmup=warmup,
            state_dir=str(state_dir),
        )
        out[precision] = packing_rows(copy, PACKING_COUNTS, forkserver_preload=forkserver_preload)
    return out


def packing_speedups(packing: Mapping[str, list[Mapping[str, Any]]]) -> dict[str, dict[int, float]]:
    """The calibration's ``packing.speedup`` from :func:`measure_packing`'s rows (counts above 1)."""
    return {p: {r["k"]: r["speedup"] for r in rows if r["k"] > 1} for p, rows in packing.items()}


def write_report(
    out_dir: str | Path,
    rows: list[dict[str, Any]],
    env: Mapping[str, Any],
    checks: Mapping[str, Any],
    *,
    packing: Mapping[str, list[Mapping[str, Any]]] | None = None,
    dev_sentences: int | None = None,
) -> Path:
    """``report.md`` and ``calibration.json`` in ``out_dir``; returns the report's path. ``packing``:
    :func:`measure_packing`'s rows; ``dev_sentences``: the unique STS-B dev sentences the cells'
    dev evaluations encoded (:func:`calibration` scales their time to the real set)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    measured = calibration(
        rows, env, dev_sentences=dev_sentences, packing=packing_speedups(packing) if packing else None
    )
    calibration_file = Path(Results(out_dir).calibration)
    calibration_file.write_text(json.dumps(measured, indent=1) + "\n")
    lines = [
        "# GPU check",
        "",
        *(f"- {key}: {value}" for key, value in env.items()),
        "",
        "| cell | precision | TF32 | steps | steps/s | TFLOP/s | MFU | peak GiB | skipped | resumed from |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['cell']} | {r['precision']} | {'yes' if r['tf32'] else 'no'} | {r['steps']} | "
            f"{_fmt(r['steps_per_s'], '.2f')} | {_fmt(r['tflops_per_s'], '.1f')} | "
            f"{_fmt(r['mfu'] and 100 * r['mfu'], '.1f')}{'%' if r['mfu'] else ''} | "
            f"{_fmt(r['peak_gpu_memory_gib'], '.2f')} | {r['skipped_steps']} | "
            f"{', '.join(map(str, r['resumed_from'])) or '—'} |"
        )
    if packing:
        lines += [
            "",
            "## Several small cells per GPU",
            "",
            "Concurrent copies of the sentence cell's training step, each a process of its own, timed "
            "together; speed-up: their summed steps/s over one copy alone (`resources.gpu_share`; "
            "`make plan` prices packed cells with it).",
            "",
            "| packing | cells at once | steps/s each | steps/s in all | speed-up | peak GiB each |",
            "|---|---|---|---|---|---|",
        ]
        for precision, measured_rows in packing.items():
            for r in measured_rows:
                each = ", ".join(f"{rate:.2f}" for rate in r["steps_per_s"])
                lines.append(
                    f"| packing {precision} | {r['k']} | {each} | {r['sum']:.2f} | {r['speedup']:.2f}x | "
                    f"{_fmt(r['peak_gib'], '.2f')} |"
                )
    lines += ["", "## Checks", ""]
    lines += [f"- {name}: {'PASS' if ok else 'FAIL'} — {what}" for name, (ok, what) in checks.items()]
    scaled = (
        f" The dev-evaluation overhead is the cells' time per evaluation of {dev_sentences} sentences "
        f"scaled to STS-B dev's {STSB_DEV_SENTENCES}."
        if dev_sentences
        else ""
    )
    lines += [
        "",
        "MFU: achieved FLOP/s (the plan's FLOPs per step, sentence cells at the padded length their batches "
        "really had, x steps/s without each process's first log interval) over the data-sheet dense peak "
        "of the cell's precision (fp32 against the non-tensor-core peak)."
        f"{scaled} `{calibration_file.name}` beside this report is what `make plan` reads.",
        "",
    ]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines))
    return path


# --------------------------------------------------------------------------------------------- the run

PRESET = REPO_ROOT / "config" / "gpu-check.yaml"
DEMO = REPO_ROOT / "config" / "demo.yaml"
KILLED_METHOD = "fp16"  # the cell killed after its first snapshot and resumed
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
        "gpu_check": {"backbones": ["tiny-bert"]},
        "gpu_check_macl": {"training": {"batch_size": 32, "max_steps": 4, "log_every": 2, "state_every": 2}},
        "gpu_check_oar": {
            "training": {"input_size": 32, "batch_size": 32, "max_steps": 4, "log_every": 2, "state_every": 2}
        },
    },
}


def run(args: argparse.Namespace) -> Path:
    """``make gpu-check`` (``scripts/gpu_check.py``'s options in ``args``: ``toy``, ``results_dir``,
    ``resources_dir``, ``cores``, ``workdir``): the preset's cells through Snakemake, the fp16 cell killed
    after its first snapshot and resumed, the checks, the packing measurement, then ``report.md`` and
    ``calibration.json`` in the results folder; returns the report's path. Without a usable GPU (and
    not ``--toy``) it stops with one line."""
    if not args.toy:
        _require_gpu()
    config, configfile = _preset(args)
    grid = cl_config.Grid(config)
    results = Path(grid.results.root)
    senteval_dir = data_locations(config)["senteval_dir"]
    cells = list(grid.cells)
    killed = _run_cells(grid, configfile, args.cores, args.workdir)
    device = "cuda" if torch.cuda.is_available() and not args.toy else "cpu"
    rows = [_cell_row(grid, cell) for cell in cells]
    killed_row = next(r for r in rows if r["cell"] == f"sentence {KILLED_METHOD}")
    checks = {
        "kill and resume": (
            killed and bool(killed_row["resumed_from"]),
            f"the {KILLED_METHOD} cell was killed after its first snapshot and resumed from step "
            f"{killed_row['resumed_from'] or '—'}"
            if killed
            else "the cell had finished before (rerun on a fresh results folder)",
        ),
        "evaluation split": _encoded_on(grid, device),
        "GPU vs CPU evaluation": _gpu_vs_cpu(grid, senteval_dir, device),
    }
    print("== 1, 2 and 4 sentence cells at once on one device", flush=True)
    fp32 = next(c for c in cells if c.method == "fp32")
    trained = json.loads(Path(grid.results.checkpoint(fp32, "model"), "train_summary.json").read_text())
    packing = measure_packing(
        grid.backbone(fp32.backbone)["random"],
        batch=trained["settings"]["batch_size"],
        length=trained["settings"]["max_length"],
        device=device,
        precisions=("fp32",) if args.toy else PACKING_PRECISIONS,
        steps=2 if args.toy else 100,
        warmup=1 if args.toy else 10,
        state_dir=Path(grid.results.state("packing")),
        # --toy: the copies fork from one process that imported torch (a spawned copy's imports cost
        # more than the toy's steps); the GPU run spawns them, as Snakemake starts its jobs.
        forkserver_preload=STEP_COPY_MODULES if args.toy else None,
    )
    dev_sentences = sts_dev_sentences(senteval_dir)
    return write_report(results, rows, environment(), checks, packing=packing, dev_sentences=dev_sentences)


def gpu_stack_problem() -> str | None:
    """Why the installed torch cannot use this node's GPU, in one line (contrastlab.cuda), or None."""
    return cuda.diagnose(cuda.probe())


def _require_gpu() -> None:
    if problem := gpu_stack_problem():
        raise SystemExit(f"contrastlab: make gpu-check: {problem}")
    if not torch.cuda.is_available():
        raise SystemExit(
            "contrastlab: make gpu-check needs a CUDA GPU and torch sees none "
            f"(torch {torch.__version__}, CUDA {torch.version.cuda}, "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); run it on a GPU node"
        )


def _preset(args: argparse.Namespace) -> tuple[dict, Path]:
    """The validated preset (at toy size with ``--toy``, in the folders ``args`` name) and the config
    file Snakemake reads it from, written in its results folder."""
    raw = yaml.safe_load(PRESET.read_text())
    if args.toy:
        raw = cl_config.deep_merge(raw, TOY)
    if args.results_dir:
        raw["results_dir"] = args.results_dir
    if args.resources_dir:
        raw["resources_dir"] = args.resources_dir
    config = cl_config.validate(raw)
    configfile = Path(config["results_dir"]) / "gpu-check.config.yaml"
    configfile.parent.mkdir(parents=True, exist_ok=True)
    configfile.write_text(yaml.safe_dump(raw, sort_keys=False))
    return config, configfile


def _run_cells(grid: cl_config.Grid, configfile: Path, cores: int, workdir: str) -> bool:
    """Every cell's metrics through Snakemake, the :data:`KILLED_METHOD` cell killed after its first
    snapshot first (unless it has finished before); True if it was killed."""
    results = grid.results.root
    killed_cell = next(c for c in grid.cells if c.method == KILLED_METHOD)
    state_json = Path(grid.results.state("train", killed_cell), "state.json")
    killed = False
    if not _metrics_path(grid, killed_cell).exists():
        print(f"== {killed_cell.path}: started, to be killed after its first snapshot", flush=True)
        # The image data beside it: a CPU job for the core that the killed cell's chain (data, backbone,
        # training) leaves idle; a kill before it is done only reruns it (rerun-incomplete).
        first = [_metrics_path(grid, killed_cell), *_image_markers(grid)]
        command = _snakemake(configfile, first, cores)
        killed = _kill_after_first_snapshot(command, state_json, timeout_s=1800, cwd=workdir)
    print("== every cell (the killed one resumes)", flush=True)
    targets = [_metrics_path(grid, cell) for cell in grid.cells]
    done = subprocess.run(_snakemake(configfile, targets, cores), cwd=workdir)
    if done.returncode:
        raise SystemExit(
            f"contrastlab: the gpu-check workflow failed (exit {done.returncode}); logs under {results}/logs"
        )
    return killed


def _image_markers(grid: cl_config.Grid) -> list[Path]:
    """The data markers of the image datasets the preset's vision cells train on."""
    datasets = dict.fromkeys(grid.experiment(c.experiment).dataset for c in grid.cells)
    return [Path(data_marker_path(grid.results.root, f"images-{d}")) for d in datasets if d]


def _metrics_path(grid: cl_config.Grid, cell) -> Path:
    return Path(grid.results.metrics(cell, grid.experiment(cell.experiment).track))


def _snakemake(configfile: Path, targets: list[Path], cores: int) -> list[str]:
    return [
        *(sys.executable, "-m", "snakemake", *map(str, targets), "-s", str(REPO_ROOT / "Snakefile")),
        *("--workflow-profile", str(REPO_ROOT / "profiles" / "local")),
        *("--configfile", str(configfile), "--cores", str(cores), "--quiet", "rules"),
    ]


def _kill_after_first_snapshot(command: list[str], state_json: Path, timeout_s: float, cwd: str) -> bool:
    """Run ``command`` in ``cwd`` and SIGKILL it (and its jobs) once ``state_json`` exists; True if it was
    killed."""
    proc = subprocess.Popen(command, cwd=cwd, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and not state_json.exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # --toy: a dozen steps of tiny BERT take a fraction of a second
    if proc.poll() is not None:
        return False
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return True


def _cell_row(grid: cl_config.Grid, cell) -> dict[str, Any]:
    """:func:`cell_row` of one trained cell of the preset, from its summary and the plan's FLOPs."""
    folder = Path(grid.results.checkpoint(cell))
    track = grid.experiment(cell.experiment).track
    summary_file = folder / ("encoder/settings.json" if track == "vision" else "model/train_summary.json")
    summary = json.loads(summary_file.read_text())
    work = cell_work(grid, cell)
    kind = (
        f"vision {cell.experiment.removeprefix('gpu_check_')}"
        if track == "vision"
        else f"sentence {cell.method}"
    )
    # the calibration's rate class: OAR's 224-px cell measures vision_large, MACL's 32-px one vision
    return cell_row(summary, work.step_flops, kind, work.rate_class)


def _encoded_on(grid: cl_config.Grid, device: str) -> tuple[bool, str]:
    """Every sentence cell's encoding job ran on ``device`` (the ``encoding`` its probe job copied into
    the metrics): rule encode got the GPU, while its probe job, rule evaluate, asked for none."""
    sentence = [c for c in grid.cells if grid.experiment(c.experiment).track != "vision"]
    found = {
        c.method: (json.loads(_metrics_path(grid, c).read_text()).get("encoding") or {}).get("device")
        for c in sentence
    }
    wrong = {method: where for method, where in found.items() if where != device}
    return (
        not wrong,
        f"{len(found) - len(wrong)} of {len(found)} SentEval encoding jobs on {device}, their probe jobs on "
        "the CPU" + (f"; elsewhere: {wrong}" if wrong else ""),
    )


def _gpu_vs_cpu(grid: cl_config.Grid, senteval: str, device: str) -> tuple[bool, str]:
    """The fp32 cell's checkpoint encodes STS-B test on ``device`` as on the CPU (relative
    :data:`EMBEDDING_TOLERANCE`), SentEval's data in ``senteval``; the STS scores of both are reported,
    not compared (the preset's 8-pair fixtures make Spearman move by points for one swapped rank)."""
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
