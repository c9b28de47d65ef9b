"""make gpu-check (config/gpu-check.yaml, scripts/gpu_check.py): one line where no GPU is; the same
preset at a toy size on the CPU, through Snakemake and the real rules, so that it cannot rot."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
import yaml

from contrastlab.cost import gpu_check
from contrastlab.cost.measured import read_job_costs
from contrastlab.paths import REPO_ROOT, read_json

SCHEDULE_FIRST = 15  # a long module: tests/conftest.py starts the highest numbers first

SCRIPT = REPO_ROOT / "scripts" / "gpu_check.py"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible: the check would run")
def test_without_a_gpu_it_stops_with_one_line():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("contrastlab: make gpu-check needs a CUDA GPU")


def _wait_for(proc: subprocess.Popen, line: str, timeout_s: float) -> str:
    """The process's output up to the first line containing ``line`` (all of it if it ended first);
    its process group is killed after ``timeout_s``."""
    watchdog = threading.Timer(timeout_s, os.killpg, (proc.pid, signal.SIGKILL))
    watchdog.start()
    seen = []
    try:
        for out in proc.stdout:
            seen.append(out)
            if line in out:
                break
    finally:
        watchdog.cancel()
    return "".join(seen)


def _plan_reads(calibration: Path, configfile: Path, out: Path) -> str:
    """`make plan` (scripts/plan.py) of ``configfile`` priced with ``calibration``: its output."""
    command = [sys.executable, str(REPO_ROOT / "scripts" / "plan.py"), "--configfile", str(configfile)]
    command += ["--calibration", str(calibration), "--no-claims", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout


def _modes_of_the_cells(results: Path) -> dict[str, str]:
    """The step mode each packed cell's training ran (its summary), by the packing's step name."""
    sentence = results / "checkpoints" / "gpu_check" / "tiny-bert"
    modes = {}
    for precision in ("fp32", "bf16"):
        s = json.loads((sentence / precision / "seed42" / "model" / "train_summary.json").read_text())[
            "settings"
        ]
        modes[f"sentence {precision}"] = (
            "padding-free" if s["padding_free"] else "graph" if s["cuda_graph"] else "eager"
        )
    macl = results / "checkpoints" / "gpu_check_macl" / "resnet18-cifar" / "macl" / "seed42" / "encoder"
    modes["vision macl batch 32"] = (  # --toy packs the cell at its own batch
        "graph" if json.loads((macl / "settings.json").read_text())["cuda_graph"] else "eager"
    )
    return modes


@pytest.mark.slow
def test_the_preset_at_toy_size_killed_after_its_cells_then_run_to_the_end(
    repo_root, tmp_path, e2e_resources
):
    """scripts/gpu_check.py --toy on the CPU, SIGKILLed (its process group) after its first part: the report
    and the calibration name the parts missing, and make plan reads them. Run again to the end: every part
    in the report (packed steps in their cells' modes; no MPS here, said so), and a full calibration."""
    results = tmp_path / "gpu-check"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, str(SCRIPT), "--toy", "--results-dir", str(results), "--cores", "2"]
    # The session's resources folder (the toy tiny BERT is the demo's): built once for all e2e tests;
    # this module's working copy, with its own .snakemake.
    command += ["--resources-dir", str(e2e_resources), "--workdir", str(repo_root)]
    cut = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**env, gpu_check.WAIT_AFTER: "cells"},
        start_new_session=True,
    )
    output = _wait_for(cut, "== cells written; waiting", timeout_s=1500)
    assert cut.poll() is None, output[-4000:]
    os.killpg(cut.pid, signal.SIGKILL)
    assert cut.wait() == -signal.SIGKILL
    report = (results / "report.md").read_text()
    assert "| sentence fp32 |" in report and "| vision oar |" in report and "## Actual against plan" in report
    assert "- not done (the check stopped or has not reached them yet): checks, packing" in report
    assert "## Checks\n\nNot run yet." in report and "## Several small cells per GPU" not in report
    partial = json.loads((results / "calibration.json").read_text())
    assert partial["missing_parts"] == ["checks", "packing"] and "packing" not in partial
    assert set(partial["achieved_tflops"]["sentence"]) == {"fp32", "bf16", "fp16"}
    measured = {"train_startup", "evaluate_startup", "snapshot_per_gib", "dev_evaluation"}
    assert measured <= {k for k, v in partial["overheads_s"].items() if v > 0}
    # an encoding's start-up: its wall less its own encoding seconds, not the full benchmark's FLOPs
    outside = [
        job.seconds - read_json(results / "metrics" / job.cell / name)["encoding"]["phases"]["encode_s"]
        for job in read_job_costs(results, skipped=[])
        for rule, name in (("encode", "senteval.json"), ("encode_vision", "vision.json"))
        if job.rule == rule
    ]
    assert len(outside) == 2
    assert partial["overheads_s"]["evaluate_startup"] == pytest.approx(sum(outside) / 2)
    plan = _plan_reads(results / "calibration.json", results / "gpu-check.config.yaml", tmp_path / "plan-cut")
    assert "make gpu-check stopped before its checks, packing part" in plan

    done = subprocess.run(command, capture_output=True, text=True, timeout=1500, env=env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    report = (results / "report.md").read_text()
    for cell in (
        "sentence fp32",
        "sentence tf32",
        "sentence bf16",
        "sentence fp16",
        "vision macl",
        "vision oar",
    ):
        assert f"| {cell} |" in report
    assert "- parts done: cells, checks, packing" in report and "not done" not in report
    assert (
        "- kill and resume: PASS — the fp16 cell was killed after its first snapshot (an earlier run"
        in report
    )
    assert "- GPU vs CPU evaluation: PASS" in report
    assert "- evaluation split: PASS — 1 of 1 SentEval encoding jobs on cpu" in report
    for rule in ("train", "train_vision", "encode", "encode_vision", "evaluate", "evaluate_vision"):
        assert re.search(rf"^\| {rule} \| \d+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$", report, re.M), rule
    for step, mode in _modes_of_the_cells(results).items():  # eager on a CPU, through the trainer's rule
        for k in (1, 2, 4):  # 1, 2 and 4 copies at once
            assert re.search(
                rf"^\| {step} \| {mode} \| no \| {k} \| ([0-9.]+(, )?){{{k}}} \| [0-9.]+ \| [0-9.]+x \|",
                report,
                re.M,
            )
        assert f"| {step} | — | yes | — | not measured: nvidia-cuda-mps-control is not on PATH" in report
    calibration = json.loads((results / "calibration.json").read_text())
    # The format make plan reads; on a CPU tf32 runs as fp32, the others as asked.
    assert calibration["format"] == "contrastlab-calibration/1" and calibration["measured"] is True
    assert "missing_parts" not in calibration
    assert set(calibration["achieved_tflops"]["sentence"]) == {"fp32", "bf16", "fp16"}
    assert set(calibration["achieved_tflops"]["vision"]) == {"fp32"}
    assert calibration["overheads_s"]["dev_evaluation"] > 0
    assert calibration["packing"]["measured"] is True
    assert set(calibration["packing"]["speedup"]) == {"fp32", "bf16"}
    assert set(calibration["packing"]["speedup"]["fp32"]) == {"2", "4"}
    assert set(calibration["packing"]["vision_speedup_b32"]) == {"fp32"}
    plan = _plan_reads(results / "calibration.json", results / "gpu-check.config.yaml", tmp_path / "plan")
    assert "stopped before" not in plan


def test_the_toy_tiny_bert_is_the_demos():
    """--toy's tiny BERT is config/demo.yaml's (initializer_range included): the tests run both on one
    resources folder, where a second spec under the same name would rebuild the model and retrain."""
    demo = yaml.safe_load((REPO_ROOT / "config" / "demo.yaml").read_text())
    assert gpu_check.TOY["backbones"]["tiny-bert"] == demo["backbones"]["tiny-bert"]
    assert demo["backbones"]["tiny-bert"]["random"]["initializer_range"] == 0.2
