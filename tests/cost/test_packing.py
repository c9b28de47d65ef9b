"""Several small cells per GPU (contrastlab.cost.packing, resources.gpu_share, resources.mps): which cells
share a GPU, the packed plan's arithmetic, and the speed-ups it prices: measured figures of the cell's step
with or without MPS only (the H200's of 2026-11-28: bf16 graph cells under MPS), never assumed ones."""

from __future__ import annotations

import dataclasses
import functools
import json
import multiprocessing.forkserver
import os
import re
import sys

import pytest
import torch

from contrastlab import config as cl_config
from contrastlab.blocks import to_markdown
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import flops as cl_flops
from contrastlab.cost import gpu_check, packing, packing_measure, plan, rows
from contrastlab.paths import REPO_ROOT
from contrastlab.precision import resolve
from tests.cost.common import H100, H200, config_grid, flat_rates, preset_grid, written_calibration
from tests.cost.test_plan import _toy_config


def _toy_grid(**resources) -> cl_config.Grid:
    return cl_config.Grid(_toy_config(seeds=(1,), resources=resources))


def _calibration(tmp_path, speedups=None) -> cl_calibration.Calibration:
    """1 TFLOP/s everywhere, 10 s start-up; ``speedups``: measured packing figures (else the default's)."""
    options = {"overheads_s": {"train_startup": 10}, "gpu_memory_gib": 80, "packing": {"speedup": speedups}}
    return written_calibration(tmp_path / "cal.json", flat_rates(), **options)


def test_a_cell_shares_with_the_largest_count_whose_peaks_fit_80_percent_of_the_card():
    # 80 GiB card: 64 GiB for the packed cells together (4 × 16 = 64); 100 GiB does not fit at all: alone
    # (the plan says so)
    assert [packing.cell_share(peak, 80.0, 4) for peak in (16.0, 16.1, 32.0, 32.1, 100.0)] == [4, 2, 2, 1, 1]
    # never more than resources.gpu_share; 1: off
    assert packing.cell_share(5.0, 80.0, 2) == 2 and packing.cell_share(5.0, 80.0, 1) == 1
    with pytest.raises(ValueError, match="resources.gpu_share must be one of 1, 2, 4, got 3"):
        packing.cell_share(5.0, 80.0, 3)


def test_the_speedup_is_the_largest_measured_count_up_to_the_share():
    figures = {2: 1.8, 4: 2.4}
    assert [packing.speedup(figures, share) for share in (4, 2, 1)] == [2.4, 1.8, 1.0]
    assert packing.speedup({2: 0.9}, 4) == 0.9  # 4 not measured: the figure of 2
    assert packing.speedup({}, 4) == 1.0  # no figure: priced as if alone


def test_a_training_jobs_share_fits_the_card_and_pays(tmp_path):
    cal = _calibration(tmp_path, {"fp32": {2: 1.5, 4: 2.0}})  # the toy's step: fp32 padding-free
    on = _toy_grid(gpu_share=4)
    cell = on.cells[0]
    work = cl_flops.cell_work(on, cell)
    assert work.peak_gib < 16 and packing.step_name(work) == "sentence fp32 padding-free"  # four fit
    assert packing.job_share(on, cell, lambda: cal) == 4

    def unread():  # off, or on the CPU: the calibration is never read (the DAG asks every job)
        raise AssertionError("the calibration was read")

    assert packing.job_share(_toy_grid(), cell, unread) == 1  # off by default
    assert packing.job_share(_toy_grid(gpu_share=4, gpu=0), cell, unread) == 1  # CPU jobs share nothing
    small_card = dataclasses.replace(cal, gpu_memory_gib=2.5 * work.peak_gib / 0.8)
    assert packing.job_share(on, cell, lambda: small_card) == 2  # two fit, not four
    # sharing must pay: the largest speed-up among the counts that fit, none above 1 is a GPU alone
    for figures, share in (({2: 1.3, 4: 1.2}, 2), ({2: 0.9, 4: 0.95}, 1)):
        paying = dataclasses.replace(cal, packing_speedup={"fp32": figures})
        assert packing.chosen_share(work, paying, 4, mps=False) == share
    # under MPS the MPS figures price: this calibration has none
    assert packing.job_share(_toy_grid(gpu_share=4, mps=True), cell, lambda: cal) == 1


def test_the_h200s_measured_figures_put_four_bf16_graph_cells_on_a_gpu_under_mps_and_nothing_else():
    """calibration_h200.json's packing (gpu-h200-2026-11-28, run 3): 2 and 4 captured bf16 BERT-base cells,
    93.37 / 76.6 = 1.219 with 4 and 88.70 / 76.6 = 1.158 with 2 under MPS, 72.70 / 76.6 = 0.949 without.
    Only that step (sentence, bf16, graph) has a figure: every other step keeps a GPU of its own."""
    h200 = cl_calibration.load_calibration(H200)
    assert h200.packing_measured and "gpu-h200-2026-11-28" in h200.packing_source
    assert h200.packing_speedup == {"bf16": {2: 0.949, 4: 0.949}}
    assert h200.packing_variants == {"speedup_mps": {"bf16": {2: 1.158, 4: 1.219}}}
    toy = cl_flops.cell_work(_toy_grid(), _toy_grid().cells[0])
    bf16 = dataclasses.replace(toy, precision="bf16", graphed=True, padding_free=False)
    assert packing.step_name(bf16) == "sentence bf16 graph"
    assert [packing.chosen_share(bf16, h200, n, mps=True) for n in (1, 2, 4)] == [1, 2, 4]
    assert packing.chosen_share(bf16, h200, 4, mps=False) == 1  # 0.949: time-sliced, no gain
    assert packing.packed_seconds(1219.0, bf16, 4, h200, mps=True) == pytest.approx(1000.0)
    assert packing.packed_seconds(1158.0, bf16, 2, h200, mps=True) == pytest.approx(1000.0)
    others = {
        "fp32 padding-free (not packed on the H200)": toy,
        "bf16 eager (the figure is the graph step's)": dataclasses.replace(bf16, graphed=False),
        "fp16 graph (not packed)": dataclasses.replace(bf16, precision="fp16"),
        "image bf16 graph (MACL's: not packed)": dataclasses.replace(bf16, track="vision", rates="vision"),
    }
    for what, work in others.items():
        assert packing.step_figures(work, h200, mps=True) == {}, what
        assert packing.chosen_share(work, h200, 4, mps=True) == 1, what
    # figures measured on another card, or assumed, price nothing
    a100 = cl_calibration.calibration_for("A100")
    h100 = cl_calibration.load_calibration(H100)
    cut_short = dataclasses.replace(h200, missing_parts=("packing",))
    for calibration in (a100, h100, cut_short):
        assert packing.chosen_share(bf16, calibration, 4, mps=True) == 1


def test_the_h200_files_packing_is_its_pack_rows_over_one_cell_alone():
    built = rows.h200_packing(REPO_ROOT / rows.H200_PACK)
    assert built == json.loads(H200.read_text())["packing"]
    # by hand, from pack.json's sums: 72.6953 and 72.7019 without MPS, 88.6979 and 93.3715 with it
    assert built["speedup"] == {"bf16": {"2": 0.949, "4": 0.949}}
    assert built["speedup_mps"] == {"bf16": {"2": 1.158, "4": 1.219}}


def test_the_packed_plan_divides_training_by_the_measured_speedup(tmp_path):
    cal = _calibration(tmp_path, {"fp32": {2: 1.5, 4: 2.0}, "bf16": {2: 1.8, 4: 3.0}})
    assert cal.packing_measured and cal.packing_speedup["fp32"] == {2: 1.5, 4: 2.0}
    alone = plan.make_plan(_toy_grid(), cal)
    packed = plan.make_plan(_toy_grid(gpu_share=4), cal)
    for a, p in zip(alone, packed, strict=True):
        if a.rule == "train":
            assert p.share == 4 and a.share == 1
            assert p.seconds["config"] == pytest.approx(a.seconds["config"] / 2.0)  # fp32 as configured
            assert p.seconds["bf16"] == pytest.approx(a.seconds["bf16"] / 3.0)
            assert p.seconds["tf32"] == a.seconds["tf32"]  # no tf32 figure
        else:
            assert p.seconds == a.seconds and p.share == 1  # the encoding keeps its GPU
    lines = to_markdown(plan.plan_blocks(_toy_grid(gpu_share=4), packed, cal, "config"))
    assert "GPU sharing on (`resources.gpu_share: 4`, without MPS" in lines
    assert "1 training jobs 4 per GPU" in lines
    assert (
        "speed-ups measured: sentence fp32 padding-free without MPS 1.50× with 2, 2.00× with 4; sentence "
        "bf16 graph without MPS 1.80× with 2, 3.00× with 4; "
        "any other step (an image cell at a batch not measured too) is assumed not to gain and priced as if "
        "alone" in lines
    )
    assert "| jobs per GPU |" in lines
    off = to_markdown(plan.plan_blocks(_toy_grid(), alone, cal, "config"))
    assert "GPU sharing: off" in off and "| jobs per GPU |" not in off
    # under MPS this calibration has no figure: nothing shares, and the plan says which steps lack one
    mps = _toy_grid(gpu_share=4, mps=True)
    text = to_markdown(packing.packing_blocks(mps, plan.make_plan(mps, cal), cal))
    assert "no training job shares a GPU. No measured figure under MPS for sentence fp32 padding-free" in text


def test_with_mps_the_plan_packs_the_bf16_cells_and_keeps_179_as_configured():
    """config.yaml priced with the H200 file: as configured no cell's step has a measured figure (fp32
    padding-free, fp16 graph, the image steps), so 179.0 GPU-h with MPS or without; all in bf16 the 222
    sentence cells run four to a GPU under MPS, each job's hours ÷ 1.219 (73.5 → 69.0 GPU-h)."""
    h200 = cl_calibration.calibration_for(None)
    totals, jobs = {}, {}
    for mps in (False, True):
        grid = config_grid(gpu_share=4, mps=mps)
        jobs[mps] = plan.make_plan(grid, h200, "bf16")
        totals[mps] = {c: round(sum(j.seconds[c] for j in jobs[mps]) / 3600, 1) for c in ("config", "bf16")}
    assert totals == {False: {"config": 179.0, "bf16": 73.5}, True: {"config": 179.0, "bf16": 69.0}}
    for off, on in zip(jobs[False], jobs[True], strict=True):
        if on.rule == "train":
            assert (off.share, on.share) == (1, 4)
            assert on.seconds["bf16"] == pytest.approx(off.seconds["bf16"] / 1.219)
        else:
            assert on.seconds == off.seconds and on.share == 1


def test_an_image_cell_is_priced_packed_only_at_a_batch_its_step_was_measured_at():
    """MACL's image cells run batches 64 to 1024; make gpu-check packs the smallest and the largest. With
    figures at those two, the cells at 64 and 1024 share a GPU at them, the cells at 128, 256 and 512 keep
    one of their own (priced as if alone) and the plan names their steps; a file of before, whose image
    figures say no batch (``vision_speedup``), prices no image cell."""
    grid = config_grid(gpu_share=4, mps=True)
    h200 = cl_calibration.calibration_for(None)
    figures = {"bf16": {2: 1.5, 4: 2.0}}
    measured = dataclasses.replace(
        h200,
        packing_variants={
            **h200.packing_variants,
            "vision_speedup_mps_b64": figures,
            "vision_speedup_mps_b1024": {"bf16": {2: 1.25}},
        },
    )
    macl = [c for c in grid.cells if c.experiment == "macl_cifar10"]
    works = {c: cl_flops.cell_work(grid, c) for c in macl}
    alone = {w.batch: w for w in works.values()}
    assert sorted(alone) == [64, 128, 256, 512, 1024] and {w.precision for w in alone.values()} == {"bf16"}
    shares = {w.batch: packing.chosen_share(w, measured, 4, True) for w in alone.values()}
    assert shares == {64: 4, 128: 1, 256: 1, 512: 1, 1024: 2}
    assert packing.packed_seconds(100.0, alone[64], 4, measured, True) == pytest.approx(50.0)
    assert packing.packed_seconds(100.0, alone[256], 4, measured, True) == 100.0
    text = to_markdown(packing.packing_blocks(grid, plan.make_plan(grid, measured), measured))
    assert "vision bf16 graph batch 256" in text.split("No measured figure under MPS for ")[1].split(":")[0]
    assert "vision bf16 graph batch 64 under MPS 1.50× with 2, 2.00× with 4" in text
    before = dataclasses.replace(
        h200, packing_variants={**h200.packing_variants, "vision_speedup_mps": figures}
    )
    assert {packing.chosen_share(w, before, 4, True) for w in alone.values()} == {1}


def test_assumed_packing_figures_are_not_priced_and_the_plan_says_so():
    """The H100 file keeps docs/measured.md's H100 figures as assumed: none is priced there."""
    h100 = cl_calibration.load_calibration(H100)
    assert not h100.packing_measured and h100.packing_speedup["bf16"] == {2: 1.82, 4: 2.34}
    text = to_markdown(packing.packing_blocks(_toy_grid(gpu_share=4), [], h100))
    assert "packing figures are assumed, not measured, so none is priced" in text
    readme = " ".join((REPO_ROOT / "docs" / "measured.md").read_text().split())
    quoted = re.search(r"\(0\.92× with 2 and 4 copies.*?\(2 copies, 1\.82×\).*?\(4 copies, 2\.34×\)", readme)
    assert quoted, "docs/measured.md no longer quotes gpu_share.py's H100 figures, which the H100 file keeps"
    text = to_markdown(packing.packing_blocks(_toy_grid(), [], cl_calibration.calibration_for(None)))
    assert (
        "speed-ups measured: sentence bf16 graph without MPS 0.95× with 2, 0.95× with 4; sentence bf16 "
        "graph under MPS 1.16× with 2, 1.22× with 4; "
        "any other step (an image cell at a batch not measured too) is assumed not to gain and priced as if "
        "alone (source: gpu-h200-2026-11-28" in text
    )


def test_a_measured_file_without_packing_figures_takes_none_from_the_default(tmp_path):
    """Packing figures are one card's measurement: a measured calibration without them does not inherit
    the shipped H200's."""
    measured = tmp_path / "calibration.json"
    default = json.loads(cl_calibration.DEFAULT_CALIBRATION.read_text())
    own = {"device": "NVIDIA A100", "measured": True, "achieved_tflops": default["achieved_tflops"]}
    measured.write_text(json.dumps({"format": cl_calibration.CALIBRATION_FORMAT, **own}))
    loaded = cl_calibration.load_calibration(measured)
    assert loaded.packing_speedup == {} and not loaded.packing_measured and loaded.packing_variants == {}
    assert cl_calibration.load_calibration().packing_measured  # the shipped H200 file keeps its own


def test_a_pack_is_a_job_group_of_its_share():
    assert [packing.pack_group(n) for n in packing.SHARES] == [None, "gpu_pack2", "gpu_pack4"]


def test_a_bad_packing_figure_is_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"packing\.speedup\.bf16\.2 must be .* a positive number, got -1"):
        written_calibration(tmp_path / "cal.json", [], packing={"speedup": {"bf16": {2: -1.0}}})


@pytest.fixture
def no_fork_server_running():
    """multiprocessing reads a fork server's preload list only when it starts it: a server an earlier test
    started would serve this test without its list. Stopped before the test and after it."""
    multiprocessing.forkserver._forkserver._stop()
    yield
    multiprocessing.forkserver._forkserver._stop()


def test_each_packed_copy_runs_the_step_mode_its_cell_runs_and_the_plan_prices():
    """make gpu-check packs each copy in the mode the trainer's own rule decides for its cell's settings,
    the one the plan prices; on a CPU every step is eager."""
    grid = preset_grid()
    modes = {}
    for cell in grid.cells:
        settings, work = grid.settings_copy(cell), cl_flops.cell_work(grid, cell)
        if grid.experiment(cell.experiment).track == "vision":
            n_train = cl_flops.DATASET_IMAGES[settings["dataset"]][0]
            graph = packing_measure.trainer_image_graph(settings, torch.device("cuda"), n_train)
            assert graph == work.graphed, cell.path
            assert not packing_measure.trainer_image_graph(settings, torch.device("cpu"), n_train)
            modes[cell.method] = "graph" if graph else "eager"
            continue
        resolved = resolve(settings["precision"], cuda=True, native_bf16=True)
        decided = packing_measure.trainer_settings(settings, resolved, torch.device("cuda"), "bert")
        assert (decided.cuda_graph, decided.padding_free) == (work.graphed, work.padding_free), cell.path
        on_cpu = packing_measure.trainer_settings(
            settings, settings["precision"], torch.device("cpu"), "bert"
        )
        assert not on_cpu.cuda_graph and not on_cpu.padding_free
        modes[cell.method] = (
            "padding-free" if decided.padding_free else "graph" if decided.cuda_graph else "eager"
        )
    graphed = dict.fromkeys(("tf32", "bf16", "fp16", "macl"), "graph")
    assert modes == {"fp32": "padding-free", **graphed, "oar_infonce": "eager"}
    # what the check packs: the fp32 and bf16 sentence cells and MACL at the smallest and the largest
    # batch of MACL's image cells, each copy with its cell's settings
    series = gpu_check.packing_series(grid, "cuda", warmup=10, state_dir=REPO_ROOT / "unused")
    assert {name: (track, precision, batch) for name, (track, precision, _, batch) in series.items()} == {
        "sentence fp32": ("sentence", "fp32", 64),
        "sentence bf16": ("sentence", "bf16", 64),
        "vision macl batch 64": ("vision", "auto", 64),
        "vision macl batch 1024": ("vision", "auto", 1024),
    }
    fp32 = next(c for c in grid.cells if c.method == "fp32")
    assert series["sentence fp32"][2].keywords["settings"] == grid.settings_copy(fp32)
    macl = grid.settings_copy(next(c for c in grid.cells if c.method == "macl"))
    assert series["vision macl batch 1024"][2].keywords["settings"] == {**macl, "batch_size": 1024}
    # the batches are MACL's image cells' smallest and largest (config.yaml's macl_cifar10 sweep)
    shipped = config_grid()
    batches = {
        shipped.settings_copy(c)["batch_size"] for c in shipped.cells if c.experiment == "macl_cifar10"
    }
    assert gpu_check.VISION_PACKING_BATCHES == (min(batches), max(batches)) == (64, 1024)


class _FakeCopy:
    """A built step for pooled_rows: it records, at each timing, its process, what that process has
    built so far, the environment it was given and whether tabnanny (imported by nothing here) was
    already imported in it."""

    built: list[str] = []

    def __init__(self, name: str, log: str) -> None:
        self.name, self.log = name, log

    def time(self, steps: int) -> dict:
        import time

        time.sleep(0.01 * steps)
        with open(self.log, "a") as handle:
            built, env = ",".join(self.built), os.environ.get("CONTRASTLAB_TEST_POOL")
            handle.write(f"{os.getpid()} {self.name} {built} {env} {'tabnanny' in sys.modules}\n")
        return {"steps_per_s": 10.0, "peak_gib": None, "mode": "eager", "precision": "fp32"}

    def release(self) -> None:
        pass


def _fake_step(name: str, log: str, fail: bool = False) -> _FakeCopy:
    if fail:
        raise ValueError(f"boom while building {name}")
    _FakeCopy.built.append(name)
    return _FakeCopy(name, log)


def test_the_pool_starts_its_workers_once_and_each_builds_every_step_once(tmp_path):
    """pooled_rows: max(counts) processes for all steps and counts; the first k time together, each
    worker builds each step once, and the environment given is set in every worker."""
    log = str(tmp_path / "timings.log")
    series = {name: functools.partial(_fake_step, name, log) for name in ("a", "b")}
    rows = packing_measure.pooled_rows(
        series, (1, 2, 4), steps=2, timeout=120, env={"CONTRASTLAB_TEST_POOL": "pipe"}
    )
    assert [r["k"] for r in rows["a"]] == [len(r["steps_per_s"]) for r in rows["b"]] == [1, 2, 4]
    assert rows["a"][2]["sum"] == 40.0 and rows["a"][2]["speedup"] == 4.0 and rows["b"][0]["mode"] == "eager"
    lines = [line.split() for line in (tmp_path / "timings.log").read_text().splitlines()]
    assert len(lines) == 2 * (1 + 2 + 4)
    assert {tuple(line[1:]) for line in lines} == {("a", "a", "pipe", "False"), ("b", "a,b", "pipe", "False")}
    per_worker = {pid: sum(1 for line in lines if line[0] == pid) for pid in {line[0] for line in lines}}
    assert sorted(per_worker.values()) == [2, 2, 4, 6]  # worker 0 in all 3 counts of both steps, ...
    assert str(os.getpid()) not in per_worker


def test_with_a_preload_the_workers_fork_from_a_server_that_imported_it(tmp_path, no_fork_server_running):
    """``forkserver_preload``: each worker a process of its own, forked from one server that imported the
    given modules once, so that a worker does not import them itself."""
    log = str(tmp_path / "timings.log")
    series = {"a": functools.partial(_fake_step, "a", log)}
    packing_measure.pooled_rows(series, (1, 2), steps=1, timeout=120, forkserver_preload=("tabnanny",))
    lines = [line.split() for line in (tmp_path / "timings.log").read_text().splitlines()]
    assert len({line[0] for line in lines}) == 2 and str(os.getpid()) not in {line[0] for line in lines}
    assert [line[-1] for line in lines] == ["True"] * 3


def test_a_worker_that_fails_stops_the_pool_with_its_reason(tmp_path):
    series = {"a": functools.partial(_fake_step, "a", str(tmp_path / "log"), fail=True)}
    with pytest.raises(RuntimeError, match=r"packing: worker \d failed: ValueError: boom while building a"):
        packing_measure.pooled_rows(series, (1, 2), steps=1, timeout=120)
