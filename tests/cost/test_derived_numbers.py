"""The plan's derived numbers by hand (issue 63 item 8): the padding-free ratio rebuilt from the committed
benchmark (no ../shared) and the fp32 cells it prices, a calibration scaled to a card without tf32/bf16
units, the GPUs' utilisation over N GPUs, and the summary's makespan against the makespan table's row."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from contrastlab import config as cl_config
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import flops as cl_flops
from contrastlab.cost import plan, rows
from contrastlab.cost.schedule import schedule_lines
from contrastlab.paths import REPO_ROOT

H200 = cl_calibration.SHIPPED_CALIBRATIONS["H200"]
H100 = cl_calibration.SHIPPED_CALIBRATIONS["H100"]


def test_the_padding_free_ratio_is_rebuilt_from_the_committed_benchmark():
    """rows.padding_free_ratio on docs/gpu-runs/.../run3_gpu_bench.json (in the repository): the fp32
    row with the padded model's own dropout masks, padding-free ms over padded eager ms (best run of
    each), to 4 digits; both shipped files hold exactly that, the H100's marked assumed."""
    bench = json.loads((REPO_ROOT / rows.H200_PADFREE_BENCH).read_text())
    row = next(
        r for r in bench["rows"] if (r["part"], r["precision"], r["draws"]) == ("padfree", "fp32", "padded")
    )
    assert (row["packed_ms"], row["padded_ms"]) == (45.28950238000007, 56.85771434000003)
    assert row["ratio"] == row["packed_ms"] / row["padded_ms"] == 0.7965410306361613
    built = rows.padding_free_ratio(REPO_ROOT / rows.H200_PADFREE_BENCH)
    source = (
        "padding_free_ratio.fp32: docs/gpu-runs/h200-2026-11-26-issue55/run3_gpu_bench.json's padfree fp32 "
        "row (BERT-base batch 64, wiki1m's lengths, 50 steps: padding-free 45.29 ms against padded eager "
        "56.86 ms a step)"
    )
    assert built == {"ratio": {"fp32": 0.7965}, "source": source}
    h200, h100 = json.loads(H200.read_text()), json.loads(H100.read_text())
    assert h200["padding_free_ratio"] == h100["padding_free_ratio"] == {"fp32": 0.7965}
    assert h200["padding_free_source"] == source
    assert h100["padding_free_source"] == f"assumed: the H200's ({source})"
    assert "padding_free_ratio.fp32" in h200["measured_entries"]
    assert "padding_free_ratio.fp32" in h100["assumed_entries"]


def test_the_ratio_prices_every_ieee_fp32_sentence_cell_of_config_yaml():
    """Every sentence cell of config.yaml that trains in IEEE fp32 (198: BERT and RoBERTa, base and
    large) is padding-free on wiki1m's profile, and its step is the padded step's FLOP time × 0.7965
    (GPU-bound: above its launches) plus the step overhead; the fp16 sentence cells are not."""
    grid = cl_config.Grid(cl_config.load(REPO_ROOT / "config.yaml"))
    cal = cl_calibration.load_calibration(H200)
    rate = cal.achieved_tflops["sentence"]["fp32"] * 1e12
    assert rate == 37.2e12 and cal.overheads_s["sentence_step"] == 0.0
    fp32 = others = 0
    for cell in grid.cells:
        work = cl_flops.cell_work(grid, cell)
        if work.track != "sentence":
            continue
        if work.precision != "fp32":
            others += 1
            assert not work.padding_free
            continue
        fp32 += 1
        assert work.padding_free and work.token_profile == "wiki1m", cell
        expected = work.padded_step_flops / rate * 0.7965
        assert expected > work.step_launches * cal.overheads_s["sentence_launch"]
        assert cl_calibration.step_seconds(work, cal) == pytest.approx(expected, rel=1e-12), cell
    assert (fp32, others) == (198, 24)


def _hand_calibration() -> cl_calibration.Calibration:
    return cl_calibration.Calibration(
        achieved_tflops={"sentence": {"fp32": 33.5, "tf32": 200.0, "bf16": 400.0, "fp16": 500.0}},
        overheads_s={},
        gpu_memory_gib=141.0,
        device="NVIDIA H200",
        source="by hand",
        measured=True,
        path="hand.json",
    )


def test_a_card_without_tf32_or_bf16_units_prices_them_at_its_fp32_rate():
    """The V100 (fp32 15.7, fp16 125 TFLOP/s; no TF32 or bf16 units): tf32 and bf16 run as fp32 there,
    so they are the H200's fp32 rate × 15.7 / 67 = 33.5 × 15.7 / 67 = 7.85 TFLOP/s, not the H200's
    tf32/bf16 rate scaled (200 × 15.7 / 495 = 6.34, 400 × 15.7 / 989 = 6.35); fp16 has tensor cores:
    500 × 125 / 989. 78.5 GFLOP at 7.85 TFLOP/s: 10 ms."""
    v100 = cl_calibration.for_gpu_model(_hand_calibration(), "V100")
    rates = v100.achieved_tflops["sentence"]
    assert rates["fp32"] == rates["tf32"] == rates["bf16"] == pytest.approx(7.85, rel=1e-12)
    assert rates["fp16"] == pytest.approx(500 * 125 / 989, rel=1e-12)
    for precision in ("fp32", "tf32", "bf16"):
        assert v100.seconds(78.5e9, "sentence", precision) * 1e3 == pytest.approx(10.0, rel=1e-12)
    # a card with the units scales each precision by its own peaks (A100 tf32: 200 × 156 / 495)
    a100 = cl_calibration.for_gpu_model(_hand_calibration(), "A100")
    assert a100.achieved_tflops["sentence"]["tf32"] == pytest.approx(200 * 156 / 495, rel=1e-12)


def _planned(rule: str, cell: str, hours: float) -> SimpleNamespace:
    return SimpleNamespace(rule=rule, cell=cell, seconds={"config": hours * 3600}, cpu_after_s=0.0)


def test_the_makespan_rows_by_hand_with_the_gpus_utilisation():
    """Two cells: a (train 10 h, encode 2 h), b (train 4 h, encode 1 h), each probe 5 h on the CPU, one
    CPU slot per GPU. 1 GPU: train a 0-10, train b 10-14, encode a 14-16, encode b 16-17; probes a
    16-21, b 21-26: 26 h, the GPU busy 17 of 26 h = 65%. 2 GPUs: a 0-12 and b 0-5 side by side, probes
    b 5-10 and a 12-17: 17 h, busy 17 of 2 × 17 GPU-h = 50%."""
    planned = [
        _planned("train", "e/m/a/seed1", 10),
        _planned("encode", "e/m/a/seed1", 2),
        _planned("train", "e/m/b/seed1", 4),
        _planned("encode", "e/m/b/seed1", 1),
    ]
    lines = schedule_lines(planned, 5 * 3600, "config", [2, 1], cpus_per_gpu=1)
    table = [line for line in lines if re.match(r"\| \d", line)]
    assert table == ["| 1 | 1 | 26:00 | 65% | 17:00 | 17:00 |", "| 2 | 2 | 17:00 | 50% | 8:30 | 17:00 |"]


@pytest.mark.parametrize("chosen", ["config", "bf16"])
def test_the_summarys_makespan_is_the_makespan_tables_8_gpu_row(tmp_path, capsys, monkeypatch, chosen):
    """config.yaml on the H200, as configured and all bf16 (22:26 and 9:14; 24:32 and 11:21 before MACL's
    captured image step was priced as captured): the summary's line and the table's 8-GPU row are one
    simulation, of the same jobs under the same precision choice."""
    monkeypatch.setattr(cl_calibration, "measured_calibration", lambda: tmp_path / "none.json")
    config = cl_config.load(REPO_ROOT / "config.yaml")
    plan.plan_report(config, chosen, None, tmp_path, gpu_model="H200", echo=False)
    text = (tmp_path / "plan.md").read_text()
    summary = re.search(r"- Makespan on one 8-GPU node(, all bf16)?: (\d+:\d\d) \(h:mm\)\.", text)
    row = re.search(r"^\| 8 \| 64 \| (\d+:\d\d) \|", text, re.M)
    assert summary and row
    assert summary.group(2) == row.group(1) == {"config": "22:26", "bf16": "9:14"}[chosen]
    assert bool(summary.group(1)) == (chosen == "bf16")
