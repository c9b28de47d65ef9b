"""make gpu-check's figures (contrastlab.cost.gpu_check): FLOPs at the tokens that ran, rates without the
warm-up interval, the dev-evaluation overhead scaled to STS-B dev, and the packing rows and speed-ups
written to the report and the calibration make plan reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import gpu_check as G
from contrastlab.cost.flops import STSB_DEV_SENTENCES
from contrastlab.paths import Results

#: The plan's FLOPs of one step: 6 · N · batch 64 · 2 views · 32 tokens, N = 85,054,464 (BERT-base).
PLAN_STEP_FLOPS = 6 * 85_054_464 * 64 * 2 * 32


def _summary(**timings) -> dict:
    base = {"train_s": 10.0, "total_s": 30.0, "eval_s": 6.0}
    return {
        "steps": 100,
        "precision": "fp32",
        "device_name": "NVIDIA H100 80GB HBM3",
        "settings": {"max_length": 32},
        "evals": [{}, {}, {}, {}],
        "timings": {**base, **timings},
    }


def test_sentence_flops_count_the_padded_tokens_that_ran_not_max_length():
    # 100 steps of 64 sentences, batches padded to 21 tokens on average (the fixture's), not 32
    summary = _summary(sentences=6_400, padded_tokens=6_400 * 21)
    row = G.cell_row(summary, PLAN_STEP_FLOPS, "sentence fp32", "sentence")
    assert row["step_flops"] == pytest.approx(PLAN_STEP_FLOPS * 21 / 32)
    assert row["tflops_per_s"] == pytest.approx(PLAN_STEP_FLOPS * 21 / 32 * 10.0 / 1e12)  # 100 steps / 10 s
    vision = G.cell_row(_summary(sentences=6_400, padded_tokens=1), 1e12, "vision oar", "vision")
    assert vision["step_flops"] == 1e12  # images: no token count


def test_a_padding_free_cell_counts_the_real_tokens_that_ran():
    summary = _summary(sentences=6_400, padded_tokens=6_400 * 30, real_tokens=6_400 * 21)
    summary["settings"]["padding_free"] = True
    row = G.cell_row(summary, PLAN_STEP_FLOPS, "sentence fp32", "sentence")
    assert row["step_flops"] == pytest.approx(PLAN_STEP_FLOPS * 21 / 32)
    summary["settings"]["padding_free"] = False  # the padded step ran the padding
    assert G.cell_row(summary, PLAN_STEP_FLOPS, "s", "sentence")["step_flops"] == pytest.approx(
        PLAN_STEP_FLOPS * 30 / 32
    )


def test_the_rate_leaves_out_each_processs_first_log_interval():
    # 100 steps in 10 s, of which the first interval (10 steps, 2 s: cuDNN handles, lazy kernels)
    row = G.cell_row(_summary(steady_train_s=8.0, steady_steps=90), 1e12, "vision macl", "vision")
    assert row["steps_per_s"] == 90 / 8.0
    unsteady = G.cell_row(_summary(), 1e12, "vision macl", "vision")  # a run too short for a second one
    assert unsteady["steps_per_s"] == 100 / 10.0


def test_the_dev_evaluation_overhead_is_scaled_to_sts_b_devs_size():
    row = G.cell_row(_summary(), PLAN_STEP_FLOPS, "sentence fp32", "sentence")  # 4 evaluations, 6 s
    env = {"device": "NVIDIA H100 80GB HBM3", "date": "today", "gpu_memory_gib": 79.2}
    scaled = G.calibration([row], env, dev_sentences=32)
    assert scaled["overheads_s"]["dev_evaluation"] == pytest.approx(6.0 / 4 * STSB_DEV_SENTENCES / 32)
    assert STSB_DEV_SENTENCES == 2_909
    assert G.calibration([row], env)["overheads_s"]["dev_evaluation"] == 1.5  # no count: as timed


def test_the_report_has_the_packing_rows_and_the_calibration_their_speedups(tmp_path):
    row = G.cell_row(_summary(), PLAN_STEP_FLOPS, "sentence fp32", "sentence")
    packing = {
        "fp32": [
            {"k": 1, "steps_per_s": [20.0], "sum": 20.0, "speedup": 1.0, "peak_gib": 3.1},
            {"k": 2, "steps_per_s": [9.0, 9.5], "sum": 18.5, "speedup": 0.925, "peak_gib": 3.1},
            {"k": 4, "steps_per_s": [4.5, 4.5, 4.6, 4.8], "sum": 18.4, "speedup": 0.92, "peak_gib": 3.1},
        ]
    }
    env = {"device": "NVIDIA H100 80GB HBM3", "date": "today", "gpu_memory_gib": 79.2}
    report = G.write_report(tmp_path, [row], env, {}, packing=packing, dev_sentences=32).read_text()
    assert "| packing fp32 | 2 | 9.00, 9.50 | 18.50 | 0.93x | 3.10 |" in report
    assert "| packing fp32 | 4 | 4.50, 4.50, 4.60, 4.80 | 18.40 | 0.92x | 3.10 |" in report
    assert f"of 32 sentences scaled to STS-B dev's {STSB_DEV_SENTENCES}" in report
    written = json.loads(Path(Results(tmp_path).calibration).read_text())
    assert written["packing"]["measured"] is True
    assert written["packing"]["speedup"] == {"fp32": {"2": 0.925, "4": 0.92}}
    loaded = cl_calibration.load_calibration(Results(tmp_path).calibration)
    assert loaded.packing_measured and loaded.packing_speedup == {"fp32": {2: 0.925, 4: 0.92}}
