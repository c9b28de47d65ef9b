"""The shipped calibrations (contrastlab.cost.rows): rebuilt from the H200's raw rows and its gpu_bench.json;
gpu_bench.json's rows read; the plan's model
reproduces gpu-plan.md §1's repricing with them; ``resources.gpu_model`` picks the file; the trainer's
CUDA defaults (one CUDA graph per step, dev batch 512) are what the plan prices; the summary's lines."""

from __future__ import annotations

import dataclasses
import functools
import json
import operator

import pytest

from contrastlab import config as cl_config
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import flops as cl_flops
from contrastlab.cost import plan, rows, summary
from contrastlab.paths import REPO_ROOT
from tests.cost.common import (
    CHOICES,
    H100,
    H200,
    MACL,
    MACL_IMAGES,
    OAR,
    config_grid,
    config_totals,
    config_work,
    config_yaml,
)


@pytest.mark.shared
def test_the_shipped_files_rebuild_from_the_h200_rows_and_its_gpu_bench(shared):
    folder = shared / "docs" / "gpu-h200-2026-11-26"
    if not folder.is_dir():
        pytest.skip(f"{folder} is not in this ../shared")
    h200, h100 = rows.build(folder, REPO_ROOT / rows.H200_BENCH, REPO_ROOT / rows.H200_PADFREE_BENCH)
    assert h200 == json.loads(H200.read_text())
    assert h100 == json.loads(H100.read_text())
    # without the bench, the rows' own figures: gpu-plan.md's inputs (see _gpu_plan_calibration)
    alone = rows.calibration_from_rows(rows.read_rows(folder), rows.H200_MACHINE)
    figures = {keys: functools.reduce(operator.getitem, keys, alone) for keys in GPU_PLAN_FIGURES}
    assert figures == GPU_PLAN_FIGURES
    assert "measured_source" not in alone and h200["measured_source"].startswith("achieved_tflops.sentence")


def _bench_row(part: str, **fields) -> dict:
    return {"part": part, "part_s": 1.0} | fields


#: A gpu_bench.json in small: the rows bench_figures reads, beside rows it must pass over.
BENCH = {
    "environment": {"device": "NVIDIA H200", "transformers": "5.23.0", "date": "2026-11-26"},
    "rows": [
        _bench_row(
            "spread", check="spread", precision="bf16", graph_steps_per_s=78.2, eager_steps_per_s=36.9
        ),
        _bench_row(
            "spread", check="spread", precision="fp32", graph_steps_per_s=17.9, eager_steps_per_s=17.6
        ),
        _bench_row(
            "cell", precision="bf16", cuda_graph=True, dev_batch_size=512, steps=15625, steps_per_s=77.0
        )
        | {"dev_evaluations": 126, "dev_s_per_evaluation": 0.3},
        _bench_row("macl", precision="bf16", batch_size=256, augment_calls="two", cudnn_benchmark=True)
        | {"steps_per_s": 51.5},
        _bench_row("macl", precision="bf16", batch_size=256, augment_calls="one", cudnn_benchmark=True)
        | {"steps_per_s": 62.5},
        _bench_row("oar", precision="fp32", batch_size=128, augment_calls="two", cudnn_benchmark=True)
        | {"steps_per_s": 5.9},
        _bench_row("oar", precision="fp32", batch_size=128, augment_calls="two", cudnn_benchmark=False)
        | {"steps_per_s": 5.4},
        _bench_row("pack", error="skipped: --budget-s 445 reached"),
    ],
}


def test_bench_figures_reads_the_trainer_default_rows_of_a_gpu_bench_json():
    assert rows.bench_figures(BENCH) == {
        "device": "NVIDIA H200",
        "transformers": "5.23.0",
        "spread": {"bf16": 78.2, "fp32": 17.9},
        "cell_steps": 15625,
        "sentence_bf16": 77.0,
        "dev_evaluations": 126,
        "dev_per_eval": 0.3,
        "oar_fp32": 5.9,  # cudnn.benchmark on, the trainer's default
        "macl_bf16": 51.5,  # two augmentation calls, the trainer's default
    }
    no_cell = {**BENCH, "rows": [r for r in BENCH["rows"] if r["part"] != "cell"]}
    with pytest.raises(ValueError, match="0 rows with {'part': 'cell'"):
        rows.bench_figures(no_cell)
    twice = {**BENCH, "rows": [*BENCH["rows"], BENCH["rows"][5]]}
    with pytest.raises(ValueError, match="2 rows with {'part': 'oar'"):
        rows.bench_figures(twice)


def test_the_committed_gpu_bench_json_gives_the_figures_the_h200_file_quotes():
    bench = rows.read_bench(REPO_ROOT / rows.H200_BENCH)
    assert bench["path"] == rows.H200_BENCH
    assert (bench["sentence_bf16"], bench["dev_per_eval"]) == pytest.approx((77.37, 0.2927), abs=5e-3)
    assert (bench["oar_fp32"], bench["macl_bf16"]) == (5.916, 51.587)
    data = json.loads(H200.read_text())
    assert data["bench"] == rows.H200_BENCH and "15,625 steps at 77.37 steps/s" in data["measured_source"]


def test_the_h200_file_names_its_machine_and_what_is_measured():
    data = json.loads(H200.read_text())
    machine = ("NVIDIA H200", "580.159.04", "2.11.0+cu130", "2026-11-26")
    assert (data["gpu"], data["driver"], data["torch"], data["date"]) == machine
    assert data["measured"] is True
    # the trainer's graph rates (17.8, 52.9, 75.6 steps/s of 2.09 TFLOP; bf16 the full cell's 77.37)
    assert data["achieved_tflops"]["sentence"] == dict(fp32=37.2, tf32=110.52, bf16=161.73, fp16=157.95)
    entries = data["measured_entries"] + data["assumed_entries"]
    assert len(set(entries)) == len(entries)  # each figure is one or the other
    for track, by in data["achieved_tflops"].items():
        assert all(f"achieved_tflops.{track}.{p}" in entries for p in by)
    cal = cl_calibration.load_calibration(H200)
    assert cal.measured and not cal.filled_from_default
    assert f"except {len(data['assumed_entries'])} figures assumed" in cal.describe()


def test_the_h200_file_prices_the_measured_steps():
    """gpu_bench.json: OAR ResNet-18 224 px fp32 5.916 steps/s (cudnn.benchmark on), MACL batch 256 bf16
    51.6 (two augmentation calls, host-bound), the full BERT-base bf16 cell 77.37 (graph on);
    gpu-measured.md: OAR tf32 / bf16 13.96 / 18.08."""
    cal = cl_calibration.load_calibration(H200)
    for precision, rate in (("fp32", 5.916), ("tf32", 13.956), ("bf16", 18.077)):
        work = config_work(OAR, precision=precision)
        assert 1 / cl_calibration.step_seconds(work, cal) == pytest.approx(rate, rel=2e-3), precision
    macl = config_work(MACL_IMAGES, cuda_graph=False)
    assert macl.rate_class == "vision" and macl.step_launches == rows.MACL_LAUNCHES == 875
    assert 1 / cl_calibration.step_seconds(macl, cal) == pytest.approx(51.587, rel=2e-3)
    bert = config_work(MACL, precision="bf16")
    assert bert.graphed and bert.rate_class == "sentence"
    assert 1 / cl_calibration.step_seconds(bert, cal) == pytest.approx(77.37, rel=1e-3)
    # the dev evaluation at 512 as the full cell measured it, 0.2927 s (its FLOPs in IEEE fp32 included)
    dev = cal.seconds(2.0 * rows.BERT_BASE * cl_flops.STSB_DEV_TOKENS, "sentence", "fp32")
    per_eval = dev + cal.overheads_s["dev_evaluation"] + 6 * cal.overheads_s["dev_call"]
    assert per_eval == pytest.approx(0.2927, abs=2e-4)


def test_the_trainers_cuda_defaults_are_priced_and_an_explicit_setting_wins():
    cal = cl_calibration.load_calibration(H200)
    graph, eager = config_work(MACL), config_work(MACL, cuda_graph=False)
    assert graph.graphed and not eager.graphed and not config_work(MACL, grad_accum=2).graphed
    launches = eager.step_launches * cal.overheads_s["sentence_launch"]
    flop_s = cal.seconds(eager.step_flops, "sentence", eager.precision)
    assert cl_calibration.step_seconds(graph, cal) == pytest.approx(flop_s)
    assert cl_calibration.step_seconds(eager, cal) == pytest.approx(max(flop_s, launches))
    # the dev set in batches of 512 on CUDA: 6 encoder calls per STS-B dev evaluation; 128: 23
    assert graph.dev_calls == 6 * graph.dev_evaluations
    assert config_work(MACL, dev_batch_size=128).dev_calls == 23 * graph.dev_evaluations


#: The H200 file's figures that gpu_bench.json (after gpu-plan.md) replaced, as gpu-plan.md priced them
#: from the raw rows alone: the bf16 graph row, OAR's fp32 row with cudnn.benchmark off, MACL's eager row.
GPU_PLAN_FIGURES = {
    ("achieved_tflops", "sentence", "bf16"): 160.3,
    ("achieved_tflops", "vision_large", "fp32"): 33.05,
    ("achieved_tflops", "vision", "fp32"): 30.26,
    ("overheads_s", "vision_launch"): 2.175e-05,
}


def _gpu_plan_calibration(cal: cl_calibration.Calibration, launch: float, dev: float):
    """gpu-plan.md §1's repricing from the H200 file with its figures (:data:`GPU_PLAN_FIGURES`): OAR's
    whole-step rates (augmentation inside), ``dev`` seconds per dev evaluation (its FLOPs included),
    ``launch`` seconds per eager launch."""
    achieved = {k: dict(v) for k, v in cal.achieved_tflops.items()}
    for keys, value in GPU_PLAN_FIGURES.items():
        if keys[0] == "achieved_tflops":
            achieved[keys[1]][keys[2]] = value
    cal = dataclasses.replace(
        cal,
        achieved_tflops=achieved,
        overheads_s={**cal.overheads_s, "vision_launch": GPU_PLAN_FIGURES[("overheads_s", "vision_launch")]},
    )
    oar = cl_flops.cell_work(config_grid(), OAR)
    augment = oar.step_images * cal.overheads_s["vision_large_image"]
    whole = {
        p: oar.step_flops / (oar.step_flops / (rate * 1e12) + augment) / 1e12
        for p, rate in cal.achieved_tflops["vision_large"].items()
    }
    dev_flops = 2.0 * rows.BERT_BASE * cl_flops.STSB_DEV_TOKENS
    overheads = {"vision_large_image": 0.0, "dev_call": 0.0, "sentence_launch": launch}
    overheads["dev_evaluation"] = dev - cal.seconds(dev_flops, "sentence", "fp32")
    return dataclasses.replace(
        cal,
        achieved_tflops={**cal.achieved_tflops, "vision_large": whole},
        overheads_s={**cal.overheads_s, **overheads},
    )


#: gpu-plan.md priced the image steps eager (before the captured image step of issue 55).
EAGER_IMAGES = {"cuda_graph": False}


def test_the_plan_reproduces_gpu_plans_repricing():
    """gpu-plan.md §1's table, from the H200 file by its method (MACL bf16 160 est., dev 0.45 s with the
    switches, 0.53 s and 26.5 µs per launch with eager sentence steps and dev batch 128)."""
    cal = cl_calibration.load_calibration(H200)
    switches = _gpu_plan_calibration(cal, 0.0, 0.45)
    one_call = EAGER_IMAGES | {"augment_calls": "one"}
    # gpu-plan.md priced padded sentence steps (before issue 55's padding-free default)
    switched = config_totals(switches, one_call, padding_free=False)
    assert switched == [214.1, 246.5, 108.2, 85.5]  # gpu-plan: 214.1, 246.5, 108.1 (tf32 110.6), 85.5
    today = config_totals(
        _gpu_plan_calibration(cal, 26.5e-6, 0.53),
        EAGER_IMAGES,
        cuda_graph=False,
        dev_batch_size=128,
        padding_free=False,
    )
    assert today == [223.5, 250.1, 116.3, 105.6]  # gpu-plan: 223.5, 250.1, 116.3, 105.7
    # its padding-free lever, "-19 h fp32 sentence as configured": 214.1 -> 199.0 at the measured ratio
    padding_free = config_totals(switches, one_call)
    assert padding_free == [199.0, 230.1, 108.2, 85.5]


def test_gpu_model_picks_the_measured_file_else_scales_and_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(cl_calibration, "measured_calibration", lambda: tmp_path / "none.json")
    assert cl_calibration.calibration_for(None).path.endswith("calibration_h200.json)")
    assert cl_calibration.calibration_for("H200").path.endswith("calibration_h200.json)")
    h100 = cl_calibration.calibration_for("h100")
    assert h100.path.endswith("calibration_h100.json)") and not h100.note
    a100 = cl_calibration.calibration_for("A100")
    assert a100.describe().startswith("no measured calibration for the A100: NVIDIA H200's figures scaled")
    peaks = cl_calibration.GPU_PEAKS
    h200 = cl_calibration.load_calibration(H200)
    ratio = peaks["A100"]["tf32"] / peaks["H200"]["tf32"]
    scaled = h200.achieved_tflops["sentence"]["tf32"] * ratio
    assert a100.achieved_tflops["sentence"]["tf32"] == pytest.approx(scaled)
    with pytest.raises(
        ValueError, match="resources.gpu_model 'K80' has no data-sheet peaks here; use one of"
    ):
        cl_calibration.calibration_for("K80")


def test_the_summary_states_totals_fp32_share_floor_and_the_8_gpu_makespan(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cl_calibration, "measured_calibration", lambda: tmp_path / "none.json")
    config = config_yaml()
    plan.plan_report(config, "config", None, tmp_path, title="config.yaml", gpu_model="H200")
    out = capsys.readouterr().out
    grid = cl_config.Grid(config)
    jobs = plan.make_plan(grid, cl_calibration.load_calibration(H200))
    works = {c.path: cl_flops.cell_work(grid, c) for c in grid.cells}
    fp32 = [w for w in works.values() if w.precision == "fp32"]
    floor = sum(w.train_flops for w in fp32) / 67e12 / 3600  # the H200's fp32 data-sheet peak
    hours, computed_floor = summary.fp32_hours(jobs, works, "H200")
    assert computed_floor == pytest.approx(floor)
    # gpu-plan.md: 74.5 × 37.2/67 + 98.2 × 30.3/67 ≈ 86 padded; the padding-free sentence steps do
    # 0.686 of the FLOPs (wiki1m's 21.9 of 32 tokens): 74.5 × 0.686 × 37.2/67 + 98.2 × 30.3/67 ≈ 72.8
    assert 72 < floor < 73.5
    totals = [plan.total_hours(jobs, c) for c in CHOICES]
    assert f"- GPU-hours: **{totals[0]:.1f} as configured**; {totals[1]:.1f} all fp32, " in out
    assert f"IEEE fp32: {hours:.1f} of the {totals[0]:.1f} GPU-h ({hours / totals[0]:.0%})" in out
    assert f"would still take {floor:.1f} GPU-h (the fp32 floor" in out
    assert "- Makespan on one 8-GPU node: " in out and "### Summary (H200)" in out
    assert 178.5 < totals[0] < 179.5
