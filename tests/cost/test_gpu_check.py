"""make gpu-check's figures (contrastlab.cost.gpu_report, contrastlab.cost.gpu_check): FLOPs at the tokens
that ran, rates without the warm-up interval, the dev-evaluation overhead without each process's first
evaluation, start-up and snapshots measured from the jobs, the actual-against-plan table, the packing
rows (with and without MPS) and a calibration make plan reads after any part of the check."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from contrastlab import config as cl_config
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import gpu_check, provenance
from contrastlab.cost import gpu_report as R
from contrastlab.cost import plan as cl_plan
from contrastlab.cost.flops import STSB_DEV_SENTENCES, cell_work
from contrastlab.paths import REPO_ROOT, Results
from contrastlab.training import snapshots
from tests.cost.common import config_grid, preset_grid, written_calibration

#: The plan's FLOPs of one step: 6 · N · batch 64 · 2 views · 32 tokens, N = 85,054,464 (BERT-base).
PLAN_STEP_FLOPS = 6 * 85_054_464 * 64 * 2 * 32
ENV = {"device": "NVIDIA H100 80GB HBM3", "date": "today", "gpu_memory_gib": 79.2}


def _summary(**timings) -> dict:
    base = {"train_s": 10.0, "total_s": 30.0, "eval_s": 6.0}
    return {
        "steps": 100,
        "precision": "fp32",
        "device_name": "NVIDIA H100 80GB HBM3",
        "settings": {"max_length": 32},
        "evals": [{"step": s} for s in (0, 25, 50, 100)],
        "timings": {**base, **timings},
    }


def test_sentence_flops_count_the_tokens_that_ran_not_max_length():
    # 100 steps of 64 sentences, batches padded to 21 tokens on average (the fixture's), not 32
    summary = _summary(sentences=6_400, padded_tokens=6_400 * 21)
    row = R.cell_row(summary, PLAN_STEP_FLOPS, "sentence fp32", "sentence")
    assert row["step_flops"] == pytest.approx(PLAN_STEP_FLOPS * 21 / 32)
    assert row["tflops_per_s"] == pytest.approx(PLAN_STEP_FLOPS * 21 / 32 * 10.0 / 1e12)  # 100 steps / 10 s
    vision = R.cell_row(_summary(sentences=6_400, padded_tokens=1), 1e12, "vision oar", "vision")
    assert vision["step_flops"] == 1e12  # images: no token count
    # a padding-free cell counts the real tokens that ran; a padded one ran the padding
    summary = _summary(sentences=6_400, padded_tokens=6_400 * 30, real_tokens=6_400 * 21)
    for padding_free, tokens in ((True, 21), (False, 30)):
        summary["settings"]["padding_free"] = padding_free
        row = R.cell_row(summary, PLAN_STEP_FLOPS, "sentence fp32", "sentence")
        assert row["step_flops"] == pytest.approx(PLAN_STEP_FLOPS * tokens / 32), padding_free


def test_the_rate_leaves_out_each_processs_first_log_interval():
    # 100 steps in 10 s, of which the first interval (10 steps, 2 s: cuDNN handles, lazy kernels)
    row = R.cell_row(_summary(steady_train_s=8.0, steady_steps=90), 1e12, "vision macl", "vision")
    assert row["steps_per_s"] == 90 / 8.0
    unsteady = R.cell_row(_summary(), 1e12, "vision macl", "vision")  # a run too short for a second one
    assert unsteady["steps_per_s"] == 100 / 10.0


def test_the_dev_evaluation_is_its_fixed_cost_unscaled_without_the_work_the_plan_prices_apart():
    """Step 0's and a resumed process's first evaluation are left out; the rest, less what the plan prices
    of them (dev_eval_work_s), is the fixed cost per evaluation, not scaled to STS-B dev."""
    fp32 = _summary()
    fp32["eval_seconds"] = [1.3, 0.30, 0.32, 0.28]
    fp16 = _summary()  # killed after its snapshot at step 50, resumed: its evaluation at 100 is cold
    fp16.update(
        resumed_from=[50],
        evals=[{"step": s, "seconds": t} for s, t in ((0, 1.2), (25, 0.3), (50, 0.3), (100, 0.9))],
    )
    assert R.dev_evaluation_seconds(fp32) == [0.30, 0.32, 0.28]
    assert R.dev_evaluation_seconds(fp16) == [0.3, 0.3]
    assert R.dev_evaluation_seconds(_summary()) == []  # an older trainer: no per-evaluation seconds
    rows = [R.cell_row(s, PLAN_STEP_FLOPS, "sentence", "sentence", dev_work_s=0.05) for s in (fp32, fp16)]
    assert R.calibration(rows, ENV)["overheads_s"]["dev_evaluation"] == pytest.approx(0.30 - 0.05)
    unpriced = [R.cell_row(s, PLAN_STEP_FLOPS, "sentence", "sentence") for s in (fp32, fp16)]
    assert R.calibration(unpriced, ENV)["overheads_s"]["dev_evaluation"] == pytest.approx(0.30)
    # without per-evaluation seconds nothing is measured: the plan takes the default's (and says so)
    bare = R.cell_row(_summary(), PLAN_STEP_FLOPS, "sentence", "sentence")
    assert "dev_evaluation" not in R.calibration([bare], ENV)["overheads_s"]


def test_the_dev_work_of_a_fixture_evaluation_is_its_share_of_sts_b_devs_flops_and_one_call():
    """The preset's BERT-base cell: 4 dev evaluations, 6 calls each at dev batch 512; 32 sentences are
    32/2909 of one evaluation's FLOPs at the shipped fp32 rate and one call of 3.93 ms."""
    grid = preset_grid()
    work = cell_work(grid, next(c for c in grid.cells if c.method == "bf16"))
    shipped = cl_calibration.load_calibration(cl_calibration.DEFAULT_CALIBRATION)
    assert (work.dev_evaluations, work.dev_calls) == (4, 24)
    per_evaluation = work.dev_flops / 4
    flop_s = per_evaluation * 32 / STSB_DEV_SENTENCES / (shipped.achieved_tflops["sentence"]["fp32"] * 1e12)
    assert R.dev_work_seconds(work, shipped, 32) == pytest.approx(flop_s + 0.00393)
    assert R.dev_work_seconds(work, shipped, STSB_DEV_SENTENCES) == pytest.approx(
        flop_s * 2909 / 32 + 6 * 0.00393
    )


#: 2026-11-28's H200 run of make gpu-check (../shared/docs/gpu-h200-2026-11-28/): per sentence cell of
#: 300 steps (dev at 0, 100, 200, 300; three snapshots) its job's wall, steps/s, its dev evaluations' and
#: snapshots' seconds. Each evaluation is taken as dev / 4 (the split was not recorded); fp16 (resumed)
#: and fp32 (padding-free, no token count) give no rate here.
H200_2026_11_28 = {
    "fp32": {"wall": 45.0, "rate": 28.3, "dev": 1.4, "snapshots": 4.1},
    "tf32": {"wall": 45.0, "rate": 52.4, "dev": 1.6, "snapshots": 4.2},
    "bf16": {"wall": 42.0, "rate": 76.6, "dev": 1.7, "snapshots": 3.5},
}
#: The encoding jobs' walls between Snakemake's "Finished" lines (encode x 4, encode_vision x 2).
H200_2026_11_28_ENCODINGS = (27.0, 28.0, 31.0, 31.0, 29.0, 26.0)


def _calibration_of_2026_11_28(tmp_path: Path) -> cl_calibration.Calibration:
    grid = preset_grid()
    cells = {c.method: c for c in grid.cells if grid.experiment(c.experiment).track == "sentence"}
    shipped = cl_calibration.load_calibration(cl_calibration.DEFAULT_CALIBRATION)
    rows = []
    for precision, f in H200_2026_11_28.items():
        work = cell_work(grid, cells[precision])
        summary = _summary(train_s=300 / f["rate"], eval_s=f["dev"], state_s=f["snapshots"])
        evals = [{"step": s, "seconds": f["dev"] / 4} for s in (0, 100, 200, 300)]
        summary |= {"steps": 300, "precision": precision, "device_name": "NVIDIA H200", "evals": evals}
        row = R.cell_row(
            summary,
            work.step_flops,
            f"sentence {precision}",
            "sentence",
            snapshots=3,
            snapshot_gib=work.snapshot_gib,
            wall_s=f["wall"],
            dev_work_s=R.dev_work_seconds(work, shipped, 32),
        )
        rows.append(row | ({"steps_per_s": None} if precision == "fp32" else {}))
    overheads = R.measured_overheads(rows, [{"wall_s": w, "work_s": 0.0} for w in H200_2026_11_28_ENCODINGS])
    measured = [
        cl_calibration.Measurement("sentence", r["precision"], r["step_flops"], r["steps_per_s"])
        for r in rows
        if r["steps_per_s"]
    ]
    options = {"overheads_s": overheads, "gpu_memory_gib": 140.4, "source": "2026-11-28"}
    return written_calibration(tmp_path / "calibration.json", measured, "NVIDIA H200", **options)


def test_a_calibration_from_the_h200s_figures_of_2026_11_28_keeps_the_plan_within_2_gpu_hours(tmp_path):
    """The dev evaluation's fixed cost and the measured start-ups keep config.yaml's plan within 2 GPU-h
    of 179.0 and no rule moves by more than 25%; scaled by 2909/32 it would pass 260."""
    calibration = _calibration_of_2026_11_28(tmp_path)
    o = calibration.overheads_s
    assert 0.3 < o["dev_evaluation"] < 0.43
    assert o["train_startup"] == pytest.approx(
        sum(f["wall"] - 300 / f["rate"] - f["dev"] - f["snapshots"] for f in H200_2026_11_28.values()) / 3
    )
    assert o["evaluate_startup"] == pytest.approx(sum(H200_2026_11_28_ENCODINGS) / 6)
    # no image rate measured: OAR's augmentation (vision_large_image) and the fp32 padding-free ratio stay
    # with the shipped rates they go with
    assert "overheads_s.vision_large_image" in calibration.filled_from_default
    assert calibration.padding_free_ratio == {"fp32": 0.7965}
    grid = config_grid()
    shipped = cl_calibration.load_calibration(cl_calibration.DEFAULT_CALIBRATION)
    assert cl_plan.total_hours(cl_plan.make_plan(grid, shipped)) == pytest.approx(179.0, abs=0.05)
    hours = cl_plan.total_hours(cl_plan.make_plan(grid, calibration))
    assert abs(hours - 179.0) <= 2.0
    works = {cell.path: cell_work(grid, cell) for cell in grid.cells}
    assert provenance.moved_rules(works, calibration) == []
    # the old scaling, for contrast: the rule train moves by half and the line names dev_evaluation
    inflated = replace(calibration, overheads_s={**o, "dev_evaluation": o["dev_evaluation"] * 2909 / 32})
    assert cl_plan.total_hours(cl_plan.make_plan(grid, inflated)) > 260
    (moved,) = provenance.moved_rules(works, inflated)
    assert moved.startswith("**calibration moves rule train** by +")
    assert "overheads_s.dev_evaluation 3" in moved and "against the shipped 0.0507" in moved


def test_the_calibration_an_h200_wrote_moves_no_training_rule_of_config_yaml():
    """make gpu-check, then make plan, on the file an H200 wrote on 2026-11-28 with full-length rows
    (docs/gpu-runs/h200-2026-11-28-gpu-check): 171.4 GPU-h against the shipped 179.0, no training rule moved
    by more than 25%; the encodings move (their start-up there is 0 s: warm, and written before 8a82cdc)."""
    run = REPO_ROOT / "docs" / "gpu-runs" / "h200-2026-11-28-gpu-check" / "run2_calibration.json"
    calibration, grid = cl_calibration.load_calibration(run), config_grid()
    assert cl_plan.total_hours(cl_plan.make_plan(grid, calibration)) == pytest.approx(171.4, abs=0.05)
    works = {cell.path: cell_work(grid, cell) for cell in grid.cells}
    moved = [line.split("**")[1] for line in provenance.moved_rules(works, calibration)]
    assert moved == ["calibration moves rule encode", "calibration moves rule encode_vision"]


def _job_summary(**extra) -> dict:
    """125 steps, 100 steady ones in 4 s (25 steps/s: the 125 priced at 5.0 s), dev 1.2 s, snapshots 1 s."""
    summary = _summary(steady_train_s=4.0, steady_steps=100, eval_s=1.2, state_s=1.0, total_s=20.0)
    summary["steps"] = 125
    return summary | extra


def test_the_presets_corpus_fills_the_plans_rows(tmp_path, minilm_dir):
    """Every line of the preset's training corpus tokenises to at least max_length, so each batch is the
    64 x 32 rows a calibrated rate is priced for (the fixture's own lines average 12.5 of 32 tokens)."""
    args = argparse.Namespace(toy=False, results_dir=str(tmp_path), resources_dir=None)
    config, _ = gpu_check._preset(args)
    grid = cl_config.Grid(config)
    (cell, *_) = (c for c in grid.cells if grid.experiment(c.experiment).track == "sentence")
    corpus = Path(grid.data.locations()["corpus"]).read_text().splitlines()
    assert len(corpus) == config["data"]["fixture_corpus_sentences"]
    lengths = [len(ids) for ids in AutoTokenizer.from_pretrained(minilm_dir)(corpus)["input_ids"]]
    assert min(lengths) >= grid.settings(cell)["max_length"] == 32


def test_the_start_up_is_the_jobs_wall_less_its_steps_dev_and_snapshots():
    phases = {"total_s": 40.0, "steps_s": 6.0, "dev_s": 1.5, "snapshots_s": 0.8, "writes_s": 2.0}
    with_phases = R.cell_row(_job_summary(phases=phases), 1e12, "a", "sentence", wall_s=45.0)
    assert with_phases["startup_s"] == pytest.approx(45.0 - 5.0 - 1.5 - 0.8)  # 37.7: the wall, phases' dev
    assert R.cell_row(_job_summary(phases=phases), 1e12, "a", "sentence")["startup_s"] == pytest.approx(
        40.0 - 5.0 - 1.5 - 0.8  # no benchmark file: the phases' total
    )
    timed = R.cell_row(_job_summary(), 1e12, "b", "sentence", wall_s=30.0)
    assert timed["startup_s"] == pytest.approx(30.0 - 5.0 - 1.2 - 1.0)  # no phases: the timings, 22.8
    assert R.cell_row(_job_summary(), 1e12, "b", "sentence")["startup_s"] == pytest.approx(12.8)  # total_s
    validated = _job_summary()
    validated["timings"].update(eval_s=0.0, val_s=2.0)  # an image cell's validation passes
    image = R.cell_row(validated, 1e12, "c", "vision", wall_s=30.0)
    assert image["startup_s"] == pytest.approx(30.0 - 5.0 - 2.0 - 1.0)  # validation passes priced apart
    resumed = R.cell_row(_job_summary(resumed_from=[100]), 1e12, "d", "sentence", wall_s=30.0)
    assert resumed["startup_s"] is None  # its timings span two processes


def test_the_calibration_replaces_the_assumed_start_up_and_snapshots_with_the_measured_ones(tmp_path):
    """Start-up: the mean over the jobs that ran from the start; evaluation start-up: the encoding jobs'
    walls less their FLOPs; snapshots: their seconds over count x GiB."""
    phases = {"total_s": 40.0, "dev_s": 1.5, "snapshots_s": 0.8}
    rows = [
        R.cell_row(
            _job_summary(phases=phases), 1e12, "a", "sentence", snapshots=1, snapshot_gib=1.5, wall_s=45.0
        ),
        R.cell_row(_job_summary(), 1e12, "b", "sentence", snapshots=2, snapshot_gib=1.5, wall_s=30.0),
        R.cell_row(_job_summary(resumed_from=[100]), 1e12, "c", "sentence", snapshots=1, snapshot_gib=1.5),
    ]
    evaluations = [{"wall_s": 30.0, "work_s": 0.5}, {"wall_s": 20.5, "work_s": 0.0}]
    overheads = R.measured_overheads(rows, evaluations)
    assert overheads["train_startup"] == pytest.approx((37.7 + 22.8) / 2)  # 30.25; the resumed c left out
    assert overheads["evaluate_startup"] == pytest.approx((29.5 + 20.5) / 2)  # 25.0
    assert overheads["snapshot_per_gib"] == pytest.approx((0.8 + 1.0) / (1 * 1.5 + 2 * 1.5))  # 0.4
    shipped = cl_calibration.load_calibration(cl_calibration.DEFAULT_CALIBRATION).overheads_s
    assert (shipped["train_startup"], shipped["evaluate_startup"], shipped["snapshot_per_gib"]) == (60, 30, 2)
    R.write_report(tmp_path, rows, ENV, {}, evaluations=evaluations)
    loaded = cl_calibration.load_calibration(Results(tmp_path).calibration)
    measured = {"train_startup": 30.25, "evaluate_startup": 25.0, "snapshot_per_gib": 0.4}
    assert {key: loaded.overheads_s[key] for key in measured} == pytest.approx(measured)
    assert not {"overheads_s.train_startup", "overheads_s.snapshot_per_gib"} & set(loaded.filled_from_default)


def test_the_report_puts_each_jobs_wall_beside_the_plan_with_its_start_and_phases(tmp_path):
    """Hand-made jobs: missing keys show "—"; the per-rule sums; warm, cold with its reason, unknown."""
    jobs = [
        {
            "rule": "train",
            "cell": "gpu_check/bert/fp32/seed42",
            "wall_s": 45.0,
            "planned": {"shipped": 70.0},
            "start": {"warm": False, "why_cold": "libcuda.so in the starter", "waited_s": 0.5},
            "phases": {"imports_s": 5.0, "cuda_init_s": 2.25, "setup_s": 0.75, "total_s": 40.0},
            "startup_s": 37.7,
        },
        {"rule": "train", "cell": "gpu_check/bert/bf16/seed42", "wall_s": 30.0, "planned": {"shipped": 60.0},
         "start": {"warm": True}},
        {"rule": "encode", "cell": "gpu_check/bert/fp32/seed42", "wall_s": 28.0,
         "start": {"warm": True, "waited_s": 0.0}, "phases": {"encode_s": 3.5, "total_s": 5.0}},
    ]  # fmt: skip
    here = {("train", "gpu_check/bert/fp32/seed42"): 44.0}
    report = R.write_report(tmp_path, [], ENV, {}, jobs=jobs, price=lambda path: here).read_text()
    assert "| rule | jobs | actual (s) | plan, shipped (s) | plan, this calibration (s) |" in report
    assert "| train | 2 | 75.0 | 130.0 | 44.0 |" in report
    assert "| encode | 1 | 28.0 | — | — |" in report
    fp32 = "| train | gpu_check/bert/fp32/seed42 | cold (libcuda.so in the starter) |"
    assert f"{fp32} 45.0 | 70.0 | 44.0 | 37.7 |" in report
    assert "| train | gpu_check/bert/bf16/seed42 | warm | 30.0 | 60.0 | — | — |" in report
    assert "| encode | gpu_check/bert/fp32/seed42 | warm | 28.0 | — | — | — |" in report
    # the named phases, then any other a job records ("setup", "encode"), then the total
    assert "| imports | GPU claim | nvidia-smi | cuInit | CUDA init |" in report
    assert "| writes | after summary | setup | encode | total |" in report
    fp32_phases = "| train | gpu_check/bert/fp32/seed42 | 0.50 | — | 5.00 |" + " — |" * 3 + " 2.25 |"
    assert fp32_phases + " — |" * 8 + " 0.75 | — | 40.00 |" in report
    assert "| train | gpu_check/bert/bf16/seed42 |" + " — |" * 18 in report
    # every GPU job shows its start and phases, the encoding jobs too (from their metrics' encoding)
    assert "| encode | gpu_check/bert/fp32/seed42 | 0.00 |" + " — |" * 15 + " 3.50 | 5.00 |" in report
    # the summary's start and phases reach the row (and so the table) as the trainers write them
    row = R.cell_row(_job_summary(start=jobs[0]["start"], phases=jobs[0]["phases"]), 1e12, "a", "sentence")
    assert row["start"] == jobs[0]["start"] and row["phases"] == jobs[0]["phases"]


def _packing_series(mps: bool) -> list[dict]:
    each = {"peak_gib": 3.1, "mode": "padding-free", "precision": "fp32"}
    rows = [
        {"k": 1, "steps_per_s": [20.0], "sum": 20.0, "speedup": 1.0, **each},
        {"k": 2, "steps_per_s": [9.0, 9.5], "sum": 18.5, "speedup": 0.925, **each},
        {"k": 4, "steps_per_s": [4.5, 4.5, 4.6, 4.8], "sum": 18.4, "speedup": 0.92, **each},
    ]
    if mps:
        rows = [dict(r, speedup=r["speedup"] + 0.5) for r in rows]
    return [{"step": "sentence fp32", "track": "sentence", "precision": "fp32", "mps": mps, "rows": rows}]


def test_the_report_has_the_packing_rows_and_the_calibration_their_speedups(tmp_path):
    row = R.cell_row(_summary(), PLAN_STEP_FLOPS, "sentence fp32", "sentence")
    vision = {
        "step": "vision macl batch 64",
        "track": "vision",
        "precision": "auto",
        "batch": 64,
        "mps": False,
    }
    failed = {**vision, "mps": True, "error": "no MPS"}
    vision["rows"] = [dict(r, precision="bf16", mode="graph") for r in _packing_series(False)[0]["rows"]]
    packing = [*_packing_series(False), *_packing_series(True), vision, failed]
    report = R.write_report(tmp_path, [row], ENV, {}, packing=packing, dev_sentences=32).read_text()
    for line in (
        "| sentence fp32 | padding-free | no | 2 | 9.00, 9.50 | 18.50 | 0.93x | 3.10 |",
        "| sentence fp32 | padding-free | no | 4 | 4.50, 4.50, 4.60, 4.80 | 18.40 | 0.92x | 3.10 |",
        "| sentence fp32 | padding-free | yes | 4 | 4.50, 4.50, 4.60, 4.80 | 18.40 | 1.42x | 3.10 |",
        "| vision macl batch 64 | graph | no | 2 |",
        "| vision macl batch 64 | — | yes | — | not measured: no MPS |",
        "of 32 sentences (not their process's first) less those sentences' FLOPs",
        f"at STS-B dev's {STSB_DEV_SENTENCES}: the fixed cost of one evaluation, not scaled",
    ):
        assert line in report, line
    written = json.loads(Path(Results(tmp_path).calibration).read_text())
    assert written["packing"]["measured"] is True
    assert written["packing"]["speedup"] == {"fp32": {"2": 0.925, "4": 0.92}}
    assert written["packing"]["speedup_mps"] == {"fp32": {"2": 1.425, "4": 1.42}}
    # an image step's figures by the batch they were measured at (the plan prices that batch's cells only)
    assert written["packing"]["vision_speedup_b64"] == {"bf16": {"2": 0.925, "4": 0.92}}
    assert "vision_speedup" not in written["packing"]
    loaded = cl_calibration.load_calibration(Results(tmp_path).calibration)
    assert loaded.packing_measured and loaded.packing_speedup == {"fp32": {2: 0.925, 4: 0.92}}
    assert loaded.packing_variants["speedup_mps"] == {"fp32": {2: 1.425, 4: 1.42}}
    assert loaded.packing_variants["vision_speedup_b64"] == {"bf16": {2: 0.925, 4: 0.92}}


def test_a_partial_check_leaves_a_calibration_make_plan_reads_and_names_what_is_missing(tmp_path):
    row = R.cell_row(
        _summary(steady_train_s=8.0, steady_steps=90), PLAN_STEP_FLOPS, "sentence fp32", "sentence"
    )
    report = R.write_report(tmp_path, [row], ENV, {}, missing=("checks", "packing")).read_text()
    assert "- parts done: cells" in report
    assert "- not done (the check stopped or has not reached them yet): checks, packing" in report
    assert "## Checks\n\nNot run yet." in report
    written = json.loads(Path(Results(tmp_path).calibration).read_text())
    assert written["missing_parts"] == ["checks", "packing"] and "packing" not in written
    assert written["source"].endswith("without its checks, packing part")
    loaded = cl_calibration.load_calibration(Results(tmp_path).calibration)
    assert loaded.missing_parts == ("checks", "packing")
    assert loaded.achieved_tflops["sentence"]["fp32"] == pytest.approx(PLAN_STEP_FLOPS * 90 / 8.0 / 1e12)
    assert "make gpu-check stopped before its checks, packing part" in loaded.describe()
    # not measured here, and packing figures are one card's: none taken from the default file
    assert loaded.packing_speedup == {} and not loaded.packing_measured


def _stand_in_mps(folder: Path, exit_code: int = 0) -> Path:
    """An nvidia-cuda-mps-control that records each call (its arguments, pipe folder, standard input)."""
    log = folder / "calls.log"
    program = folder / "bin" / "nvidia-cuda-mps-control"
    program.parent.mkdir()
    program.write_text(
        "#!/bin/sh\n"
        f'input=""; [ "$#" -eq 0 ] && input=$(cat)\n'
        f'echo "args=$* pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY stdin=$input" >> {log}\n'
        f"exit {exit_code}\n"
    )
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    return log


def _recording_pool(calls: list):
    def pool(builds, counts, *, steps, timeout, env, forkserver_preload):
        calls.append(
            {"env": dict(env), "pipe_exists": Path(env.get("CUDA_MPS_PIPE_DIRECTORY", "/-")).is_dir()}
        )
        return {name: _packing_series(False)[0]["rows"] for name in builds}

    return pool


def test_packing_runs_again_under_a_private_mps_daemon_started_and_stopped_around_it(tmp_path, monkeypatch):
    log = _stand_in_mps(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    calls, rounds = [], []
    series = {"sentence fp32": ("sentence", "fp32", None, 64)}
    out = gpu_check.measure_packing(series, steps=3, pool=_recording_pool(calls), done=rounds.append)
    assert [s["mps"] for s in out] == [False, True] and all(s["rows"] for s in out)
    assert [len(r) for r in rounds] == [1, 2]  # the report written after each round
    assert calls[0]["env"] == {}  # the first round: no daemon
    pipe = calls[1]["env"]["CUDA_MPS_PIPE_DIRECTORY"]
    assert calls[1]["env"] == {"CUDA_MPS_PIPE_DIRECTORY": pipe, "CUDA_MPS_LOG_DIRECTORY": pipe}
    assert calls[1]["pipe_exists"] and not Path(pipe).exists()  # a private folder, removed afterwards
    assert log.read_text().splitlines() == [
        f"args=-d pipe={pipe} log={pipe} stdin=",  # started in the background
        f"args= pipe={pipe} log={pipe} stdin=quit",  # and stopped
    ]
    assert "CUDA_MPS_PIPE_DIRECTORY" not in os.environ  # this process never joined it


def test_without_mps_the_second_round_says_so_and_a_daemon_that_fails_is_not_stopped(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    calls: list = []
    series = {"sentence fp32": ("sentence", "fp32", None, 64)}
    out = gpu_check.measure_packing(series, steps=3, pool=_recording_pool(calls))
    assert len(calls) == 1 and "nvidia-cuda-mps-control is not on PATH" in out[1]["error"]
    log = _stand_in_mps(tmp_path, exit_code=1)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    out = gpu_check.measure_packing(series, steps=3, pool=_recording_pool(calls))
    assert "did not start" in out[1]["error"] and len(log.read_text().splitlines()) == 1  # no quit sent


def test_a_failed_packing_round_is_a_row_with_its_error_and_the_check_goes_on():
    def failing(*args, **kwargs):
        raise RuntimeError("packing: worker 2 failed: OutOfMemoryError: CUDA out of memory")

    series = {"sentence bf16": ("sentence", "bf16", None, 64)}
    out = gpu_check.measure_packing(series, steps=3, pool=failing)
    error = "packing: worker 2 failed: OutOfMemoryError: CUDA out of memory"
    assert out[0] == {"step": "sentence bf16", "track": "sentence", "precision": "bf16", "batch": 64,
                      "mps": False, "error": error}  # fmt: skip


# A trainer's snapshots as the runtime submits them (contrastlab.training.runtime.save_snapshot: submit, then
# the marker), its steps 2 ms each and each snapshot's write slow (argv: state folder, steps, state_every,
# write seconds); "finished" once its last write is on disk, as a cell's end.
STAND_IN_TRAINER = """
import sys, time
from pathlib import Path
from contrastlab.training import state as st
from contrastlab.training.snapshots import SnapshotWriter, note_submitted
state_dir, steps, every, write_s = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
writer = SnapshotWriter()
for step in range(1, steps + 1):
    time.sleep(0.002)
    if step % every == 0:
        writer.wait()
        def write(step=step):
            time.sleep(write_s)  # BERT-base's 1.3 GB with fsync, on a slow disk
            st.save_state(state_dir, {"step": step}, {"step": step})
        writer.submit(write)
        note_submitted(state_dir, step, writer.writes)
writer.wait()
(state_dir / "finished").write_text("the cell ended")
"""


@pytest.mark.fault(
    "gpu-check's kill of the fp16 cell racing the cell's end, its snapshots written in the background (R1)",
    "the kill lands when the second snapshot is submitted: the first complete on disk, the cell not ended",
)
def test_the_kill_lands_before_the_fp16_cells_end_with_a_slow_snapshot_writer(tmp_path):
    """gpu-check kills the preset's fp16 cell when the trainer's marker says its second snapshot was
    submitted with the first on disk, so the kill cannot come after the cell's end."""
    grid = cl_config.Grid(cl_config.load(gpu_check.PRESET))
    settings = grid.settings_copy(next(c for c in grid.cells if c.method == gpu_check.KILLED_METHOD))
    steps, every = settings["max_steps"], settings["state_every"]
    command = [sys.executable, "-c", STAND_IN_TRAINER, str(tmp_path), str(steps), str(every), "0.5"]
    marker = tmp_path / snapshots.MARKER
    killed = gpu_check._kill_after_first_snapshot(command, marker, timeout_s=120, cwd=str(tmp_path))
    assert killed and not (tmp_path / "finished").exists()
    assert json.loads((tmp_path / "state.json").read_text()) == {"step": every}  # resumable from there
    assert json.loads(marker.read_text())["step"] == 2 * every < steps


def test_the_plan_says_first_which_figures_are_assumed_and_whether_its_start_ups_are(tmp_path):
    """The plan's first lines say the shipped file's start-ups are assumed; a measured calibration's are
    not, and a figure it lacks takes the shipped file's status with its value."""
    shipped = cl_calibration.load_calibration(cl_calibration.DEFAULT_CALIBRATION)
    figures = ("overheads_s.train_startup", "overheads_s.dev_evaluation", "achieved_tflops.vision.bf16")
    assert [provenance.figure_status(shipped, f) for f in figures] == ["assumed", "measured", "assumed"]
    first = provenance.status_items(shipped)
    assert first[0].startswith("**Start-ups assumed, not measured on a card** (train_startup 60 s, ")
    assert first[1].startswith("Figures: 14 measured on a card, 13 assumed (evaluate_startup, ")
    measured = _calibration_of_2026_11_28(tmp_path)
    assert provenance.figure_status(measured, "overheads_s.train_startup") == "measured"
    assert provenance.figure_status(measured, "achieved_tflops.sentence.fp32") == "measured"  # the shipped's
    assert provenance.figure_status(measured, "overheads_s.senteval_probe_test") == "assumed"  # the shipped's
    assert not any("Start-ups assumed" in item for item in provenance.status_items(measured))
    assert provenance.moved_rules({}, shipped) == []  # the shipped file against itself: nothing to say
