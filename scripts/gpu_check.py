"""make gpu-check: the GPU path in about eight minutes on one GPU through Snakemake and the real rules.

Runs config/gpu-check.yaml's cells (one sentence cell per precision, the fp16 one killed after its first
snapshot and resumed; one MACL and one OAR image cell), checks that each sentence cell's SentEval
encoding job ran on the GPU (its probes run in a CPU job), evaluates one checkpoint's STS on the GPU and
on the CPU, times 1, 2 and 4 sentence cells at once on the GPU (contrastlab.cost.packing), and writes
<results_dir>/report.md and calibration.json (contrastlab.cost.gpu_check).
Without a GPU it stops with one line. ``--toy`` runs the same preset at a toy size on the CPU (tiny
BERT, narrow ResNets, a dozen steps; the packing copies fork from one server process that imported
torch, where the GPU run spawns each): what the test suite does so that the preset cannot rot.

    python scripts/gpu_check.py                      # make gpu-check
    python scripts/gpu_check.py --toy --results-dir /tmp/gpu-check-toy
    python scripts/gpu_check.py --toy --results-dir /tmp/t --resources-dir /tmp/r  # models, data elsewhere
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
import yaml

from contrastlab import config as cl_config
from contrastlab.cost import flops as cl_flops
from contrastlab.cost import gpu_check as G
from contrastlab.cost.packing import STEP_COPY_MODULES
from contrastlab.cuda import diagnose, probe
from contrastlab.data.acquire import data_locations
from contrastlab.paths import REPO_ROOT

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
        "gpu_check_macl": {"training": {"batch_size": 64, "max_steps": 4, "log_every": 2, "state_every": 2}},
        "gpu_check_oar": {
            "training": {"input_size": 32, "batch_size": 32, "max_steps": 4, "log_every": 2, "state_every": 2}
        },
    },
}


def _metrics_path(config: dict, cell) -> Path:
    name = "vision.json" if cl_config.track(config, cell.experiment) == "vision" else "senteval.json"
    return Path(config["results_dir"]) / "metrics" / cell.path / name


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


def gpu_stack_problem() -> str | None:
    """Why the installed torch cannot use this node's GPU, in one line (contrastlab.cuda), or None."""
    return diagnose(probe())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toy", action="store_true", help="the preset at a toy size on the CPU (tests)")
    parser.add_argument("--results-dir", default=None, help="default: the preset's results/gpu-check")
    parser.add_argument(
        "--resources-dir", default=None, help="models and data (default: the preset's, resources/)"
    )
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--workdir", default=str(REPO_ROOT), help="Snakemake's working directory (default: the repository)"
    )
    args = parser.parse_args()
    if not args.toy and (problem := gpu_stack_problem()):
        sys.exit(f"contrastlab: make gpu-check: {problem}")
    if not args.toy and not torch.cuda.is_available():
        sys.exit(
            "contrastlab: make gpu-check needs a CUDA GPU and torch sees none "
            f"(torch {torch.__version__}, CUDA {torch.version.cuda}, "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); run it on a GPU node"
        )
    raw = yaml.safe_load(PRESET.read_text())
    if args.toy:
        raw = cl_config.deep_merge(raw, TOY)
    if args.results_dir:
        raw["results_dir"] = args.results_dir
    if args.resources_dir:
        raw["resources_dir"] = args.resources_dir
    config = cl_config.validate(raw)
    results = Path(config["results_dir"])
    results.mkdir(parents=True, exist_ok=True)
    configfile = results / "gpu-check.config.yaml"
    configfile.write_text(yaml.safe_dump(raw, sort_keys=False))
    grid = cl_config.Grid(config)
    cells = list(grid.cells)
    targets = [_metrics_path(config, cell) for cell in cells]

    killed_cell = next(c for c in cells if c.method == KILLED_METHOD)
    state_json = results / "state" / "train" / killed_cell.path / "state.json"
    killed = False
    if not _metrics_path(config, killed_cell).exists():
        print(f"== {killed_cell.path}: started, to be killed after its first snapshot", flush=True)
        command = _snakemake(configfile, [_metrics_path(config, killed_cell)], args.cores)
        killed = _kill_after_first_snapshot(command, state_json, timeout_s=1800, cwd=args.workdir)
    print("== every cell (the killed one resumes)", flush=True)
    done = subprocess.run(_snakemake(configfile, targets, args.cores), cwd=args.workdir)
    if done.returncode:
        sys.exit(
            f"contrastlab: the gpu-check workflow failed (exit {done.returncode}); logs under {results}/logs"
        )

    device = "cuda" if torch.cuda.is_available() and not args.toy else "cpu"
    rows = []
    for cell in cells:
        folder = results / "checkpoints" / cell.path
        track = cl_config.track(config, cell.experiment)
        summary_file = folder / ("encoder/settings.json" if track == "vision" else "model/train_summary.json")
        summary = json.loads(summary_file.read_text())
        flops = cl_flops.cell_work(grid, cell).step_flops
        kind = (
            f"vision {cell.experiment.removeprefix('gpu_check_')}"
            if track == "vision"
            else f"sentence {cell.method}"
        )
        rows.append(G.cell_row(summary, flops, kind, track))
    killed_row = next(r for r in rows if r["cell"] == f"sentence {KILLED_METHOD}")
    checks = {
        "kill and resume": (
            killed and bool(killed_row["resumed_from"]),
            f"the {KILLED_METHOD} cell was killed after its first snapshot and resumed from step "
            f"{killed_row['resumed_from'] or '—'}"
            if killed
            else "the cell had finished before (rerun on a fresh results folder)",
        ),
    }
    checks["evaluation split"] = _encoded_on(config, cells, device)
    checks["GPU vs CPU evaluation"] = _gpu_vs_cpu(config, cells, results, device)
    print("== 1, 2 and 4 sentence cells at once on one device", flush=True)
    fp32 = next(c for c in cells if c.method == "fp32")
    settings = json.loads((results / "checkpoints" / fp32.path / "model/train_summary.json").read_text())
    packing = G.measure_packing(
        config["backbones"][fp32.backbone]["random"],
        batch=settings["settings"]["batch_size"],
        length=settings["settings"]["max_length"],
        device=device,
        precisions=("fp32",) if args.toy else G.PACKING_PRECISIONS,
        steps=2 if args.toy else 100,
        warmup=1 if args.toy else 10,
        state_dir=results / "state" / "packing",
        # --toy: the copies fork from one process that imported torch (a spawned copy's imports cost
        # more than the toy's steps); the GPU run spawns them, as Snakemake starts its jobs.
        forkserver_preload=STEP_COPY_MODULES if args.toy else None,
    )
    senteval = data_locations(config)["senteval_dir"]
    dev_sentences = G.sts_dev_sentences(senteval)
    path = G.write_report(
        results, rows, G.environment(), checks, packing=packing, dev_sentences=dev_sentences
    )
    print(path.read_text())


def _encoded_on(config: dict, cells, device: str) -> tuple[bool, str]:
    """Every sentence cell's encoding job ran on ``device`` (the ``encoding`` its probe job copied into
    the metrics): rule encode got the GPU, while its probe job, rule evaluate, asked for none."""
    sentence = [c for c in cells if cl_config.track(config, c.experiment) != "vision"]
    found = {
        c.method: (json.loads(_metrics_path(config, c).read_text()).get("encoding") or {}).get("device")
        for c in sentence
    }
    wrong = {method: where for method, where in found.items() if where != device}
    return (
        not wrong,
        f"{len(found) - len(wrong)} of {len(found)} SentEval encoding jobs on {device}, their probe jobs on "
        "the CPU" + (f"; elsewhere: {wrong}" if wrong else ""),
    )


def _gpu_vs_cpu(config: dict, cells, results: Path, device: str) -> tuple[bool, str]:
    """The fp32 cell's checkpoint encodes STS-B test on ``device`` as on the CPU (relative
    :data:`~contrastlab.cost.gpu_check.EMBEDDING_TOLERANCE`); the STS scores of both are reported,
    not compared (the preset's 8-pair fixtures make Spearman move by points for one swapped rank)."""
    from contrastlab.evaluation.senteval import evaluate_checkpoint, load_sts_pairs

    cell = next(c for c in cells if c.method == "fp32")
    model = results / "checkpoints" / cell.path / "model"
    senteval = data_locations(config)["senteval_dir"]
    pairs = load_sts_pairs(senteval, "STSBenchmark", "test")
    worst = G.encoding_difference(model, pairs.a + pairs.b, device)
    scores = {
        where: evaluate_checkpoint(model, senteval, G.STS_TASKS, "fasttest", device=where)["scores"]
        for where in dict.fromkeys([device, "cpu"])
    }
    gaps = ", ".join(f"{t} {scores[device][t] - scores['cpu'][t]:+.2f}" for t in G.STS_TASKS)
    return (
        worst <= G.EMBEDDING_TOLERANCE,
        f"{device} vs cpu: largest relative embedding difference {worst:.1e} (tolerance "
        f"{G.EMBEDDING_TOLERANCE:.0e}); STS score differences {gaps}",
    )


if __name__ == "__main__":
    main()
