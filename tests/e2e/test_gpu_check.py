"""make gpu-check (config/gpu-check.yaml, scripts/gpu_check.py): one line where no GPU is; the same
preset at a toy size on the CPU, through Snakemake and the real rules, so that it cannot rot."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import torch

from contrastlab.paths import REPO_ROOT

SCHEDULE_FIRST = 15  # a long module: tests/conftest.py starts the highest numbers first

SCRIPT = REPO_ROOT / "scripts" / "gpu_check.py"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible: the check would run")
def test_without_a_gpu_it_stops_with_one_line():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("contrastlab: make gpu-check needs a CUDA GPU")


@pytest.mark.slow
def test_the_preset_runs_at_toy_size_and_writes_the_report_and_calibration(
    repo_root, tmp_path, e2e_resources
):
    """scripts/gpu_check.py --toy on the CPU: every cell of the preset in the report, the fp16 cell killed
    and resumed, the evaluation split and the GPU-vs-CPU check passed, the packing rows (1, 2 and 4
    cells at once), and a calibration make plan reads, with the packing speed-ups."""
    results = tmp_path / "gpu-check"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, str(SCRIPT), "--toy", "--results-dir", str(results), "--cores", "2"]
    # The session's resources folder (the toy tiny BERT is the demo's): built once for all e2e tests.
    command += [
        "--resources-dir",
        str(e2e_resources),
        "--workdir",
        str(repo_root),
    ]  # this module's .snakemake
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
    assert "- kill and resume: PASS" in report and "- GPU vs CPU evaluation: PASS" in report
    assert "- evaluation split: PASS — 4 of 4 SentEval encoding jobs on cpu" in report
    for k in (1, 2, 4):  # 1, 2 and 4 sentence cells at once (fp32 only at toy size)
        assert re.search(
            rf"^\| packing fp32 \| {k} \| ([0-9.]+(, )?){{{k}}} \| [0-9.]+ \| [0-9.]+x \|", report, re.M
        )
    calibration = json.loads((results / "calibration.json").read_text())
    # The format make plan reads; on a CPU tf32 runs as fp32, the others as asked.
    assert calibration["format"] == "contrastlab-calibration/1" and calibration["measured"] is True
    assert set(calibration["achieved_tflops"]["sentence"]) == {"fp32", "bf16", "fp16"}
    assert set(calibration["achieved_tflops"]["vision"]) == {"fp32"}
    assert calibration["overheads_s"]["dev_evaluation"] > 0
    assert calibration["packing"]["measured"] is True
    assert set(calibration["packing"]["speedup"]) == {"fp32"}
    assert set(calibration["packing"]["speedup"]["fp32"]) == {"2", "4"}
    from contrastlab.cost import calibration as cl_calibration

    loaded = cl_calibration.load_calibration(results / "calibration.json")  # make plan accepts it
    assert loaded is not None


def test_the_toy_tiny_bert_is_the_demos():
    """--toy's tiny BERT is config/demo.yaml's (initializer_range included): the tests run both on one
    resources folder, where a second spec under the same name would rebuild the model and retrain."""
    import yaml

    from contrastlab.cost import gpu_check

    demo = yaml.safe_load((REPO_ROOT / "config" / "demo.yaml").read_text())
    assert gpu_check.TOY["backbones"]["tiny-bert"] == demo["backbones"]["tiny-bert"]
    assert demo["backbones"]["tiny-bert"]["random"]["initializer_range"] == 0.2
