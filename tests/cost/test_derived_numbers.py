"""The plan's derived numbers by hand: the padding-free ratio rebuilt from the committed
benchmark (no ../shared) and the fp32 cells it prices, a calibration scaled to a card without tf32/bf16
units, the GPUs' utilisation over N GPUs, and the summary's makespan against the makespan table's row."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
import torch

from contrastlab import config as cl_config
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import flops as cl_flops
from contrastlab.cost import plan, rows
from contrastlab.cost.schedule import schedule_blocks
from contrastlab.data.images import validation_split
from contrastlab.paths import REPO_ROOT
from contrastlab.training import vision
from contrastlab.training.capture import for_device
from contrastlab.training.vision import VisionTrainSettings
from tests.cost.common import H100, H200, config_grid, config_yaml, planned
from tests.cost.test_plan import _toy_work


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
    grid = config_grid()
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


def test_the_makespan_rows_by_hand_with_the_gpus_utilisation():
    """Two cells: a (train 10 h, encode 2 h), b (train 4 h, encode 1 h), each probe 5 h on the CPU, one
    CPU slot per GPU. 1 GPU: train a 0-10, train b 10-14, encode a 14-16, encode b 16-17; probes a
    16-21, b 21-26: 26 h, the GPU busy 17 of 26 h = 65%. 2 GPUs: a 0-12 and b 0-5 side by side, probes
    b 5-10 and a 12-17: 17 h, busy 17 of 2 × 17 GPU-h = 50%."""
    jobs = [
        planned("train", "e/m/a/seed1", 10),
        planned("encode", "e/m/a/seed1", 2),
        planned("train", "e/m/b/seed1", 4),
        planned("encode", "e/m/b/seed1", 1),
    ]
    *_, table = schedule_blocks(jobs, 5 * 3600, "config", [2, 1], cpus_per_gpu=1)
    assert [" ".join(row) for row in table.rows] == ["1 1 26:00 65% 17:00 17:00", "2 2 17:00 50% 8:30 17:00"]


@pytest.mark.parametrize("chosen", ["config", "bf16"])
def test_the_summarys_makespan_is_the_makespan_tables_8_gpu_row(tmp_path, capsys, monkeypatch, chosen):
    """config.yaml on the H200, as configured and all bf16 (22:26 and 9:14): the summary's line and the
    table's 8-GPU row are one simulation, of the same jobs under the same precision choice."""
    monkeypatch.setattr(cl_calibration, "measured_calibration", lambda: tmp_path / "none.json")
    plan.plan_report(config_yaml(), chosen, None, tmp_path, gpu_model="H200", echo=False)
    text = (tmp_path / "plan.md").read_text()
    summary = re.search(r"- Makespan on one 8-GPU node(, all bf16)?: (\d+:\d\d) \(h:mm\)\.", text)
    row = re.search(r"^\| 8 \| 64 \| (\d+:\d\d) \|", text, re.M)
    assert summary and row
    assert summary.group(2) == row.group(1) == {"config": "22:26", "bf16": "9:14"}[chosen]
    assert bool(summary.group(1)) == (chosen == "bf16")


# --- image cells by hand: what the trainer runs on the demo's digits (1,437 training images) against the plan


def _digits_cell(method: str = "infonce", **training):
    """The demo's OAR experiment alone (digits; batch 64, 2 epochs, 20% held out), its ``training``
    updated, and the cell of ``method`` at lr 0.01: (grid, cell, its settings as the trainer gets them)."""
    config = cl_config.load(REPO_ROOT / "config" / "demo.yaml")
    oar = config["experiments"]["oar_cifar10"]
    oar["training"].update(training)
    config["experiments"] = {"oar_cifar10": oar}
    config["select"] = {}
    config["tables"]["verdict_stand_ins"] = {}
    grid = cl_config.Grid(cl_config.validate(config))
    cell = cl_config.Cell("oar_cifar10", "resnet18-w8", f"{method}-lr0.01", 42)
    keys = {f.name for f in dataclasses.fields(VisionTrainSettings)}
    settings = {k: v for k, v in grid.settings(cell).items() if k in keys}
    return grid, cell, VisionTrainSettings.from_dict(settings)


def _trainer_counts(s) -> tuple[int, int, int, bool]:
    """What the trainer itself computes for settings ``s`` on digits: (training images, steps per
    epoch, total steps, whether a CUDA run captures its step), from its own functions."""
    n_train = 1437 - (len(validation_split(1437, s.val_fraction, s.seed)) if s.val_fraction else 0)
    per_epoch = vision._steps_per_epoch(s, n_train)
    total = s.max_steps if s.max_steps is not None else per_epoch * s.epochs  # vision.train_vision's rule
    return n_train, per_epoch, total, for_device(s, torch.device("cuda"), n_images=n_train)[0].cuda_graph


def test_the_demos_image_cells_by_hand():
    """20% of 1,437 held out is int(287.4) = 287 images, leaving 1,150 to train on: 17 full batches of 64
    a step each epoch (62 images left over), 34 steps in 2 epochs, a validation after each epoch over 287
    images in 5 batches (4 × 64 + 31), one snapshot (step 20), and the FFN probes 30 epochs over 143, 718
    and 1,437 labelled images in batches of 32: 30 × (5 + 23 + 45) = 2,190 steps. OAR's labelled pass
    (10% of all 1,437: 143 images, a batch of 64) doubles the images of a step and keeps it eager."""
    grid, cell, s = _digits_cell()
    work = cl_flops.cell_work(grid, cell)
    fwd = cl_flops.vision_forward("resnet18", "cifar", 8, None, 16, None)
    assert _trainer_counts(s) == (1150, 17, 34, True)
    assert (work.steps, work.snapshots, work.eval_probe_steps, work.graphed) == (34, 1, 2190, True)
    assert work.step_images == 2 * 64 and work.train_flops == 34 * 3 * 2 * fwd.macs * 128
    assert work.dev_flops == 2 * 2 * 2 * fwd.macs * 287
    per_call = cl_flops.AUGMENT_LAUNCHES + cl_flops.BLUR_LAUNCHES
    forward = cl_flops.ENCODER_LAUNCHES["resnet18"][1]
    assert work.dev_launches == 2 * 5 * (2 * per_call + forward + cl_flops.VALIDATION_LAUNCHES)
    grid, cell, s = _digits_cell("oar_infonce")
    oar = cl_flops.cell_work(grid, cell)
    assert _trainer_counts(s) == (1150, 17, 34, False)
    assert (oar.steps, oar.step_images, oar.graphed) == (34, 2 * 64 + 2 * 64, False)


#: Uneven splits: the training settings and the trainer's (training images, steps per epoch, total steps,
#: whether a CUDA run captures its step).
UNEVEN = {
    # 1,150 = 23 × 50: every batch full, one shape, captured (all 1,437 images would leave 37 over)
    "divides-after-the-split": ({"drop_last": False, "batch_size": 50}, (1150, 23, 46, True)),
    # 1,150 = 19 × 60 + 10: a last batch of 10, another shape, eager
    "last-batch-of-10": ({"drop_last": False, "batch_size": 60}, (1150, 20, 40, False)),
    # a tenth held out: int(143.7) = 143, 1,294 left, 20 full batches of 64 (14 over)
    "tenth-held-out": ({"val_fraction": 0.1}, (1294, 20, 40, True)),
    # max_steps past the epochs: the trainer runs them all (it is the total, not a cap on the epochs)
    "max-steps-past": ({"max_steps": 50}, (1150, 17, 50, True)),
    "max-steps-within": ({"max_steps": 25}, (1150, 17, 25, True)),
}


@pytest.mark.parametrize(("training", "counts"), list(UNEVEN.values()), ids=list(UNEVEN))
def test_uneven_image_splits_are_planned_as_the_trainer_runs_them(training, counts):
    """The plan's steps, validations and graph decision equal the trainer's on splits that do not divide:
    the validations are one per epoch begun (the trainer validates at every epoch's end and at the last
    step), the graph is decided on the images trained on, not all of them."""
    grid, cell, s = _digits_cell(**training)
    n_train, per_epoch, total, graphed = _trainer_counts(s)
    assert (n_train, per_epoch, total, graphed) == counts
    work = cl_flops.cell_work(grid, cell)
    assert (work.steps, work.graphed, work.snapshots) == (total, graphed, (total - 1) // 20)
    fwd = cl_flops.vision_forward("resnet18", "cifar", 8, None, 16, None)
    validations = -(-total // per_epoch)
    assert work.dev_flops == validations * 2 * 2 * fwd.macs * (1437 - n_train)


def test_a_sentence_cells_sentences_are_counted_as_the_trainer_takes_them():
    """The trainer holds the probe's sentences out of the corpus first and then caps at ``max_sentences``
    (training.sentence: ``min(len - probe, max_sentences)``); a ``max_steps`` past the epoch is run whole."""
    probe = {"analysis_every": 50, "analysis_sentences": 64, "analysis_holdout": True}
    # 2,000 - 64 held out = 1,936; capped at 1,000: 62 steps of 16 (not (1,000 - 64) // 16 = 58)
    assert _toy_work(**probe, max_sentences=1000).steps == 1000 // 16 == 62
    # the cap above what is left after the probe: 1,936 // 16 = 121
    assert _toy_work(**probe, max_sentences=1990).steps == 1936 // 16 == 121
    assert _toy_work(max_steps=200).steps == 200  # 2,000 // 16 = 125 steps an epoch; the trainer runs 200
