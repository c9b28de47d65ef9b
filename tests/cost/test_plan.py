"""The cost plan (contrastlab.cost.plan): its arithmetic on a toy config against FLOPs computed by hand,
parameter counts of the real architectures, the calibration file, and docs/cost.md's cell counts."""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import re
from types import SimpleNamespace

import pytest
import yaml

from contrastlab import config as cl_config
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import flops as cl_flops
from contrastlab.cost import plan
from contrastlab.cost.backbones import transformer_parameters
from contrastlab.cost.calibration import DEFAULT_CALIBRATION as DEFAULT
from contrastlab.paths import REPO_ROOT
from contrastlab.precision import RESOLVED
from tests.cost.common import (
    CHOICES,
    H100,
    MACL_IMAGES,
    OAR,
    config_grid,
    config_yaml,
    flat_rates,
    written_calibration,
)

#: A random BERT of hidden 32, 2 layers, feed-forward 64. Per layer: 4·32² + 4·32 (Q, K, V, output)
#: + 2·32·64 + 64 + 32 (feed-forward) + 4·32 (two LayerNorms) = 4096 + 128 + 4096 + 96 + 128 = 8544.
TOY_NON_EMBEDDING = 2 * 8544
#: config/demo.yaml's tiny random BERT.
TINY_BERT = yaml.safe_load((REPO_ROOT / "config" / "demo.yaml").read_text())["backbones"]["tiny-bert"]


def _toy_config(seeds=(1, 2), resources=None, **training) -> dict:
    return cl_config.validate(
        {
            "seeds": list(seeds),
            "data": {"fixture": True, "fixture_corpus_sentences": 2000},
            "backbones": {
                "toy": {"random": dict(TINY_BERT["random"]), "tokenizer_from": "ref"},
                "ref": {"hf_id": "bert-base-uncased"},
            },
            "training": {
                "batch_size": 16,
                "eval_every": 50,
                "state_every": 60,
                "precision": "fp32",
                **training,
            },
            "evaluation": {"mode": "fasttest"},
            "resources": resources or {},
            "experiments": {
                "nie2023": {"backbones": ["toy"], "methods": {"cl": {"loss": "infonce", "hp": {"tau": 0.05}}}}
            },
        }
    )


def _flat_calibration(tmp_path, tflops: float = 1.0) -> cl_calibration.Calibration:
    """1 TFLOP/s for everything; 10 s start-up, 1 s per GiB of snapshot, 0.5 s per dev evaluation, 20 s
    evaluation start-up, 100 s of fasttest probing."""
    overheads = {"train_startup": 10, "snapshot_per_gib": 1, "dev_evaluation": 0.5, "evaluate_startup": 20}
    overheads |= {"sentence_launch": 0.0, "vision_launch": 0.0}  # no host bound: FLOPs only
    overheads |= {"dev_call": 0.0, "vision_large_image": 0.0}  # no per-call or augmentation seconds
    overheads["padding_free_element"] = 0.0  # no re-padding seconds (the fixture's rows: no profile)
    overheads["senteval_probe_fasttest"] = 100
    return written_calibration(tmp_path / "calibration.json", flat_rates(tflops), overheads_s=overheads)


def test_transformer_parameters_of_the_real_backbones():
    assert transformer_parameters(768, 12, 3072, 30522, 512, 2) == (85_054_464, 109_482_240)
    assert transformer_parameters(1024, 24, 4096, 30522, 512, 2)[0] == 302_309_376
    # roberta-base: 124.6M in all (its 50,265-token vocabulary), the same layers as BERT-base
    assert transformer_parameters(768, 12, 3072, 50265, 514, 1) == (85_054_464, 124_645_632)
    assert cl_flops.backbone_transformer(config_grid(), "roberta-large").non_embedding == 302_309_376


def test_toy_config_plan_matches_hand_computed_flops(tmp_path):
    grid = cl_config.Grid(_toy_config())
    work = cl_flops.cell_work(grid, grid.cells[0])
    assert cl_flops.backbone_transformer(grid, "toy").non_embedding == TOY_NON_EMBEDDING
    # 2000 sentences // 16 = 125 steps; a step: 6 × N × (16 sentences × 2 views × 32 tokens).
    assert work.steps == 125
    assert work.step_flops == 6 * 17_088 * 1024 == 104_988_672
    assert work.train_flops == 125 * 104_988_672
    # dev evaluations at steps 0, 50, 100 and 125 (the last), each a forward of the STS-B dev sentences
    assert work.dev_evaluations == 4
    assert work.dev_flops == 4 * 2 * 17_088 * cl_flops.STSB_DEV_TOKENS
    assert work.analysis_flops == 0
    assert work.snapshots == 2  # steps 60 and 120
    assert work.eval_flops == pytest.approx(2 * 17_088 * cl_flops.SENTEVAL_ALL_TOKENS)

    cal = _flat_calibration(tmp_path)
    jobs = plan.make_plan(grid, cal)
    train = [j for j in jobs if j.rule == "train"]
    encode = [j for j in jobs if j.rule == "encode"]
    assert [j.cell for j in train] == ["nie2023/toy/cl/seed1", "nie2023/toy/cl/seed2"]
    assert [j.cell for j in encode] == [j.cell for j in train]
    snapshot_gib = 12 * cl_flops.backbone_transformer(grid, "toy").total / 2**30
    expected = (
        (125 * 104_988_672 + 4 * 2 * 17_088 * cl_flops.STSB_DEV_TOKENS) / 1e12
        + 10
        + 2 * snapshot_gib
        + 4 * 0.5
    )
    assert train[0].seconds["config"] == pytest.approx(expected)
    # The GPU job of the evaluation encodes (and starts up); the 100 s of probing run in a CPU job.
    assert encode[0].seconds["fp32"] == pytest.approx(2 * 17_088 * cl_flops.SENTEVAL_ALL_TOKENS / 1e12 + 20)
    assert {j.rule for j in jobs} == {"train", "encode"}  # no probe job among the GPU jobs
    assert plan.total_hours(jobs) == pytest.approx(2 * (expected + encode[0].seconds["fp32"]) / 3600)
    assert plan.probe_jobs(grid, cal) == (2, pytest.approx(2 * (20 + 100) / 3600))


def _toy_work(**training) -> cl_flops.CellWork:
    """The work of the toy config's first cell, its ``training`` updated."""
    grid = cl_config.Grid(_toy_config(**training))
    return cl_flops.cell_work(grid, grid.cells[0])


def test_analysis_probe_and_holdout_flops():
    work = _toy_work(analysis_every=50, analysis_sentences=64, analysis_holdout=True)
    assert work.steps == (2000 - 64) // 16 == 121  # the probe is held out of training
    # as many dev sentences as the probe
    dev_part = 64 * cl_flops.STSB_DEV_TOKENS / cl_flops.STSB_DEV_SENTENCES
    # at steps 0, 50, 100, 121: two views of 64 probe sentences × 32 tokens and of 64 dev sentences
    assert work.analysis_flops == pytest.approx(4 * 2 * 17_088 * 2 * (64 * 32 + dev_part))


def test_precision_choices_reach_the_sentence_cells_through_the_override(tmp_path):
    config = _toy_config()
    cal = cl_calibration.load_calibration(H100)
    job = next(j for j in plan.make_plan(cl_config.Grid(config), cal, "bf16") if j.rule == "train")
    assert dict(job.precision) == {"config": "fp32", "fp32": "fp32", "tf32": "tf32", "bf16": "bf16"}
    # The step runs as one CUDA graph by default (no host launches): priced by its FLOPs, in the order
    # of the tensor cores.
    assert job.seconds["fp32"] > job.seconds["tf32"] > job.seconds["bf16"]
    # Eager (cuda_graph: false), a toy model is host-bound in every precision: bf16's autocast casts
    # make its step slower than tf32's (as the H100 measured for BERT-base); fp32 trains padding-free
    # by default (IEEE fp32, a BERT): tf32's launches and the re-padding's, 19 per layer and 14 a step.
    eager = _toy_config(cuda_graph=False)
    job = next(j for j in plan.make_plan(cl_config.Grid(eager), cal, "bf16") if j.rule == "train")
    assert job.seconds["bf16"] > job.seconds["tf32"]
    extra = 125 * (19 * 2 + 14) * cal.overheads_s["sentence_launch"]
    assert job.seconds["fp32"] == pytest.approx(job.seconds["tf32"] + extra)


def test_the_tf32_and_bf16_columns_move_the_oar_and_macl_rows_of_config_yaml():
    """``precision_override`` moves the OAR (fp32 as configured) and MACL (``auto``: bf16) columns; the
    image features (``encode_vision``) are fp32 in every column, the probes CPU time."""
    jobs = plan.make_plan(config_grid(), cl_calibration.load_calibration(cl_calibration.DEFAULT_CALIBRATION))

    def hours(experiments):
        return {c: sum(j.seconds[c] for j in jobs if j.experiment in experiments) / 3600 for c in CHOICES}

    oar, macl = hours({"oar_cifar10", "oar_cifar100"}), hours({"macl_cifar10"})
    assert oar["config"] == oar["fp32"] > oar["tf32"] > oar["bf16"] > 0
    assert macl["fp32"] > macl["tf32"] > macl["bf16"] == macl["config"] > 0
    assert plan.projected_hours(jobs, "tf32")["paper"]["oar"] == pytest.approx(oar["tf32"])
    docs = " ".join((REPO_ROOT / "docs" / "pipeline.md").read_text().split())  # the hours it quotes
    assert f"MACL's Table 9, `auto`, {macl['config']:.1f}, {macl['fp32']:.1f} in fp32" in docs
    trained = {j.experiment: dict(j.precision) for j in jobs if j.rule == "train_vision"}
    assert trained["oar_cifar10"] == trained["oar_cifar100"] == {
        "config": "fp32", "fp32": "fp32", "tf32": "tf32", "bf16": "bf16",
    }  # fmt: skip
    assert trained["macl_cifar10"] == {"config": "bf16", "fp32": "fp32", "tf32": "tf32", "bf16": "bf16"}
    features = [j for j in jobs if j.rule == "encode_vision"]
    assert len(features) == 147 and all(len(set(j.seconds.values())) == 1 for j in features)
    assert all(j.cpu_after_s > 0 for j in features)


@pytest.mark.parametrize(
    "shape",
    [
        ("resnet18", "cifar", 64, None, 32, (512, 128)),  # MACL's CIFAR cells
        ("resnet18", "imagenet", 64, None, 224, None),  # OAR CIFAR-10
        ("resnet50", "imagenet", 64, 512, 224, None),  # OAR CIFAR-100
        ("resnet18", "cifar", 8, None, 16, (512, 128)),  # the demo's
    ],
)
def test_resnet_counts_equal_hooks_on_the_real_encoder(shape):
    """Forward hooks on the encoder the trainer builds (and its head): MACs, parameters, saved outputs."""
    import torch

    from contrastlab.models.vision import ProjectionHead, build_encoder

    arch, stem, width, out_dim, size, head = shape
    counts = {"macs": 0, "saved": 0}

    def hook(module, inputs, output):
        if isinstance(module, torch.nn.Conv2d):
            area = module.kernel_size[0] * module.kernel_size[1]
            counts["macs"] += output.numel() * module.in_channels // module.groups * area
            counts["saved"] += output.numel()
        elif isinstance(module, torch.nn.Linear):
            counts["macs"] += module.in_features * module.out_features
        elif isinstance(module, torch.nn.BatchNorm2d):
            counts["saved"] += output.numel()

    with torch.device("meta"):
        modules = [build_encoder(arch, stem=stem, width=width, out_dim=out_dim)]
        if head:
            modules.append(ProjectionHead(modules[0].feature_dim, *head))
        for module in (m for top in modules for m in top.modules()):
            module.register_forward_hook(hook)
        features = modules[0](torch.empty(1, 3, size, size))
        if head:
            modules[1].eval()(features)
    params = sum(p.numel() for top in modules for p in top.parameters())
    assert cl_flops.vision_forward(*shape) == cl_flops.VisionForward(counts["macs"], params, counts["saved"])


def test_resnet_flops_and_parameters_match_torchvision():
    # torchvision's documented GFLOPS (multiply-adds) at 224: ResNet-18 1.81, ResNet-50 4.09 (their fc,
    # which our encoders drop, is 0.5M and 2.0M of them); parameters without the fc.
    r18 = cl_flops.vision_forward("resnet18", "imagenet", 64, None, 224, None)
    r50 = cl_flops.vision_forward("resnet50", "imagenet", 64, None, 224, None)
    assert r18.macs == pytest.approx(1.81e9, rel=0.01) and r18.params == 11_176_512
    assert r50.macs == pytest.approx(4.09e9, rel=0.01) and r50.params == 23_508_032
    cifar = cl_flops.vision_forward("resnet18", "cifar", 64, None, 32, None)
    assert cifar.macs == pytest.approx(0.556e9, rel=0.01)  # the CIFAR stem keeps 32x32 in the first stage


def test_vision_cell_flops_count_both_views_and_the_oar_pass():
    fwd = cl_flops.vision_forward("resnet18", "imagenet", 64, None, 224, None)
    grid = config_grid()
    oar = cl_flops.cell_work(grid, OAR)
    plain = cl_flops.cell_work(grid, cl_config.Cell("oar_cifar10", "resnet18-oar", "infonce-lr1.0", 42))
    # val_fraction 0.2: the trainer trains on 40,000 of the 50,000 images
    assert plain.steps == oar.steps == 40_000 // 128 * 100 == 31_200
    assert plain.step_flops == 3 * 2 * fwd.macs * 2 * 128
    assert oar.step_flops == 3 * 2 * fwd.macs * (2 * 128 + 2 * 128)  # the labelled batch, two views
    # the per-epoch validation: 100 passes over two views of the 10,000 held-out images, forward only
    assert oar.dev_flops == plain.dev_flops == 100 * 2 * 2 * fwd.macs * 10_000
    assert oar.dev_evaluations == 0
    # launches: two augmentation calls (with blur) and the encoder per pass, plus the rest of the step;
    # validation: 79 batches of 128, each two calls, a forward and its head/loss
    per_call = cl_flops.AUGMENT_LAUNCHES + cl_flops.BLUR_LAUNCHES
    encoder, forward = cl_flops.ENCODER_LAUNCHES["resnet18"]
    assert plain.step_launches == 2 * per_call + encoder + cl_flops.STEP_LAUNCHES
    assert oar.step_launches == 2 * (2 * per_call + encoder) + cl_flops.STEP_LAUNCHES
    assert oar.dev_launches == 100 * 79 * (2 * per_call + forward + cl_flops.VALIDATION_LAUNCHES)


def test_the_validation_is_priced_in_ieee_fp32_whatever_the_cells_precision(tmp_path):
    cell = cl_config.Cell("oar_cifar10", "resnet18-oar", "infonce-lr1.0", 42)
    bf16 = cl_flops.cell_work(config_grid(), cell, "bf16")
    rates = [
        cl_calibration.Measurement("vision_large", p, 1e12 * r, 1.0) for p, r in (("fp32", 10), ("bf16", 100))
    ]
    overheads = {"train_startup": 0.0, "vision_launch": 0.0, "snapshot_per_gib": 0}
    loaded = written_calibration(tmp_path / "calibration.json", rates, overheads_s=overheads)
    seconds = cl_calibration.train_seconds(bf16, loaded)
    assert seconds == pytest.approx(bf16.train_flops / 100e12 + bf16.dev_flops / 10e12)


def test_an_eager_image_step_is_priced_at_its_host_launches_when_they_outlast_its_flops():
    """A MACL step launches 875 kernels whatever its batch, so an eager batch-64 step costs its launches."""
    grid, cal = config_grid(), cl_calibration.load_calibration(H100)
    macl = cl_config.Cell("macl_cifar10", "resnet18-cifar", "ntxent-bs64", 42)
    captured = cl_flops.cell_work(grid, macl)
    assert captured.graphed  # the trainer captures MACL's step by default; cuda_graph: false runs it eager
    small = dataclasses.replace(captured, graphed=False)
    launch = cal.overheads_s["vision_launch"]
    assert small.step_launches == 2 * cl_flops.AUGMENT_LAUNCHES + 214 + cl_flops.STEP_LAUNCHES == 875
    flop_s = cal.seconds(small.step_flops, "vision", "bf16")
    assert flop_s < small.step_launches * launch  # host-bound at batch 64
    seconds = cl_calibration.step_seconds(small, cal)
    assert seconds == pytest.approx(875 * launch) == pytest.approx(1 / 36, rel=1e-3)
    # One augmentation call for both views (augment_calls: one) saves a call's launches per step.
    one = cl_flops._vision_work(grid, macl, dict(grid.settings(macl)) | {"augment_calls": "one"}, True)
    assert small.step_launches - one.step_launches == cl_flops.AUGMENT_LAUNCHES
    # Where the FLOPs outlast the launches (OAR at 224 px, IEEE fp32) the FLOPs set the step, at the
    # 224-px rates, plus the augmentation of its 512 images (2 views of 128, and of the labelled 128).
    oar = cl_flops.cell_work(grid, OAR)
    assert oar.rate_class == "vision_large" and oar.step_images == 512 and not oar.graphed
    assert cl_calibration.step_seconds(oar, cal) == pytest.approx(
        cal.seconds(oar.step_flops, "vision_large", "fp32") + 512 * cal.overheads_s["vision_large_image"]
    )


def test_the_shipped_h100_calibration_prices_the_measured_h100_steps():
    """docs/measured.md (H100, torch 2.11, 2026-11-24): BERT-base batch 64 × 32 tokens 16.8 steps/s in
    fp32 (gpu_share.py, one copy); the eager bf16 step 24.1 steps/s (1,389 GFLOP at its 21 tokens,
    launch-bound); MACL batch 256 bf16 36 steps/s; OAR 4.9 steps/s fp32."""
    cal = cl_calibration.load_calibration(H100)
    data = json.loads(H100.read_text())
    for entry in cal.measured_entries:  # each names a figure of the file
        section, *keys = entry.split(".")
        assert functools.reduce(lambda d, k: d[k], keys, data[section]) > 0, entry
    assert f"except {len(cal.measured_entries)} figures measured on a GPU" in cal.describe()

    def step(precision, flops, graphed):
        launches = cl_flops.SENTENCE_STEP_LAUNCHES[precision]
        work = cl_flops.CellWork(
            "sentence", precision, 1, flops, flops, 0, 0.0, 0.0, 0, 0.0, 0.0, 0, 0.0, "",
            step_launches=launches, graphed=graphed,
        )  # fmt: skip
        return 1 / cl_calibration.step_seconds(work, cal)

    assert step("fp32", cl_flops.training_step_flops(85_054_464, 64, 32), True) == pytest.approx(
        16.8, rel=0.01
    )
    assert step("bf16", 1.389e12, False) == pytest.approx(24.1, rel=0.01)
    grid = config_grid()
    macl, oar = cl_flops.cell_work(grid, MACL_IMAGES), cl_flops.cell_work(grid, OAR)
    eager = dataclasses.replace(macl, graphed=False)  # the H100 measured MACL's eager step
    assert 1 / cl_calibration.step_seconds(eager, cal) == pytest.approx(36, rel=0.01)
    assert 1 / cl_calibration.step_seconds(oar, cal) == pytest.approx(4.9, rel=0.01)


def test_full_config_plans_in_seconds_and_prints_every_section(tmp_path, capsys):
    written = plan.plan_report(
        config_yaml(), "config", cl_calibration.DEFAULT_CALIBRATION, tmp_path, title="config.yaml"
    )
    out = capsys.readouterr().out
    for title in ("Per paper", "Per experiment", "Per rule", "Peak GPU memory", "Per cell"):
        assert f"### {title}" in out
    assert "GPU-h all tf32" in out and "the shipped H200 file" in out
    rows = (tmp_path / "plan.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 369 + 4 and written[0].name == "plan.md"
    rules = {row.split(",")[0] for row in rows[1:]}
    # the image probes (evaluate_vision) run on the CPU, like the SentEval ones: no GPU job of the plan
    assert rules == {"train", "encode", "train_vision", "encode_vision", "encode_pretrained"}, rules
    # the CPU probe jobs, one line: 222 sentence cells and 4 Pretrained rows, 30 s + 300 s (test mode)
    assert f"Not GPU time: 226 SentEval probe jobs on the CPU, {226 * 330 / 3600:.1f} hours in all" in out


def test_a_measured_calibration_replaces_the_default_and_fills_gaps_from_it(tmp_path):
    path = tmp_path / "calibration.json"
    rates = [cl_calibration.Measurement("sentence", "bf16", 2e12, steps) for steps in (50.0, 70.0)]
    loaded = written_calibration(path, rates, "H100", "gpu-check", overheads_s={"train_startup": 42.0})
    assert loaded.achieved_tflops["sentence"]["bf16"] == 120.0 and loaded.measured
    assert loaded.overheads_s["train_startup"] == 42.0
    assert "sentence/fp32" in loaded.filled_from_default and "measured" in loaded.describe()
    path.write_text(json.dumps({**json.loads(path.read_text()), "achieved_tflops": {"vision": {"bf16": -1}}}))
    with pytest.raises(ValueError, match=r"achieved_tflops\.vision\.bf16 must be a positive finite number"):
        cl_calibration.load_calibration(path)
    with pytest.raises(ValueError, match=r"\S+ does not exist; name a file make gpu-check wrote$"):
        cl_calibration.load_calibration(tmp_path / "typo.json")  # was "cannot be read as JSON; fix or delete"


@pytest.mark.fault(
    "NaN, strings, inf or a non-positive number in calibration.json (Q2)", "one line naming file and key"
)
@pytest.mark.parametrize(
    ("edit", "key"),
    [
        ({"overheads_s": {"train_startup": float("nan")}}, "overheads_s.train_startup"),
        ({"gpu_memory_gib": "lots"}, "gpu_memory_gib"),
        ({"gpu_memory_gib": float("inf")}, "gpu_memory_gib"),
        ({"achieved_tflops": {"sentence": {"fp32": float("inf")}}}, "achieved_tflops.sentence.fp32"),
        ({"achieved_tflops": {"sentence": {"fp32": 0}}}, "achieved_tflops.sentence.fp32"),
        ({"achieved_tflops": {"sentence": {"fp32": "fast"}}}, "achieved_tflops.sentence.fp32"),
        ({"packing": {"speedup": {"bf16": {"2": float("nan")}}}}, "packing.speedup.bf16.2"),
        ({"padding_free_ratio": {"bf16": float("inf")}}, "padding_free_ratio.bf16"),
    ],
)
def test_a_calibration_number_that_is_not_a_finite_positive_number_is_named(tmp_path, edit, key):
    """Reliability 9, Q2: JSON as Python reads it allows NaN and Infinity; each number the plan prices
    with is checked, so `make plan` says which key of which file is wrong instead of pricing the demo at
    0.2 GPU-h (inf TFLOP/s) or stopping on "cannot convert float NaN to integer"."""
    path = tmp_path / "calibration.json"
    cal = cl_calibration.calibration_from_measurements(
        [cl_calibration.Measurement("sentence", "bf16", 2e12, 50.0)], device="H100", source="gpu-check"
    )
    path.write_text(json.dumps({**cal, **edit}))  # NaN and Infinity written as JSON's extensions
    with pytest.raises(ValueError) as raised:
        cl_calibration.calibration_for(None, path)
    message = str(raised.value)
    assert f"calibration {path}: {key} must be" in message and "\n" not in message


@pytest.mark.parametrize("card", sorted(cl_calibration.SHIPPED_CALIBRATIONS))
def test_shipped_calibrations_are_peak_times_mfu(card):
    data = json.loads(cl_calibration.SHIPPED_CALIBRATIONS[card].read_text())
    assert data["peak_tflops"] == {p: cl_calibration.GPU_PEAKS[card][p] for p in RESOLVED}
    for track, per_precision in data["achieved_tflops"].items():
        for precision, value in per_precision.items():
            mfu = data["mfu"][track][precision]
            assert value == pytest.approx(data["peak_tflops"][precision] * mfu, rel=1e-5)


#: docs/cost.md's phrase for each group of experiments -> the experiments it counts.
DOC_GROUPS = {
    "Nie": ["nie2023"],
    "Li": ["li2024"],
    "MACL": ["macl"],
    "figures": ["nie2023_fig3", "li2024_fig6_m", "li2024_fig6_tau", "li2024_fig6_r", "li2024_conjectures"],
    "MACL Table 9": ["macl_cifar10"],
    "OAR": ["oar_cifar10", "oar_cifar100"],
}


def test_documented_cell_counts_equal_the_config():
    grid = config_grid()
    counts = plan.cell_counts(grid)
    text = " ".join((REPO_ROOT / "docs" / "cost.md").read_text().split())
    assert (
        f"`config.yaml` is the full grid: {counts['total']} training cells. "
        f"{counts['sentence']} sentence cells:" in text
    )
    assert f"{counts['vision']} image cells:" in text and f'the {counts["pretrained"]} "Pretrained"' in text
    per_experiment = collections.Counter(cell.experiment for cell in grid.cells)
    assert sorted(e for group in DOC_GROUPS.values() for e in group) == sorted(per_experiment)
    for label, experiments in DOC_GROUPS.items():
        found = re.findall(rf"(?:; |: |\. ){re.escape(label)}: (\d+) \(", text)
        assert found == [str(sum(per_experiment[e] for e in experiments))], (label, found)
    assert counts["figure"] == sum(per_experiment[e] for e in DOC_GROUPS["figures"])


def test_runtime_requests_are_the_projection_with_a_margin(tmp_path):
    grid = cl_config.Grid(_toy_config())
    cell = grid.cells[0]
    cal = _flat_calibration(tmp_path, tflops=1e-6)  # a million times slower: the toy cell takes hours
    jobs = {j.rule: j.seconds["config"] for j in plan.make_plan(grid, cal)}
    projected = jobs["train"]
    assert projected > 3600
    minutes = plan.job_runtime_minutes(grid, "train", cal, cell=cell)
    assert minutes == -(-projected * plan.RUNTIME_MARGIN // 60)
    assert plan.job_runtime_minutes(grid, "train", cal, cell=cell, attempt=2) == pytest.approx(
        2 * minutes, abs=1
    )
    # a job projected at seconds still asks for the minimum
    fast = _flat_calibration(tmp_path / "fast", tflops=1000.0)
    assert plan.job_runtime_minutes(grid, "encode", fast, cell=cell) == plan.MINIMUM_RUNTIME_MIN
    # the encoding's request is its projection; the CPU probe job's is its start-up and probing, which
    # no GPU speed changes
    encoding = plan.job_runtime_minutes(grid, "encode", cal, cell=cell)
    assert encoding == -(-jobs["encode"] * plan.RUNTIME_MARGIN // 60)
    assert plan.job_runtime_minutes(grid, "encode_pretrained", cal, backbone="toy") == pytest.approx(
        encoding, abs=1
    )
    for calibration in (cal, fast):  # a million times apart in TFLOP/s
        for rule in ("evaluate", "evaluate_pretrained"):
            # the 10th attempt: (20 s + 100 s) x 2 x 10 = 40 minutes, above the minimum of 30
            minutes = plan.job_runtime_minutes(grid, rule, calibration, cell=cell, backbone="toy", attempt=10)
            assert minutes == 40, (rule, minutes)
    with pytest.raises(ValueError, match="no projection for rule 'tables'"):
        plan.job_runtime_minutes(grid, "tables", cal, cell=cell)


def test_a_user_corpus_is_counted_line_by_line(tmp_path):
    corpus = tmp_path / "wiki.txt"
    corpus.write_text("".join(f"sentence {i}\n" for i in range(1000)))
    config = _toy_config()
    config["data"] = {"fixture": False, "wiki_path": str(corpus)}
    assert cl_flops.cell_work(cl_config.Grid(config), cl_config.Grid(config).cells[0]).steps == 1000 // 16


def test_a_measured_step_overhead_is_taken_out_of_the_flop_rate():
    measured = [cl_calibration.Measurement("vision", "bf16", 1e12, 10.0)]  # 0.1 s a step
    calibrate = functools.partial(
        cl_calibration.calibration_from_measurements, measured, device="H100", source="test"
    )
    with_overhead = calibrate(overheads_s={"vision_step": 0.05})
    assert with_overhead["achieved_tflops"]["vision"]["bf16"] == pytest.approx(20.0)  # 1e12 in 0.05 s
    without = calibrate()
    assert without["achieved_tflops"]["vision"]["bf16"] == pytest.approx(10.0)
    assert without["overheads_s"]["vision_step"] == 0.0  # not the default's: no double counting
    with pytest.raises(ValueError, match="leaves no time for the FLOPs"):
        calibrate(overheads_s={"vision_step": 0.2})


@pytest.mark.parametrize(
    "device_name, bf16",
    [
        ("NVIDIA H100 80GB HBM3", 989.0),  # what torch calls the SXM card
        ("NVIDIA H100 PCIe", 756.5),
        ("NVIDIA H100 NVL", 835.5),
        ("NVIDIA H200", 989.0),
        ("NVIDIA H200 NVL", 835.5),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA A100 80GB PCIe", 312.0),
    ],
)
def test_gpu_peaks_tell_a_familys_pcie_and_nvl_cards_from_its_sxm_card(device_name, bf16):
    """MFU divides by the card's own peak: a PCIe or NVL H100 matched as "H100" got the SXM5 peak."""
    assert cl_calibration.peak_tflops(device_name, "bf16")[0] == bf16
    assert cl_calibration.peak_tflops("NVIDIA GeForce RTX 4090", "bf16")[0] is None


def test_the_plan_states_the_disk_a_run_needs():
    """Kept checkpoints = fp32 weights of every trained cell; the snapshot of the largest
    cell (weights, Adam moments, best checkpoint: 16 bytes a parameter); the searches' points apart."""
    grid = cl_config.Grid(
        {
            "backbones": {"base": {"params_millions": 100}, "large": {"params_millions": 300}},
            "experiments": {},
        }
    )
    jobs = [
        SimpleNamespace(rule="train", cell="nie/base/cl/seed42"),
        SimpleNamespace(rule="encode", cell="nie/base/cl/seed42"),
        SimpleNamespace(rule="train", cell="nie/large/cl/seed42"),
    ]
    searches = [SimpleNamespace(rule="train", cell=f"nie/base/cl~p{i}/seed42") for i in range(30)]
    (disk,) = plan.disk_blocks(grid, jobs, searches)
    assert disk.text.startswith("Disk: 1.6 GB of kept checkpoints (2 cells, fp32 weights), plus up to 4.8 GB")
    assert "keep 12 GB more (30 points" in disk.text


def test_memory_rows_name_the_smallest_card_a_kind_fits():
    """The searches' batch-512 large-model points (about 61 GiB) need an 80-GiB card."""
    jobs = [
        SimpleNamespace(kind="bert-large batch 512 fp32", peak_gib=60.7),
        SimpleNamespace(kind="bert-large batch 512 fp32", peak_gib=60.7),
        SimpleNamespace(kind="bert-base batch 64 fp32", peak_gib=5.2),
        SimpleNamespace(kind="", peak_gib=0.0),  # an evaluation job: no row
    ]
    rows = plan.memory_rows(jobs, SimpleNamespace(gpu_memory_gib=40.0))
    assert [(r["cell kind"], r["cells"], r["fits"], r["smallest card"]) for r in rows] == [
        ("bert-base batch 64 fp32", "1", "yes", "24 GiB"),
        ("bert-large batch 512 fp32", "2", "no (> 40)", "80 GiB"),
    ]


def _launches(fn) -> int:
    """Non-view ATen ops ``fn`` dispatches (what an eager CUDA run launches as kernels, one each)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    views = {
        aten.view.default, aten._unsafe_view.default, aten.expand.default, aten.t.default,
        aten.permute.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.default,
        aten.squeeze.dims, aten.slice.Tensor, aten.select.int, aten.detach.default,
        aten.as_strided.default, aten.reshape.default, aten.unbind.int, aten.alias.default,
        aten.transpose.int, aten.split.Tensor, aten.chunk.default, aten.empty.memory_format,
        aten.empty_like.default,
    }  # fmt: skip

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += func not in views
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return Count.n


def test_the_launch_counts_are_those_of_the_projects_augmentation_and_encoders():
    import torch

    from contrastlab.models.vision import build_encoder
    from contrastlab.training.augment import SimCLRAugment

    images = torch.randint(0, 256, (4, 3, 32, 32), dtype=torch.uint8)
    stats = {"mean": (0.5,) * 3, "std": (0.25,) * 3}
    plain, blurred = SimCLRAugment(32, **stats), SimCLRAugment(224, **stats, blur_p=0.5)
    generator = torch.Generator().manual_seed(0)
    plain(images, generator), blurred(images, generator)  # warm: constants are cached per device
    assert _launches(lambda: plain(images, generator)) == cl_flops.AUGMENT_LAUNCHES
    blur = _launches(lambda: blurred(images, generator))
    assert blur == cl_flops.AUGMENT_LAUNCHES + cl_flops.BLUR_LAUNCHES
    # the count does not grow with the batch: every draw is a batched tensor
    larger = images.repeat(8, 1, 1, 1)
    assert _launches(lambda: plain(larger, generator)) == cl_flops.AUGMENT_LAUNCHES
    for arch, (both, forward) in cl_flops.ENCODER_LAUNCHES.items():
        encoder = build_encoder(arch, stem="imagenet" if arch == "resnet50" else "cifar", width=4)
        x = torch.randn(2, 3, 32, 32)
        encoder(x).sum().backward()  # warm
        assert _launches(functools.partial(encoder, x)) == forward, arch
        assert _launches(lambda e=encoder, x=x: e(x).sum().backward()) == both, arch


def test_cluster_doc_states_the_wall_time_nies_infonce_cell_asks_per_card():
    """docs/cluster.md's wall times of Nie's InfoNCE BERT-base cell per card: what rule train requests."""
    t = " ".join((REPO_ROOT / "docs" / "cluster.md").read_text().split())
    said = re.search(r"asks (\d+) minutes on an H200[^,]*, (\d+) on an H100, (\d+) on an A100 and (\d+)", t)
    config, asked = cl_config.load(REPO_ROOT / "config.yaml"), []
    cell = cl_config.Cell("nie2023", "bert-base", "cl", 42)
    for card in ("H200", "H100", "A100", "V100"):
        grid = cl_config.Grid({**config, "resources": {**config["resources"], "gpu_model": card}})
        cal = cl_calibration.calibration_for(card, cl_calibration.SHIPPED_CALIBRATIONS.get(card, DEFAULT))
        asked.append(str(plan.job_runtime_minutes(grid, "train", cal, cell=cell)))
    assert said and list(said.groups()) == asked
