"""Several small cells per GPU (contrastlab.cost.packing, resources.gpu_share): which cells share a GPU,
the packed plan's arithmetic, and the speed-ups it prices (measured, or docs/measured.md's H100 figures,
said to be assumed)."""

from __future__ import annotations

import dataclasses
import multiprocessing.forkserver
import os
import re

import pytest
import yaml

from contrastlab import config as cl_config
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import flops as cl_flops
from contrastlab.cost import packing, plan
from contrastlab.paths import REPO_ROOT
from contrastlab.precision import RESOLVED


def _toy_config(**resources) -> dict:
    tiny = yaml.safe_load((REPO_ROOT / "config" / "demo.yaml").read_text())["backbones"]["tiny-bert"]
    return cl_config.validate(
        {
            "seeds": [1],
            "data": {"fixture": True, "fixture_corpus_sentences": 2000},
            "backbones": {"toy": {**tiny, "tokenizer_from": "ref"}, "ref": {"hf_id": "bert-base-uncased"}},
            "training": {"batch_size": 16, "eval_every": 50, "precision": "fp32"},
            "evaluation": {"mode": "fasttest"},
            "resources": resources,
            "experiments": {
                "nie2023": {"backbones": ["toy"], "methods": {"cl": {"loss": "infonce", "hp": {"tau": 0.05}}}}
            },
        }
    )


def _calibration(tmp_path, speedups=None) -> cl_calibration.Calibration:
    """1 TFLOP/s everywhere, 10 s start-up; ``speedups``: measured packing figures (else the default's)."""
    measured = [cl_calibration.Measurement(t, p, 1e12, 1.0) for t in cl_calibration.TRACKS for p in RESOLVED]
    data = cl_calibration.calibration_from_measurements(
        measured,
        device="toy",
        source="test",
        overheads_s={"train_startup": 10},
        gpu_memory_gib=80,
        packing_speedup=speedups,
    )
    return cl_calibration.load_calibration(cl_calibration.write_calibration(tmp_path / "cal.json", data))


def test_a_cell_shares_with_the_largest_count_whose_peaks_fit_80_percent_of_the_card():
    # 80 GiB card: 64 GiB for the packed cells together
    assert packing.cell_share(16.0, 80.0, 4) == 4  # 4 × 16 = 64
    assert packing.cell_share(16.1, 80.0, 4) == 2
    assert packing.cell_share(32.0, 80.0, 4) == 2
    assert packing.cell_share(32.1, 80.0, 4) == 1
    assert packing.cell_share(100.0, 80.0, 4) == 1  # does not fit at all: alone (the plan says so)
    assert packing.cell_share(5.0, 80.0, 2) == 2  # never more than resources.gpu_share
    assert packing.cell_share(5.0, 80.0, 1) == 1  # off
    with pytest.raises(ValueError, match="resources.gpu_share must be one of 1, 2, 4, got 3"):
        packing.cell_share(5.0, 80.0, 3)


def test_the_speedup_is_the_largest_measured_count_up_to_the_share():
    figures = {"bf16": {2: 1.8, 4: 2.4}, "fp32": {2: 0.9}}
    assert packing.speedup(figures, "bf16", 4) == 2.4
    assert packing.speedup(figures, "bf16", 2) == 1.8
    assert packing.speedup(figures, "fp32", 4) == 0.9  # 4 not measured: the figure of 2
    assert packing.speedup(figures, "bf16", 1) == 1.0
    assert packing.speedup(figures, "tf32", 4) == 1.0  # no figure: priced as if alone
    assert packing.packed_seconds(240.0, "bf16", 4, figures) == 100.0


def test_a_training_jobs_share_fits_the_card_and_pays(tmp_path):
    cal = _calibration(tmp_path, {"fp32": {2: 1.5, 4: 2.0}})
    on = _toy_config(gpu_share=4)
    cell = cl_config.Grid(on).cells[0]
    peak = cl_flops.cell_work(cl_config.Grid(on), cell).peak_gib
    assert peak < 16  # the tiny BERT: four fit
    assert packing.job_share(cl_config.Grid(on), cell, lambda: cal) == 4

    def unread():  # off, or on the CPU: the calibration is never read (the DAG asks every job)
        raise AssertionError("the calibration was read")

    assert packing.job_share(cl_config.Grid(_toy_config()), cell, unread) == 1  # off by default
    assert (
        packing.job_share(cl_config.Grid(_toy_config(gpu_share=4, gpu=0)), cell, unread) == 1
    )  # CPU jobs share nothing
    small_card = dataclasses.replace(cal, gpu_memory_gib=2.5 * peak / 0.8)
    assert packing.job_share(cl_config.Grid(on), cell, lambda: small_card) == 2  # two fit, not four
    # sharing must pay: the largest speed-up among the counts that fit, none above 1 is a GPU alone
    assert (
        packing.chosen_share(
            1.0, "fp32", dataclasses.replace(cal, packing_speedup={"fp32": {2: 1.3, 4: 1.2}}), 4
        )
        == 2
    )
    default = cl_calibration.load_calibration(cl_calibration.DEFAULT_CALIBRATION)
    assert packing.chosen_share(1.0, "fp32", default, 4) == 1  # 0.92× on the H100 of docs/measured.md
    assert packing.chosen_share(1.0, "bf16", default, 4) == 4  # 2.34×
    assert packing.chosen_share(1.0, "tf32", default, 4) == 1  # no figure


def test_the_packed_plan_divides_training_by_the_measured_speedup(tmp_path):
    cal = _calibration(tmp_path, {"fp32": {2: 1.5, 4: 2.0}, "bf16": {2: 1.8, 4: 3.0}})
    assert cal.packing_measured and cal.packing_speedup["fp32"] == {2: 1.5, 4: 2.0}
    alone = plan.make_plan(cl_config.Grid(_toy_config()), cal)
    packed = plan.make_plan(cl_config.Grid(_toy_config(gpu_share=4)), cal)
    for a, p in zip(alone, packed, strict=True):
        if a.rule == "train":
            assert p.share == 4 and a.share == 1
            assert p.seconds["config"] == pytest.approx(a.seconds["config"] / 2.0)  # fp32 as configured
            assert p.seconds["bf16"] == pytest.approx(a.seconds["bf16"] / 3.0)
            assert p.seconds["tf32"] == a.seconds["tf32"]  # no tf32 figure
        else:
            assert p.seconds == a.seconds and p.share == 1  # the encoding keeps its GPU
    lines = "\n".join(plan.plan_lines(cl_config.Grid(_toy_config(gpu_share=4)), packed, cal, "config"))
    assert "GPU sharing on (`resources.gpu_share: 4`" in lines and "1 training jobs 4 per GPU" in lines
    assert "speed-ups measured: fp32 1.50× with 2, 2.00× with 4; bf16 1.80× with 2, 3.00× with 4 " in lines
    assert "| jobs per GPU |" in lines
    off = "\n".join(plan.plan_lines(cl_config.Grid(_toy_config()), alone, cal, "config"))
    assert "GPU sharing: off" in off and "| jobs per GPU |" not in off


def test_without_a_measured_speedup_the_plan_prices_the_readmes_h100_figures_and_says_assumed(tmp_path):
    cal = _calibration(tmp_path)  # a measured calibration without packing figures
    default = cl_calibration.load_calibration(cl_calibration.DEFAULT_CALIBRATION)
    for loaded in (cal, default):
        assert not loaded.packing_measured
        assert loaded.packing_speedup["fp32"] == {2: 0.92, 4: 0.92}
        assert loaded.packing_speedup["bf16"] == {2: 1.82, 4: 2.34}
        text = " ".join(packing.packing_lines(cl_config.Grid(_toy_config(gpu_share=4)), [], loaded))
        assert "speed-ups assumed (not measured on this machine): fp32 0.92× with 2, 0.92× with 4" in text
        assert "docs/measured.md: benchmarks/gpu_share.py on an H100" in text
    # the figures are the ones docs/measured.md quotes
    readme = " ".join((REPO_ROOT / "docs" / "measured.md").read_text().split())
    quoted = re.search(r"\(0\.92× with 2 and 4 copies.*?\(2 copies, 1\.82×\).*?\(4 copies, 2\.34×\)", readme)
    assert quoted, "docs/measured.md no longer quotes gpu_share.py's H100 figures, which the default prices"


def test_a_bad_packing_figure_is_one_line(tmp_path):
    data = cl_calibration.calibration_from_measurements(
        [], device="toy", source="test", packing_speedup={"bf16": {2: -1.0}}
    )
    path = tmp_path / "cal.json"
    path.write_text(__import__("json").dumps(data))
    with pytest.raises(ValueError, match=r"packing\.speedup\.bf16\.2 must be .* a positive number, got -1"):
        cl_calibration.load_calibration(path)


def _where_a_copy_ran(ready) -> dict:
    """A copy for concurrent_rates: its process, and whether tabnanny (imported by nothing here) was
    already imported when it ran."""
    import sys

    ready()
    return {"steps_per_s": 1.0, "pid": os.getpid(), "tabnanny": "tabnanny" in sys.modules}


@pytest.fixture
def no_fork_server_running():
    """multiprocessing keeps one fork server per process and reads the preload list only when it starts
    it: a server that an earlier test in this worker started (tests/forked.py's, preloading torch) would
    serve this test's copies without its list. Stopped before the test, and after it, so the next user
    starts one with its own list (``_stop`` is CPython's own, which its test suite calls)."""
    multiprocessing.forkserver._forkserver._stop()
    yield
    multiprocessing.forkserver._forkserver._stop()


def test_the_copies_are_processes_of_their_own_spawned_or_forked_from_a_server_that_imported_them(
    no_fork_server_running,
):
    """packing.concurrent_rates: k copies, each a process of its own; spawned (make gpu-check on a GPU,
    benchmarks/gpu_share.py), or with ``forkserver_preload`` (make gpu-check --toy) forked from one
    server that imported the given modules once, so that a copy does not import them itself."""
    for preload, preloaded in ((None, False), (("tabnanny",), True)):
        rows = packing.concurrent_rates(_where_a_copy_ran, 2, timeout=120, forkserver_preload=preload)
        pids = {row["pid"] for row in rows}
        assert len(pids) == 2 and os.getpid() not in pids, (preload, rows)
        assert [row["tabnanny"] for row in rows] == [preloaded, preloaded], (preload, rows)
