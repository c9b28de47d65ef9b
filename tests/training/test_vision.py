"""The vision trainer (MACL App. B.3 setting at toy scale on digits): logs, resume after SIGKILL,
non-finite losses, settings."""

from __future__ import annotations

import contextlib
import json
import random
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from contrastlab.losses import build_loss
from contrastlab.losses.oar import orthonormal_anchors
from contrastlab.models.vision import build_encoder
from contrastlab.precision import fp32_mode_now, set_fp32_mode
from contrastlab.training import runtime
from contrastlab.training import vision as trainer
from contrastlab.training.runtime import NonFiniteLossError
from contrastlab.training.vision import (
    VisionTrainSettings,
    effective_lr,
    load_encoder,
    load_weights,
    two_views,
)
from contrastlab.training.vision_step import OarBatch, train_step
from tests import forked
from tests.training.conftest import poison_loss

RUNNER = Path(__file__).with_name("_run_vision.py")


@pytest.fixture(scope="module")
def reference(tmp_path_factory, vision_settings, train_image):
    """``reference(name)``: the folder of the tiny cell with :data:`CELLS` ``[name]``'s overrides, trained
    uninterrupted once per module."""
    folders: dict[str, Path] = {}

    def get(name: str = "tiny") -> Path:
        if name not in folders:
            folders[name] = tmp_path_factory.mktemp(f"reference_{name}")
            train_image(vision_settings(**CELLS[name]), folders[name])
        return folders[name]

    return get


def test_log_and_encoder(reference, vision_settings):
    folder = reference()
    records = [json.loads(line) for line in (folder / "train_log.jsonl").read_text().splitlines()]
    assert [r["event"] for r in records][0] == "start" and records[-1]["event"] == "end"
    assert [r["step"] for r in records if r["event"] == "train"] == list(range(3, 25, 3))
    train = [r for r in records if r["event"] == "train"]
    assert all(r["stats"]["tau_a"] > 0 and 0 < r["images_per_s"] for r in train)
    assert records[0]["steps_per_epoch"] == 1437 // 32 and records[0]["effective_lr"] == 1e-3
    encoder, summary = load_encoder(folder / "encoder")
    assert summary["steps"] == 24 and encoder(torch.zeros(2, 3, 16, 16)).shape == (2, 32)  # width 4 -> 32-d
    assert not (folder / "state").exists()  # snapshots are removed when the cell finishes
    decided = {**vision_settings(), "cuda_graph": False}  # the configured settings, decided for the CPU
    assert VisionTrainSettings.from_dict(summary["settings"]) == VisionTrainSettings.from_dict(decided)
    assert summary["meta"] and summary["channels_last"] is False and summary["precision"] == "fp32"


#: An OAR cell (OAR §4-5), over the tiny cell: SGD with a cosine rate over 2 epochs of 22 steps, no
#: projection head, the anchor term on 10% of the labels (143 digits, 4 labelled batches of 32 per cycle).
OAR = {
    "loss": "ntxent",
    "loss_hp": {"tau": 0.5},
    "optimizer": "sgd",
    "lr": 0.05,
    "lr_reference_batch": None,
    "lr_schedule": "cosine",
    "weight_decay": 5e-4,
    "projection_head": False,
    "batch_size": 64,
    "epochs": 2,
    "max_steps": None,
    "log_every": 4,
    "state_every": 7,
    "oar_fraction": 0.1,
    "oar_batch_size": 32,
    "val_fraction": 0.2,  # the authors' 80/20 split, the encoder of the lowest validation loss kept
    "keep": "best_val_loss",
}


#: Channels-last on the CPU (the CUDA default): width 8, as PyTorch 2.14's CPU channels-last
#: convolutions corrupt the heap at width 4 with one thread.
CHANNELS_LAST = {"channels_last": True, "width": 8, "max_steps": 12, "state_every": 4}

#: The cells with a reference run (:func:`reference`): overrides of the tiny cell.
CELLS = {"tiny": {}, "oar": OAR, "channels_last": CHANNELS_LAST}


def test_oar_cell_keeps_the_epoch_of_the_lowest_validation_loss_and_trains_toward_its_anchors(reference):
    folder = reference("oar")
    records = [json.loads(line) for line in (folder / "train_log.jsonl").read_text().splitlines()]
    start, train = records[0], [r for r in records if r["event"] == "train"]
    val = [r for r in records if r["event"] == "val"]
    assert [r["epoch"] for r in val] == [0, 1] and all(r["val_loss"] > 0 for r in val)
    losses = [r["val_loss"] for r in val]
    encoder, summary = load_encoder(folder / "encoder")
    assert summary["val_losses"] == losses and summary["kept_epoch"] == losses.index(min(losses))
    assert summary["val_images"] == 287 and summary["keep"] == "best_val_loss"
    assert all(r["stats"]["anchor_cos"] == pytest.approx(1 - r["stats"]["oar"]) for r in train)
    # 1437 digits: 287 held out for validation, 1150 train (17 batches of 64); 143 labelled (10% of all).
    assert start["oar_labelled"] == 143 and start["loss_dim"] == 32 and start["steps_per_epoch"] == 17
    assert start["n_images"] == 1150
    # The rate follows the cosine of the epoch: 0.05 in epoch 0, 0.05 x (1 + cos(pi/2)) / 2 in epoch 1.
    assert {r["epoch"]: r["lr"] for r in train} == {0: 0.05, 1: pytest.approx(0.025)}
    oar_terms = [r["stats"]["oar"] for r in train]
    assert 0 <= oar_terms[-1] < oar_terms[0] <= 2  # 1 - cos in [0, 2]; it is being minimised
    anchors = load_file(folder / "encoder" / "anchors.safetensors")["anchors"]
    expected = orthonormal_anchors(10, 32, generator=torch.Generator().manual_seed(42))  # the default seed
    assert torch.equal(anchors, expected.float())
    assert summary["settings"]["oar_fraction"] == 0.1 and encoder(torch.zeros(2, 3, 16, 16)).shape == (2, 32)


@pytest.mark.fault(
    "SIGKILL of a vision training job at a random step", "rerun resumes; encoder and log bit-identical"
)
@pytest.mark.parametrize("seed", [0, 1, "oar", "channels_last"])
def test_sigkill_at_a_random_step_resumes_bit_identically(
    reference, tmp_path, seed, observed, vision_settings, train_image
):
    name = seed if seed in CELLS else "tiny"
    cell, straight = vision_settings(**CELLS[name]), reference(name)
    kill_at = {"oar": (8, 40), "channels_last": (5, 10)}.get(seed, (6, 22))
    kill_at = random.Random(seed).randint(*kill_at)
    # Only the killed run needs its own interpreter (forked: tests/forked.py), which SIGKILLs itself after
    # optimiser step kill_at; the resume and the references run in-process.
    killed = forked.run_script(RUNNER, [json.dumps(cell), str(tmp_path), str(kill_at)], tmp_path / "run.log")
    killed.join(timeout=300)
    assert killed.exitcode == -9
    assert (tmp_path / "state" / "state.pt").exists() and not (tmp_path / "encoder").exists()
    train_image(cell, tmp_path)
    got, expected = load_weights(tmp_path / "encoder"), load_weights(straight / "encoder")
    assert got.keys() == expected.keys() and all(torch.equal(got[k], expected[k]) for k in got)

    def without_timing(path):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        keep = [r for r in lines if r["event"] == "train"]
        return [{k: v for k, v in r.items() if k not in ("steps_per_s", "images_per_s")} for r in keep]

    assert without_timing(tmp_path / "train_log.jsonl") == without_timing(straight / "train_log.jsonl")
    assert '"event": "resume"' in (tmp_path / "train_log.jsonl").read_text()
    cell_name = {"oar": " (OAR cell)", "channels_last": " (channels-last)"}.get(seed, "")
    observed(f"killed after step {kill_at}{cell_name}; resumed; encoder weights and log equal")


@pytest.mark.fault("NaN loss in a vision cell", "NonFiniteLossError naming the step and the loss stats")
def test_a_non_finite_loss_stops_with_the_step(tmp_path, monkeypatch, observed, vision_settings, train_image):
    poison_loss(monkeypatch, trainer, 4)
    with pytest.raises(NonFiniteLossError, match=r"not finite at step 4.*loss stats") as caught:
        train_image(vision_settings(max_steps=6), tmp_path)
    observed(str(caught.value)[:90])


def test_without_drop_last_the_short_batch_of_each_epoch_is_trained(
    tmp_path, capsys, vision_settings, train_image
):
    # 1437 digits in batches of 700: 700, 700, 37 per epoch; 4 steps cross into the second epoch.
    settings = vision_settings(batch_size=700, drop_last=False, max_steps=4, log_every=1, state_every=100)
    summary = train_image(settings, tmp_path, progress=True)
    assert summary["steps_per_epoch"] == 3 and summary["epochs"] == 4 / 3
    records = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records if r["event"] == "train"] == [0, 0, 0, 1]
    progress = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    assert [r["step"] for r in progress] == [1, 2, 3, 4]  # one JSON line per log step on stderr
    with pytest.raises(ValueError, match="last batch of one image"):
        train_image(vision_settings(batch_size=718, drop_last=False), tmp_path / "short")


def test_settings_round_trip_through_json_reject_bad_values_and_scale_the_rate_above_256():
    lrs = [effective_lr(VisionTrainSettings(batch_size=b)) for b in (64, 256, 512, 1024)]
    assert lrs == [1e-3, 1e-3, 2e-3, 4e-3]
    assert effective_lr(VisionTrainSettings(batch_size=1024, lr_reference_batch=None)) == 1e-3
    with pytest.raises(ValueError, match="unknown vision training setting.*dropout"):
        VisionTrainSettings.from_dict({"dropout": 0.1})
    settings = VisionTrainSettings(dataset="digits", crop_scale=[0.8, 1.0], jitter=[0.2, 0.2, 0.2, 0.1])
    augment = settings.augment(16, (0.5,) * 3, (0.2,) * 3)
    assert settings.crop_scale == augment.crop_scale == (0.8, 1.0) and augment.jitter == (0.2, 0.2, 0.2, 0.1)
    assert VisionTrainSettings.from_dict(json.loads(json.dumps(settings.to_dict()))) == settings
    assert augment.blur_p == 0.0  # MACL's augmentation: no blur unless asked
    blurred = VisionTrainSettings(dataset="digits", blur_p=0.5, blur_sigma=[0.1, 2.0], blur_kernel=7)
    augment = blurred.augment(16, (0.5,) * 3, (0.2,) * 3)
    assert (augment.blur_p, augment.blur_sigma, augment.blur_kernel) == (0.5, (0.1, 2.0), 7)
    assert VisionTrainSettings.from_dict(json.loads(json.dumps(blurred.to_dict()))) == blurred
    for bad, message in [
        ({"crop_scale": (0.5, 0.2)}, "crop_scale"),
        ({"jitter": (0.4, 0.4, 0.4)}, "jitter"),
        ({"gray_p": 1.5}, "gray_p"),
        ({"batch_size": 1}, "batch_size"),
        ({"max_steps": 0}, "max_steps"),
        ({"optimizer": "lars"}, "optimizer must be one of adam, sgd"),
        ({"lr_schedule": "step"}, "lr_schedule must be one of constant, cosine"),
        ({"oar_fraction": 1.5}, "oar_fraction"),
        ({"oar_batch_size": 1}, "oar_batch_size"),
        ({"momentum": 1.0}, "momentum"),
        ({"blur_p": -0.1}, "blur_p"),
        ({"blur_sigma": (2.0, 0.1)}, "blur_sigma"),
        ({"blur_kernel": 12}, "blur_kernel"),
        ({"blur_kernel": 0}, "blur_kernel must be >= 1 or None, got 0"),
        ({"jitter": (0.4, 0.4, 0.4, 0.6)}, r"jitter\[3\] must be <= 0.5, got \[0.4, 0.4, 0.4, 0.6\]"),
        ({"jitter": (0.4, -0.1, 0.4, 0.1)}, r"jitter\[1\] must be >= 0"),
        ({"crop_scale": (0.5, 1.2)}, r"crop_scale\[1\] must be <= 1"),
        ({"crop_ratio": (0.0, 1.0)}, r"crop_ratio\[0\] must be > 0"),
        ({"crop_scale": (0.1, 0.2, 0.3)}, "crop_scale must have at most 2 items"),
        ({"precision": "fp8"}, "precision must be one of auto, fp32, tf32, bf16, fp16"),
    ]:
        with pytest.raises(ValueError, match=message):
            VisionTrainSettings(**bad)


def test_oar_validation_is_ieee_fp32_without_autocast_and_the_blur_runs_in_the_step(
    tmp_path, monkeypatch, vision_settings, train_image
):
    """Validation: IEEE fp32 without autocast; OAR's blur: the step's precision from the first step."""
    monkeypatch.setattr(runtime.Precision, "fp32_mode", property(lambda self: "tf32"))
    seen: dict[bool, set] = {True: set(), False: set()}  # encoder.training -> (fp32 mode, autocast)
    build, draw = trainer._build, trainer.OarBatches.batch

    def build_recording(*args, **kwargs):
        encoder, head, loss_dim = build(*args, **kwargs)

        def record(module, _inputs):
            mode = tuple(fp32_mode_now().values())
            seen[module.training].add((mode, torch.is_autocast_enabled("cpu")))

        encoder.register_forward_pre_hook(record)
        return encoder, head, loss_dim

    blurs = []

    def draw_recording(self, *args):
        blurs.append(tuple(fp32_mode_now().values()))
        return draw(self, *args)

    monkeypatch.setattr(trainer, "_build", build_recording)
    monkeypatch.setattr(trainer.OarBatches, "batch", draw_recording)
    torch.backends.cuda.matmul.fp32_precision = "none"  # PyTorch's defaults, as in a fresh process
    torch.backends.cudnn.conv.fp32_precision = torch.backends.cudnn.rnn.fp32_precision = "tf32"
    try:
        train_image(vision_settings(**OAR | {"precision": "bf16", "epochs": 1}), tmp_path)
    finally:
        set_fp32_mode("ieee")
    assert seen[True] == {(("tf32", "tf32"), True)}  # the training step: its precision, autocast on
    assert seen[False] == {(("ieee", "ieee"), False)}  # the validation: IEEE fp32, no autocast
    _, summary = load_encoder(tmp_path / "encoder")
    assert summary["precision"] == "bf16" and summary["val_losses"]
    assert len(blurs) == summary["steps"] > 1 and set(blurs) == {("tf32", "tf32")}


def _pair_statistics(view1: torch.Tensor, view2: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per image pair: each view's mean and spread (crop, flip, jitter), whether it is grey, and how far
    the two views lie apart (which a pairing error, e.g. shared draws, would move)."""
    grey = [
        (v[:, 0] == v[:, 1]).flatten(1).all(1) & (v[:, 1] == v[:, 2]).flatten(1).all(1)
        for v in (view1, view2)
    ]
    return {
        "mean1": view1.mean((1, 2, 3)),
        "mean2": view2.mean((1, 2, 3)),
        "std1": view1.std((1, 2, 3)),
        "std2": view2.std((1, 2, 3)),
        "distance": (view1 - view2).pow(2).mean((1, 2, 3)).sqrt(),
        "grey": grey[0].long() * 2 + grey[1].long(),  # the pair's 2 x 2 grey cell
    }


def _same_distribution(a: dict, b: dict) -> dict[str, float]:
    """p-values: two-sample KS for the continuous statistics, chi-square on the 2 x 2 grey cells."""
    from scipy.stats import chi2_contingency, ks_2samp

    out = {k: ks_2samp(a[k].numpy(), b[k].numpy()).pvalue for k in a if k != "grey"}
    table = torch.stack([torch.bincount(x["grey"], minlength=4) for x in (a, b)]).numpy()
    out["grey"] = chi2_contingency(table).pvalue
    return out


@pytest.mark.parametrize(
    "settings",
    [
        {},  # MACL's SimCLR defaults
        {"crop_scale": (0.8, 1.0), "jitter": (0.2, 0.2, 0.2, 0.1), "blur_p": 0.5},  # OAR's, with the blur
    ],
    ids=["macl", "oar"],
)
def test_one_augmentation_call_draws_the_view_pairs_of_two(settings):
    """One call and two give one distribution of view pairs (KS, chi-square, 3,000 pairs); broken fails."""
    augment = VisionTrainSettings(**settings).augment(16, (0.5,) * 3, (0.25,) * 3)
    images = (torch.rand(3000, 3, 16, 16, generator=torch.Generator().manual_seed(0)) * 255).to(torch.uint8)
    two = _pair_statistics(*two_views(augment, images, torch.Generator().manual_seed(1), "two"))
    one = _pair_statistics(*two_views(augment, images, torch.Generator().manual_seed(2), "one"))
    assert not torch.equal(two["mean1"], one["mean1"])  # other draws ...
    p_values = _same_distribution(two, one)
    assert min(p_values.values()) > 1e-3, p_values  # ... from the same distribution
    shared = augment(images, torch.Generator().manual_seed(3))
    broken = _same_distribution(two, _pair_statistics(shared, shared))
    assert broken["distance"] < 1e-6 and broken["grey"] < 1e-6, broken


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none visible)")
def test_the_oar_step_on_cuda_never_waits_for_the_gpu():
    """An OAR step (both calls, both passes, the backward) passes torch's CUDA sync detector."""
    cuda = torch.device("cuda")
    encoder = build_encoder("resnet18", stem="cifar", width=4).to(cuda)
    anchors = orthonormal_anchors(10, encoder.feature_dim, generator=torch.Generator().manual_seed(0)).to(
        cuda
    )
    augment = VisionTrainSettings(blur_p=0.5).augment(16, (0.5,) * 3, (0.25,) * 3)
    images = torch.randint(0, 256, (8, 3, 16, 16), dtype=torch.uint8, device=cuda)
    labels = torch.randint(0, 10, (8,), device=cuda)
    views = torch.Generator(device=cuda).manual_seed(0)
    options = dict(autocast=contextlib.nullcontext, memory_format=torch.channels_last, with_stats=False)
    try:
        for sync_mode in (0, "error"):  # a first pass makes the cached constants (their copy waits once)
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode(sync_mode)
            for calls in ("two", "one"):
                oar_views = two_views(augment, images, views, calls)
                oar = OarBatch(*oar_views, labels, anchors, 1.0, labels_checked=True)
                v1, v2 = two_views(augment, images, views, calls)
                loss_fn = build_loss("ntxent", tau=1.0)
                train_step(encoder, torch.nn.Identity(), loss_fn, v1, v2, **options, oar=oar)
    finally:
        torch.cuda.set_sync_debug_mode(0)
