"""OAR Fig. 2-4 from metrics and Fig. 3 from embeddings: the numbers plotted, and non-trivial images."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from contrastlab.figures.oar import embedding_spectrum, plot_lr_sweep, plot_spectra, sweep_frame
from tests.images import assert_nontrivial_png, assert_written


def test_sweep_frame_averages_seeds_per_rate_and_plots(tmp_path):
    rows = []
    for method in ("infonce", "oar_infonce"):
        for lr in (0.01, 1.0):
            for seed, noise in ((42, 0.0), (43, 2.0)):
                score = (70.0 if method.startswith("oar") else 40.0 / (1 + 10 * lr)) + noise
                rows += [
                    ("oar_cifar10", "r18", f"{method}-lr{lr}", seed, "ffn10_top1", score),
                    ("oar_cifar10", "r18", f"{method}-lr{lr}", seed, "embedding_variance", 1.0 / lr),
                ]
    metrics = pd.DataFrame(rows, columns=["experiment", "backbone", "method", "seed", "task", "score"])
    frame = sweep_frame(metrics, "oar_cifar10", "lr", [0.01, 1.0], ["ffn10_top1", "embedding_variance"])
    assert len(frame) == 8 and set(frame["n_seeds"]) == {2}
    point = frame.set_index(["method", "key", "value"]).loc[("infonce", "ffn10_top1", 1.0)]
    assert point["mean"] == pytest.approx(40.0 / 11 + 1.0) and not point["oar"] and point["loss"] == "infonce"
    written = plot_lr_sweep(frame, tmp_path / "fig2", accuracy_keys=["ffn10_top1"])
    assert_written(written, frame)


def test_embedding_spectrum_sees_a_collapse_and_class_blocks(tmp_path, drawn):
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(600) % 3
    anchors = torch.eye(8)[:3] * 5
    separated = anchors[labels] + 0.1 * torch.randn(600, 8, generator=g)
    collapsed = torch.outer(torch.randn(600, generator=g), torch.ones(8)) + 1e-4 * torch.randn(
        600, 8, generator=g
    )
    a = embedding_spectrum(separated, labels, n=300, seed=1)
    b = embedding_spectrum(collapsed, labels, n=300, seed=1)
    assert a["effective_rank"] == 2 and b["effective_rank"] == 1  # 3 centred class means span 2 dims
    assert a["singular_values"][0] == 1.0 and np.all(np.diff(a["singular_values"]) <= 1e-12)
    assert list(a["labels"]) == sorted(a["labels"]) and a["affinity"].shape == (300, 300)
    same = a["labels"][:, None] == a["labels"][None, :]
    assert a["affinity"][same].mean() > 0.9 and abs(a["affinity"][~same].mean()) < 0.1
    written = plot_spectra({"InfoNCE": b, "OAR-InfoNCE": a}, tmp_path / "fig3")
    assert "300 test images" in drawn[0].axes[3].get_title()  # how many: the demo has 360, not 1000
    assert_nontrivial_png(written[0])
    numbers = pd.read_csv(written[2])
    assert set(numbers["encoder"]) == {"InfoNCE", "OAR-InfoNCE"} and len(numbers) == 16
    # A sweep point whose training diverged has no encoder: its panel says so, its CSV row too.
    written = plot_spectra({"InfoNCE": b, "infonce-lr1.0": None}, tmp_path / "fig3-diverged")
    assert_nontrivial_png(written[0])
    numbers = pd.read_csv(written[2])
    assert list(numbers[numbers["encoder"] == "infonce-lr1.0"]["effective_rank"]) == ["diverged"]


def test_lr_sweep_marks_diverged_ffn_points_not_as_accuracy(tmp_path, drawn):
    """A rate whose FFN diverged (NaN scores in the metrics frame) is no point on the accuracy curve:
    a cross on the panel's bottom edge and "FFN diverged" in the legend; the CSV counts it."""
    rows = []
    for lr, score in ((0.01, 40.0), (0.1, 35.0), (1.0, float("nan"))):
        rows += [
            ("oar_cifar10", "r18", f"infonce-lr{lr}", 42, "ffn10_top1", score),
            ("oar_cifar10", "r18", f"infonce-lr{lr}", 42, "embedding_variance", 1.0 / lr),
        ]
    metrics = pd.DataFrame(rows, columns=["experiment", "backbone", "method", "seed", "task", "score"])
    frame = sweep_frame(metrics, "oar_cifar10", "lr", [0.01, 0.1, 1.0], ["ffn10_top1", "embedding_variance"])
    point = frame.set_index(["key", "value"]).loc[("ffn10_top1", 1.0)]
    assert np.isnan(point["mean"]) and point["n_seeds"] == 0 and point["n_diverged"] == 1
    written = plot_lr_sweep(frame, tmp_path / "fig2", accuracy_keys=["ffn10_top1"])
    legend = [t.get_text() for t in drawn[0].legends[0].get_texts()]
    assert "FFN diverged (no accuracy)" in legend
    accuracy_axis = drawn[0].axes[0]
    crosses = [line for line in accuracy_axis.lines if line.get_marker() == "x"]
    assert len(crosses) == 1 and list(crosses[0].get_xdata()) == [1.0]
    assert list(crosses[0].get_ydata()) == [0.0]  # the bottom edge (axes units), not an accuracy of 0
    assert pd.read_csv(written[2])["n_diverged"].sum() == 1


def test_lr_sweep_tells_an_encoder_that_diverged_from_an_ffn_that_did(tmp_path, drawn):
    """An encoder that diverged has no score on any panel (its variance too): marked "+", "encoder
    diverged" in the legend; a rate where only the FFN diverged stays "x", "FFN diverged"."""
    nan = float("nan")
    points = ((0.01, 40.0, 1.0), (0.1, nan, 0.5), (1.0, nan, nan))  # lr 0.1: the FFN; lr 1: the encoder
    rows = [
        ("m", "r18", f"infonce-lr{lr}", 42, key, v)
        for lr, a, var in points
        for key, v in (("ffn10_top1", a), ("embedding_variance", var))
    ]
    metrics = pd.DataFrame(rows, columns=["experiment", "backbone", "method", "seed", "task", "score"])
    frame = sweep_frame(metrics, "m", "lr", [0.01, 0.1, 1.0], ["ffn10_top1", "embedding_variance"])
    plot_lr_sweep(frame, tmp_path / "fig2", accuracy_keys=["ffn10_top1"])
    legend = [t.get_text() for t in drawn[0].legends[0].get_texts()]
    assert legend[-2:] == ["FFN diverged (no accuracy)", "encoder diverged (no embeddings)"]

    def marks(axis):
        return {
            x: line.get_marker() for line in axis.lines if line.get_marker() in "x+" for x in line.get_xdata()
        }

    assert marks(drawn[0].axes[0]) == {0.1: "x", 1.0: "+"}  # accuracy
    assert marks(drawn[0].axes[1]) == {1.0: "+"}  # variance


def test_lr_sweep_variance_stays_on_a_log_axis_when_an_encoder_diverged(tmp_path, drawn):
    """An encoder that diverged has no embedding_variance (NaN, evaluation.vision.diverged_encoder_metrics):
    the other rates' variances still span orders of magnitude, on OAR Fig. 2's log axis."""
    rows = [("infonce", "infonce", False, lr, "embedding_variance", v, 1, int(v != v)) for lr, v in VARIANCES]
    frame = pd.DataFrame(
        rows, columns=["method", "loss", "oar", "value", "key", "mean", "n_seeds", "n_diverged"]
    )
    plot_lr_sweep(frame, tmp_path / "fig2", accuracy_keys=[])
    assert drawn[0].axes[0].get_yscale() == "log"


VARIANCES = ((0.01, 100.0), (0.1, 0.01), (1.0, float("nan")))
