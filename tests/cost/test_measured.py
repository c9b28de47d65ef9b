"""The cost table (contrastlab.cost.measured) on synthetic benchmark files and training logs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from contrastlab import config as cl_config
from contrastlab.blocks import markdown_lines
from contrastlab.cost.measured import (
    cost_blocks,
    hms,
    migrate_benchmarks,
    per_cell,
    per_paper,
    per_rule,
    per_training_job,
    read_benchmark,
    read_job_costs,
    start_text,
    warm_usage_path,
)
from contrastlab.paths import REPO_ROOT, Results
from contrastlab.report import build_report

MPT, CL = "nie2023/bert-base/mpt/seed42", "nie2023/bert-base/cl/seed42"
MACL = "macl_cifar10/resnet18-cifar/macl-bs256/seed1"
HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def cost_lines(*args) -> list[str]:
    """The report's cost section as its Markdown lines."""
    return markdown_lines(cost_blocks(*args))


def bench(results: Path, relative: str, *rows: tuple[float, str]) -> None:
    """A Snakemake benchmark TSV with one row per (wall seconds, max_rss) repeat."""
    path = results / "benchmarks" / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(f"{s}\t0:00:00\t{rss}\t1\t1\t1\t0\t0\t50\t1\n" for s, rss in rows)
    path.write_text(HEADER + body)


def train_log(results: Path, cell: str, device: str, peak: float | None, *, vision: bool = False) -> None:
    folder = results / "checkpoints" / cell
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ("encoder" if vision else "model")).mkdir()
    events = [
        {"event": "start", "device": device, "settings": {}},
        {"event": "train", "step": 1, "loss": 1.0},
        {"event": "end", "steps": 10, "peak_gpu_memory_gib": peak},
    ]
    (folder / "train_log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def metrics(results: Path, cell: str, payload: dict, name: str = "senteval.json") -> None:
    folder = results / "metrics" / cell
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(payload))


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """Two Nie cells (one trained and encoded on a GPU, one on the CPU), a vision cell on a GPU, a
    Pretrained row encoded on a GPU and an analytic figure, each job's file in its rule's folder. The
    SentEval probe jobs ran on the CPU."""
    r = tmp_path / "results"
    train_log(r, MPT, "cuda", 11.5)
    bench(r, "train/nie2023/bert-base/mpt/seed42.tsv", (5400.0, "20480.4"))
    bench(r, "encode/nie2023/bert-base/mpt/seed42.tsv", (180.0, "6000"))
    bench(r, "evaluate/nie2023/bert-base/mpt/seed42.tsv", (600.0, "8000"))
    metrics(r, MPT, {"scores": {}, "encoding": {"device": "cuda"}})
    train_log(r, CL, "cpu", None)
    bench(r, "train/nie2023/bert-base/cl/seed42.tsv", (100.0, "3000"), (140.0, "NA"))  # two repeats
    bench(r, "encode/nie2023/bert-base/cl/seed42.tsv", (36.0, "2000"))
    metrics(r, CL, {"scores": {}, "encoding": {"device": "cpu"}})
    train_log(r, MACL, "cuda:0", 3.25, vision=True)
    bench(r, "train_vision/macl_cifar10/resnet18-cifar/macl-bs256/seed1.tsv", (1800.0, "4096"))
    # features on the GPU, probes on the CPU
    metrics(r, MACL, {"scores": {}, "device": "cpu", "encoding": {"device": "cuda"}}, "vision.json")
    bench(r, "encode_vision/macl_cifar10/resnet18-cifar/macl-bs256/seed1.tsv", (360.0, "2048"))
    bench(r, "evaluate_vision/macl_cifar10/resnet18-cifar/macl-bs256/seed1.tsv", (300.0, "2048"))
    bench(r, "encode_pretrained/pretrained/bert-base.tsv", (72.0, "5000"))
    bench(r, "evaluate_pretrained/pretrained/bert-base.tsv", (30.0, "5000"))
    metrics(r, "pretrained/bert-base", {"scores": {}, "encoding": {"device": "cuda"}})
    bench(r, "figure_analytic_li2024.tsv", (90.0, "700"))
    return r


def test_read_benchmark_averages_repeats_and_ignores_unmeasured_memory(results):
    seconds, rss = read_benchmark(results / "benchmarks/train/nie2023/bert-base/cl/seed42.tsv")
    assert seconds == pytest.approx(120.0) and rss == pytest.approx(3000.0)


def test_a_warm_jobs_own_peak_memory_replaces_the_handing_over_process(results):
    """A job started warm (contrastlab.workflow.warm) wrote its own peak beside the benchmark file, which
    measured only the small process that handed the job over; a record older than the benchmark file by
    more than a job's end is an earlier run's, and is not read."""
    tsv = results / "benchmarks/encode/nie2023/bert-base/cl/seed42.tsv"
    usage = warm_usage_path(tsv)
    assert usage == tsv.with_name("seed42.warm.json")
    usage.write_text(json.dumps({"max_rss": 2900.5, "cpu_time": 12.0}))
    bench(results, "encode/nie2023/bert-base/cl/seed42.tsv", (36.0, "26"))
    assert read_benchmark(tsv) == (36.0, 2900.5)
    written = tsv.stat().st_mtime
    os.utime(usage, (written - 3600, written - 3600))  # the job has since run again, cold
    assert read_benchmark(tsv) == (36.0, 26.0)
    usage.write_text("{not json")
    assert read_benchmark(tsv) == (36.0, 26.0)


def test_jobs_get_their_rule_paper_cell_and_gpu_hours_from_the_logs(results):
    jobs = {(j.rule, j.cell): j for j in read_job_costs(results)}
    # Every job that held a GPU counts: the training logged on one, the encodings whose metrics record a
    # CUDA device and the image features (vision.json's encoding.device); the probes ran on the CPU.
    assert {place: j.gpu_hours for place, j in jobs.items()} == {
        ("train", MPT): pytest.approx(1.5),
        ("encode", MPT): pytest.approx(0.05),
        ("evaluate", MPT): None,
        ("train", CL): None,  # logged on the CPU
        ("encode", CL): None,  # encoded on the CPU
        ("train_vision", MACL): pytest.approx(0.5),
        ("encode_vision", MACL): 0.1,
        ("evaluate_vision", MACL): None,
        ("encode_pretrained", "pretrained/bert-base"): pytest.approx(0.02),
        ("evaluate_pretrained", "pretrained/bert-base"): None,
        ("figure_analytic_li2024", ""): None,
    }
    gpu = jobs[("train", MPT)]
    assert gpu.peak_gpu_gib == 11.5 and gpu.paper == "nie2023"
    assert jobs[("figure_analytic_li2024", "")].paper == "li2024"


def test_an_encoding_whose_metrics_are_missing_counts_no_gpu_hours(results):
    """Until its probe job has written the metrics (or when they predate the split), an encoding job's
    device is unknown: "—", never a guess."""
    (results / "metrics/nie2023/bert-base/mpt/seed42/senteval.json").write_text('{"scores": {}}')
    (results / "metrics/pretrained/bert-base/senteval.json").unlink()
    jobs = {(j.rule, j.cell): j for j in read_job_costs(results)}
    assert jobs[("encode", MPT)].gpu_hours is None
    assert jobs[("encode_pretrained", "pretrained/bert-base")].gpu_hours is None


def test_per_paper_rule_and_cell_sums(results):
    jobs = read_job_costs(results)
    papers = {row["paper"]: row for row in per_paper(jobs)}
    assert set(papers) == {"nie2023", "macl", "pretrained", "li2024"}
    assert papers["nie2023"] == {
        "paper": "nie2023",
        "jobs": "5",
        "cells": "2",
        "wall": hms(5400 + 180 + 600 + 120 + 36),
        "peak RSS (MB)": "20480",
        "GPU-h": "1.55",  # training 1.5 and encoding 0.05 on the GPU; the probes and the CPU cell none
    }
    assert papers["li2024"]["GPU-h"] == "—" and papers["li2024"]["cells"] == "0"
    assert papers["pretrained"]["jobs"] == "2" and papers["pretrained"]["GPU-h"] == "0.02"
    rules = {row["rule"]: row for row in per_rule(jobs)}
    assert rules["train"]["jobs"] == "2" and rules["train"]["wall"] == "1:32:00"
    assert rules["train"]["mean per job"] == "0:46:00" and rules["train"]["GPU-h"] == "1.50"
    assert rules["encode"]["jobs"] == "2" and rules["encode"]["GPU-h"] == "0.05"
    assert rules["evaluate"]["GPU-h"] == "—" and rules["evaluate_pretrained"]["GPU-h"] == "—"
    cells = {row["cell"]: row for row in per_cell(jobs)}
    assert cells[MPT] == {
        "cell": MPT,
        "train": "1:30:00",
        "encode": "0:03:00",
        "evaluate": "0:10:00",
        "peak RSS (MB)": "20480",
        "peak GPU mem (GiB)": "11.5",
        "GPU-h": "1.55",
    }
    cl = cells[CL]
    assert (cl["evaluate"], cl["encode"], cl["peak GPU mem (GiB)"]) == ("—", "0:00:36", "—")
    vision = cells[MACL]
    assert vision["encode"] == "0:06:00" and vision["evaluate"] == "0:05:00" and vision["GPU-h"] == "0.60"
    assert "" not in cells and cells["pretrained/bert-base"]["encode"] == "0:01:12"


def test_a_search_winners_jobs_are_its_rules_and_count_as_its_cells_encoding_and_probes(tmp_path):
    cell = "nie2023/bert-base/mpt~searched/seed42"
    bench(tmp_path, f"search_encode/{cell}.tsv", (60.0, "100"))
    bench(tmp_path, f"search_evaluate/{cell}.tsv", (120.0, "100"))
    metrics(tmp_path, cell, {"scores": {}, "encoding": {"device": "cuda"}})
    jobs = read_job_costs(tmp_path)
    assert [(j.rule, j.cell, j.paper, j.gpu_hours) for j in jobs] == [
        ("search_encode", cell, "nie2023", pytest.approx(60 / 3600)),
        ("search_evaluate", cell, "nie2023", None),
    ]
    (row,) = per_cell(jobs)
    assert (row["encode"], row["evaluate"]) == ("0:01:00", "0:02:00")


MACL_TSV = f"{MACL}.tsv"
SEARCHED = "nie2023/bert-base/mpt~searched/seed42.tsv"
#: Where a run wrote these benchmark files before the folders were named by rule.
BEFORE_RULE_FOLDERS = {
    f"train_vision/{MACL_TSV}": f"train/{MACL_TSV}",
    f"encode_vision/{MACL_TSV}": f"encode/{MACL_TSV}",
    f"evaluate_vision/{MACL_TSV}": f"evaluate/{MACL_TSV}",
    "encode_pretrained/pretrained/bert-base.tsv": "encode/pretrained/bert-base.tsv",
    "evaluate_pretrained/pretrained/bert-base.tsv": "evaluate/pretrained/bert-base.tsv",
    "figure_analytic_li2024.tsv": "figures/li2024-analytic.tsv",
    f"search_encode/{SEARCHED}": f"encode/{SEARCHED}",
}


def test_migrate_benchmarks_moves_an_older_runs_files_to_their_rules_folders(results):
    bench(results, f"search_encode/{SEARCHED}", (60.0, "100"))
    expected = read_job_costs(results)
    root = results / "benchmarks"
    for new, old in BEFORE_RULE_FOLDERS.items():
        (root / old).parent.mkdir(parents=True, exist_ok=True)
        (root / new).rename(root / old)
    moves = migrate_benchmarks(results)
    moved = sorted((str(a.relative_to(root)), str(b.relative_to(root))) for a, b in moves)
    assert moved == sorted((old, new) for new, old in BEFORE_RULE_FOLDERS.items())
    assert read_job_costs(results) == expected  # the sentence cells' train/, encode/, evaluate/ stay
    assert migrate_benchmarks(results) == []


def test_cost_lines_without_benchmarks_say_so_in_one_line(tmp_path):
    lines = [line for line in cost_lines(tmp_path / "results") if line]
    assert lines[0] == "## Cost" and len(lines) == 2 and "No benchmark files" in lines[1]


def test_the_report_shows_the_cost_section(results, tmp_path):
    config = {"seeds": [42], "experiments": {"macl": {"backbones": ["bert-base"], "methods": {}}}}
    build_report(Results(results), config)
    text = (results / "report.md").read_text()
    section = text[text.index("## Cost") :]
    for title in ("### Per paper", "### Per rule", "### Per cell"):
        assert title in section
    assert "| nie2023 | 5 | 2 | 1:45:36 | 20480 | 1.55 |" in section
    assert "| train_vision | 1 | 0:30:00 | 0:30:00 | 4096 | 0.50 |" in section
    # Without benchmark files the report is still written, with the one line.
    build_report(Results(tmp_path / "empty"), config)
    assert "No benchmark files under" in (tmp_path / "empty" / "report.md").read_text()


def test_a_damaged_benchmark_file_names_itself_and_the_report_leaves_it_out_and_says_so(results):
    bench(results, "train/nie2023/bert-base/dcl/seed42.tsv", ("NA", "1"))
    with pytest.raises(ValueError, match="dcl/seed42.tsv"):
        read_job_costs(results)
    text = "\n".join(cost_lines(results))
    assert "Left out: 1 benchmark files without a wall time" in text and "dcl/seed42.tsv" in text
    assert "| nie2023 | 5 | 2 |" in text


def test_projected_gpu_hours_stand_beside_the_measured_ones(results):
    projected = {"paper": {"nie2023": 2.0, "macl": 0.25}, "rule": {"train": 1.75}, "cell": {MPT: 1.25}}
    text = "\n".join(cost_lines(results, projected, "Projected GPU-h: as the plan says."))
    assert "Projected GPU-h: as the plan says." in text
    assert "| nie2023 | 5 | 2 | 1:45:36 | 20480 | 1.55 | 2.00 |" in text
    assert "| train | 2 | 1:32:00 | 0:46:00 | 20480 | 1.50 | 1.75 |" in text
    assert "| evaluate | 1 | 0:10:00 | 0:10:00 | 8000 | — | — |" in text  # no projection for the rule
    assert f"| {MPT} | 1:30:00 | 0:03:00 | 0:10:00 | 20480 | 11.5 | 1.55 | 1.25 |" in text
    # before any job ran: the projection alone
    alone = "\n".join(cost_lines(results / "nothing", projected))
    assert "### Projected, per paper" in alone and "| nie2023 | 2.00 |" in alone


def test_the_report_projects_a_real_config_beside_the_cost(tmp_path):
    config = cl_config.load(REPO_ROOT / "config" / "demo.yaml")
    build_report(Results(tmp_path), config)
    section = (tmp_path / "report.md").read_text().split("## Cost", 1)[1]
    assert "calibration: the shipped H200 file" in section and "### Projected, per rule" in section
    assert "| train_vision |" in section and "| encode_pretrained |" in section
    assert "| evaluate_pretrained |" not in section  # the CPU probe jobs are not GPU time


def test_the_cost_section_shows_where_each_training_jobs_time_went(tmp_path):
    """A training log's end record gives one row: how the job started, each phase, and the start-up
    outside its work (43 − 3.9 − 1.7 − 0.4 − 1.0 = 36.0 s), beside Snakemake's wall time."""
    r = tmp_path / "results"
    cell = "gpu_check/bert-base-random/bf16/seed42"
    train_log(r, cell, "cuda", 2.5)
    log = r / "checkpoints" / cell / "train_log.jsonl"
    timings = [  # (the phase's key in the log's end record, its column in the report, its seconds)
        ("interpreter_s", "interpreter", 10.5),
        ("imports_s", "imports", 9.0),
        ("cuda_init_s", "CUDA", 2.0),
        ("data_s", "data", 3.0),
        ("model_load_s", "model", 5.0),
        ("setup_s", "setup", 1.5),
        ("first_step_s", "1st step", 5.0),
        ("steps_s", "steps", 3.9),
        ("dev_s", "dev", 1.7),
        ("snapshots_s", "snapshots", 0.4),
        ("writes_s", "writes", 1.0),
        ("total_s", "total", 43.0),
    ]
    phases = {key: s for key, _, s in timings}
    start = {"warm": False, "why_cold": "starter refused: CUDA driver loaded by imports"}
    end = {"event": "end", "steps": 300, "peak_gpu_memory_gib": 2.5, "phases": phases, "start": start}
    log.write_text(log.read_text() + json.dumps(end) + "\n")
    bench(r, f"train/{cell}.tsv", (45.2, "3000"))
    bench(r, "train/nie2023/bert-base/cl/seed42.tsv", (100.0, "3000"))  # a log without phases: no row
    train_log(r, CL, "cpu", None)
    rows = per_training_job(read_job_costs(r))
    timed = {column: str(s) for _, column, s in timings}
    start_column = {"start": "cold (starter refused: CUDA driver loaded by imports)"}
    assert rows == [{"job": f"train {cell}", **start_column, **timed, "outside": "36.0", "job wall": "45.2"}]
    lines = cost_lines(r)
    assert "### Where the training jobs' time went" in lines
    assert any(line.startswith(f"| train {cell} | cold (starter refused") for line in lines)
    assert start_text(None) == "—" and start_text({"warm": False, "why_cold": None}) == "cold"
