"""The image probes' derived numbers, each on a by-hand case: the embedding statistics are the test split's
and centred, the FFN trains on the OAR run's labelled subset, and a config's defaults are the evaluator's."""

from __future__ import annotations

import inspect
import re
from types import SimpleNamespace

import pytest
import torch

from contrastlab.config import Experiment, load
from contrastlab.config.schema import fill_defaults, load_schema
from contrastlab.evaluation import vision
from contrastlab.paths import REPO_ROOT


def _features(train_x, train_y, test_x, test_y, seed=0) -> dict:
    """What :func:`vision.encoder_features` hands the probes, built by hand (digits: 10 classes)."""
    return {
        "train_x": train_x,
        "train_y": train_y,
        "test_x": test_x,
        "test_y": test_y,
        "dataset": "digits",
        "seed": seed,
        "encoding": {"device": "cpu", "extract_s": 0.0},
        "encoder_dir": "by-hand",
        "training": {},
    }


def test_embedding_variance_and_effective_rank_are_the_test_splits_and_centred():
    """Test split: the column means are (10, 0, 0); centred, the rows are ±e1 and ±e2 (in dims 2 and 3):
    unbiased variances 0, 2/3, 2/3 -> 4/3; centred singular values² 2, 2 -> rank 2 at 95%. Uncentred, dim 1
    holds 400 of 404 (99%) -> rank 1, and the biased variance would be 1, the mean square 101. The
    training split (rows ±e0 and two zeros) gives 2/3 and rank 1: a swap of the splits shows."""
    test_x = torch.tensor([[10.0, 1, 0], [10, -1, 0], [10, 0, 1], [10, 0, -1]])
    train_x = torch.tensor([[1.0, 0, 0], [-1, 0, 0], [0, 0, 0], [0, 0, 0]])
    labels = torch.tensor([0, 1, 2, 3])
    metrics = vision.probe_features(
        _features(train_x, labels, test_x, labels), probes=["knn"], knn={"k": 1}, device="cpu"
    )
    assert metrics["scores"]["embedding_variance"] == pytest.approx(4 / 3, abs=1e-12)
    assert metrics["scores"]["effective_rank_95"] == 2.0
    assert vision.embedding_variance(train_x) == pytest.approx(2 / 3, abs=1e-12)


def test_the_ffn_trains_on_the_labelled_subset_the_oar_run_regressed(monkeypatch):
    """Seed 7, 50 training images: the 10% subset is rows 4, 12, 20, 29, 41 (the first 5 of the seed's
    permutation, sorted), the OAR run's (training.vision_step.OarBatches) and the FFN's alike; 100% is every
    row. Each feature row holds its own index, so the rows the FFN got are read off its input."""
    from contrastlab.training.vision import OarBatches, VisionTrainSettings

    n, seed = 50, 7
    train_x = torch.arange(n, dtype=torch.float32)[:, None].repeat(1, 3)
    train_y = torch.arange(n) % 10
    seen = {}

    def spy(x, y, test_x, test_y, **settings):
        seen[len(x)] = (x[:, 0].long().tolist(), y.tolist(), settings["seed"])
        return {"top1": 50.0, "top5": 90.0, "diverged": None, "last_epoch_loss": 1.0, "dead_fraction": 0.0}

    monkeypatch.setattr(vision, "ffn_accuracy", spy)
    vision.probe_features(
        _features(train_x, train_y, train_x[:4], train_y[:4], seed=seed),
        probes=["ffn"],
        ffn={"label_fractions": [0.1, 1.0]},
        device="cpu",
    )
    ten = [4, 12, 20, 29, 41]
    assert seen[5] == (ten, [r % 10 for r in ten], seed)
    assert seen[n] == (list(range(n)), train_y.tolist(), seed)
    oar = VisionTrainSettings(dataset="digits", seed=seed, oar_fraction=0.1, batch_size=8)
    regressed = OarBatches(oar, SimpleNamespace(labels=train_y), 16, torch.device("cpu")).labelled
    assert regressed.tolist() == ten


def test_every_oar_cell_is_evaluated_by_an_ffn_on_the_fraction_it_regressed():
    """config.yaml: each method with an OAR term (training.oar_fraction) is evaluated by an FFN with that
    label fraction (the subsets of one seed are nested, so the FFN's 10% are the labels the run used)."""
    config = load(REPO_ROOT / "config.yaml")
    found = 0
    for name, experiment in config["experiments"].items():
        for method in (experiment.get("methods") or {}).values():
            fraction = (method.get("training") or {}).get("oar_fraction")
            if fraction:
                evaluation = Experiment(name, config).vision_evaluation
                assert "ffn" in evaluation["probes"] and fraction in evaluation["ffn"]["label_fractions"]
                found += 1
    assert found >= 8  # OAR Tables 2 and 3: four losses with the term, on CIFAR-10 and CIFAR-100


def test_the_schemas_evaluation_defaults_are_the_evaluators():
    """The defaults a config gets (the schema's, filled in by validation) equal the evaluator's constants
    and its functions' keyword defaults: MACL App. B.3 / Table B.3 (linear 100 epochs, batch 128, SGD
    0.02, momentum 0.9; kNN k 200, temperature 0.1) and OAR §5.1 (FFN 256/128/64, batch 32, 100
    epochs; lr 0.01 and momentum 0.9 ours). The schema gives the FFN no defaults (absent keys take
    FFN_DEFAULTS), so its description's numbers are read instead."""
    schema = load_schema()["$defs"]["vision_evaluation"]
    filled = fill_defaults({}, schema)
    linear = {"epochs": 100, "batch_size": 128, "lr": 0.02, "momentum": 0.9, "weight_decay": 0.0}
    assert filled["linear"] == vision.LINEAR_DEFAULTS == linear
    assert filled["knn"] == vision.KNN_DEFAULTS == {"k": 200, "temperature": 0.1}
    ffn = vision.FFN_DEFAULTS  # pinned to the schema description's numbers below
    assert "ffn" not in filled
    said = schema["properties"]["ffn"]["description"]
    numbers = re.search(
        r"hidden \[(.+?)\], label_fractions \[(.+?)\], (\d+) epochs, batch (\d+), SGD lr ([\d.]+) .*"
        r"momentum ([\d.]+), weight decay ([\d.]+)\.",
        said,
    )
    assert numbers is not None, said
    hidden, fractions, epochs, batch, lr, momentum, decay = numbers.groups()
    assert {
        "hidden": [int(v) for v in hidden.split(",")],
        "label_fractions": [float(v) for v in fractions.split(",")],
        "epochs": int(epochs),
        "batch_size": int(batch),
        "lr": float(lr),
        "momentum": float(momentum),
        "weight_decay": float(decay),
    } == ffn

    def keyword_defaults(function, names):
        parameters = inspect.signature(function).parameters
        return {name: parameters[name].default for name in names}

    assert keyword_defaults(vision.linear_probe_accuracy, linear) == linear
    assert keyword_defaults(vision.knn_accuracy, ("k", "temperature")) == vision.KNN_DEFAULTS
    ffn_defaults = keyword_defaults(vision.ffn_accuracy, [k for k in ffn if k != "label_fractions"])
    assert {**ffn_defaults, "hidden": list(ffn_defaults["hidden"])} == {
        k: v for k, v in ffn.items() if k != "label_fractions"
    }
