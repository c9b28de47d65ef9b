"""How the plan prices a padding-free sentence step: the FLOP model from wiki1m's token
profile, the re-padding overhead, a calibration's measured ratio instead, the trainer's default rule,
and config.yaml's total on the H200."""

from __future__ import annotations

import json

import pytest

from contrastlab.cost import backbones
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import flops as cl_flops
from contrastlab.models.packed import padding_free_default
from contrastlab.paths import REPO_ROOT
from contrastlab.precision import resolve
from tests.cost.common import H200, MACL, NIE, config_totals, config_work

#: The shipped H200 file's measured padding-free ratio (gpu_bench's padfree fp32 row, fused-QKV encoder).
MEASURED_RATIO = 0.7965


@pytest.fixture
def flop_model_h200(tmp_path) -> cl_calibration.Calibration:
    """The shipped H200 file without its measured ratio: padding-free steps priced by the FLOP model."""
    data = json.loads(H200.read_text())
    data.pop("padding_free_ratio")
    path = tmp_path / "flop-model.json"
    path.write_text(json.dumps(data))
    return cl_calibration.load_calibration(path)


BERT_BASE_N = 85_054_464  # non-embedding parameters (test_plan.py checks the count)


def _bert_base() -> backbones.Transformer:
    return backbones._transformer(*backbones.KNOWN_ARCHITECTURES["bert-base-uncased"], "test", "bert")


def test_the_flop_model_of_bert_base_at_22_of_32_tokens_by_hand():
    model = _bert_base()
    assert model.non_embedding == BERT_BASE_N
    # attention's two products, forward + backward: 12 · 12 layers · 32² · 768 per sequence
    assert cl_flops.attention_score_flops(12, 768, 1, 32) == 12 * 12 * 1024 * 768 == 113_246_208
    # batch 64, two views: 128 sequences. Linear: 6 · N · 128 · tokens per row.
    padded = cl_flops.sentence_step_flops(model, 64, 32, 32)
    packed = cl_flops.sentence_step_flops(model, 64, 32, 22)
    assert padded == 128 * (6 * BERT_BASE_N * 32 + 113_246_208) == 2_104_794_021_888
    assert packed == 128 * (6 * BERT_BASE_N * 22 + 113_246_208) == 1_451_575_738_368
    assert cl_flops.padding_free_fraction(model, 32, 22) == pytest.approx(
        11_340_435_456 / 16_443_703_296, rel=1e-15
    )  # 0.68965: the linear layers alone would give 22/32 = 0.6875


def test_the_rule_is_the_trainers_default_and_an_explicit_setting_wins():
    rule = cl_flops.padding_free_for
    for precision in ("fp32", "tf32", "bf16", "fp16", "auto", None):
        for model_type in ("bert", "roberta", "distilbert", ""):
            # the trainer's rule at the precision the cell resolves to on the plan's GPU (auto: bf16)
            resolved = resolve(precision or "auto", cuda=True, native_bf16=True)
            assert rule({"precision": precision}, model_type) == padding_free_default(
                resolved, "cuda", model_type
            )
    assert rule({"precision": "fp32"}, "bert") and rule({"precision": "fp32"}, "roberta")
    assert not rule({"precision": "fp32"}, "distilbert") and not rule({"precision": "auto"}, "bert")
    assert not rule({"precision": "fp32", "padding_free": False}, "bert")
    assert rule({"precision": "bf16", "padding_free": True}, "bert")


def test_an_fp32_bert_cell_is_priced_padding_free_from_the_token_profile(flop_model_h200):
    work = config_work(NIE)
    assert work.precision == "fp32" and work.padding_free and work.token_profile == "wiki1m"
    padded = cl_flops.training_step_flops(BERT_BASE_N, 64, 32)
    fraction = cl_flops.padding_free_fraction(_bert_base(), 32, 260_875 / 11_914)
    assert work.padded_step_flops == padded
    assert work.step_flops == padded * fraction and fraction == pytest.approx(0.68644, abs=1e-5)
    assert work.train_flops == work.steps * work.step_flops
    assert work.gather_elements == 128 * 32 * 768 * 12
    # runs eagerly (nonzero's host sync cannot be captured), with the re-padding's launches
    assert not work.graphed and work.step_launches == 940 + 19 * 12 + 14
    assert work.kind == "bert-base batch 64 fp32 padding-free"
    cal = flop_model_h200
    flop_s = padded * fraction / 37.2e12
    gather_s = 128 * 32 * 768 * 12 * 1e-10
    assert cal.overheads_s["padding_free_element"] == 1e-10
    # GPU-bound: 1,182 launches x 21 us = 25 ms < 38.6 + 3.8 ms
    assert cl_calibration.step_seconds(work, cal) == pytest.approx(flop_s + gather_s, rel=1e-12)
    # 42.3 ms against the padded 56.2 (an H200 probe: 43.5 ms, at its batches' 22.3 real tokens)
    assert cl_calibration.step_seconds(work, cal) == pytest.approx(0.042347, abs=1e-6)
    # the shipped file prices it at the measured ratio instead: 56.2 x 0.7965 = 44.8 ms (measured 45.3)
    shipped = cl_calibration.load_calibration(H200)
    assert shipped.padding_free_ratio == {"fp32": MEASURED_RATIO}
    assert cl_calibration.step_seconds(work, shipped) == pytest.approx(padded / 37.2e12 * MEASURED_RATIO)


def test_padding_free_false_and_a_bf16_cell_are_priced_as_before():
    cal = cl_calibration.load_calibration(H200)
    padded = cl_flops.training_step_flops(BERT_BASE_N, 64, 32)
    off = config_work(NIE, padding_free=False)
    assert not off.padding_free and off.graphed and off.gather_elements == 0
    assert off.step_flops == off.padded_step_flops == padded and off.step_launches == 940
    assert off.kind == "bert-base batch 64 fp32"
    assert cl_calibration.step_seconds(off, cal) == padded / 37.2e12  # the calibrated padded step
    bf16 = config_work(MACL, precision="bf16")
    assert not bf16.padding_free and bf16.graphed and bf16.step_flops == padded
    assert cl_calibration.step_seconds(bf16, cal) == padded / 161.73e12
    # an explicit true reaches a bf16 cell too: priced packed, and eager (the graph is off then)
    on = config_work(MACL, precision="bf16", padding_free=True)
    assert on.padding_free and not on.graphed and on.step_flops < padded
    assert cl_calibration.step_seconds(on, cal) == pytest.approx((1460 + 19 * 12 + 14) * 2.105e-05)


def test_a_measured_ratio_replaces_the_flop_model(tmp_path, flop_model_h200):
    data = json.loads(H200.read_text()) | {"padding_free_ratio": {"fp32": 0.76}}
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(data))
    cal = cl_calibration.load_calibration(path)
    assert cal.padding_free_ratio == {"fp32": 0.76}
    assert flop_model_h200.padding_free_ratio == {}  # no measured ratio: the FLOP model
    work = config_work(NIE)
    padded_s = cl_flops.training_step_flops(BERT_BASE_N, 64, 32) / 37.2e12
    assert cl_calibration.step_seconds(work, cal) == pytest.approx(padded_s * 0.76, rel=1e-12)
    # a bf16 cell or a padded one ignores the fp32 ratio
    off = config_work(NIE, padding_free=False)
    assert cl_calibration.step_seconds(off, cal) == cl_calibration.step_seconds(off, flop_model_h200)
    # the ratio was measured at wiki1m's lengths: a corpus without that profile keeps the FLOP model
    unprofiled = cl_flops.CellWork(**{**work.__dict__, "token_profile": ""})
    flop_model_s = work.step_flops / 37.2e12 + work.gather_elements * 1e-10
    assert cl_calibration.step_seconds(unprofiled, cal) == pytest.approx(flop_model_s)
    path.write_text(json.dumps(data | {"padding_free_ratio": {"fp32": 0}}))
    with pytest.raises(ValueError, match="padding_free_ratio.fp32 must be"):
        cl_calibration.load_calibration(path)


def test_config_yaml_on_the_h200_with_padding_free_by_default(flop_model_h200):
    """config.yaml's totals padded (194.2), padding-free at the measured ratio (179.0) and by the FLOP
    model (175.2): only the IEEE-fp32 columns move."""
    shipped = cl_calibration.load_calibration(H200)
    padded = config_totals(shipped, padding_free=False)
    default = config_totals(shipped)
    assert padded == [194.2, 231.9, 100.3, 73.5]
    doc = " ".join((REPO_ROOT / "docs" / "cost.md").read_text().split())  # what docs/cost.md says of it
    assert f"(`padding_free: false`) the grid takes {padded[0]} GPU-hours ({padded[1]} all fp32;" in doc
    assert default == [179.0, 215.6, 100.3, 73.5]
    assert config_totals(flop_model_h200) == [175.2, 211.5, 100.3, 73.5]
