"""Linear, kNN (MACL App. B.3) and FFN (OAR §5) evaluation of image encoders on frozen features."""

from __future__ import annotations

import math

import pytest
import torch

from contrastlab.data.transforms import eval_transform
from contrastlab.evaluation.vision import (
    embedding_variance,
    evaluate_encoder,
    extract_features,
    ffn_accuracy,
    knn_accuracy,
    linear_probe_accuracy,
)
from contrastlab.models.vision import build_encoder
from contrastlab.training.synthetic import effective_rank


def knn_oracle(train_x, train_y, test_x, test_y, num_classes, k, temperature):
    """Weighted kNN in float64 with plain loops (Wu et al. 2018)."""
    correct = 0
    train = [[float(v) for v in row] for row in train_x]
    for query, label in zip(test_x.tolist(), test_y.tolist(), strict=True):
        qn = math.sqrt(sum(v * v for v in query))
        sims = []
        for row, y in zip(train, train_y.tolist(), strict=True):
            rn = math.sqrt(sum(v * v for v in row))
            sims.append((sum(a * b for a, b in zip(query, row, strict=True)) / (qn * rn), y))
        sims.sort(key=lambda item: -item[0])
        votes = [0.0] * num_classes
        for sim, y in sims[:k]:
            votes[y] += math.exp(sim / temperature)
        correct += max(range(num_classes), key=lambda c: (votes[c], -c)) == label
    return 100.0 * correct / len(test_y)


@pytest.mark.parametrize(("k", "temperature", "seed"), [(5, 0.1, 0), (200, 0.1, 1), (3, 0.5, 2)])
def test_knn_equals_a_float64_oracle(k, temperature, seed):
    g = torch.Generator().manual_seed(seed)
    train_x, test_x = torch.randn(120, 6, generator=g), torch.randn(40, 6, generator=g)
    train_y, test_y = torch.randint(0, 4, (120,), generator=g), torch.randint(0, 4, (40,), generator=g)
    got = knn_accuracy(train_x, train_y, test_x, test_y, num_classes=4, k=k, temperature=temperature, chunk=7)
    assert got == pytest.approx(knn_oracle(train_x, train_y, test_x, test_y, 4, min(k, 120), temperature))


def test_linear_probe_separates_separable_features_and_is_seeded():
    g = torch.Generator().manual_seed(0)
    centres = torch.randn(5, 16, generator=g) * 4
    y = torch.randint(0, 5, (600,), generator=g)
    x = centres[y] + 0.3 * torch.randn(600, 16, generator=g)
    args = (x[:500], y[:500], x[500:], y[500:])
    assert linear_probe_accuracy(*args, num_classes=5, epochs=5) == 100.0
    shuffled = y[500:][torch.randperm(100, generator=g)]  # labels unrelated to the features: near chance
    assert linear_probe_accuracy(x[:500], y[:500], x[500:], shuffled, num_classes=5, epochs=5) < 50


def test_linear_probe_is_deterministic_given_the_seed_on_the_requested_device():
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(300, 8, generator=g), torch.randint(0, 3, (300,), generator=g)
    args = (x[:200], y[:200], x[200:], y[200:])

    def accuracy(seed, **kwargs):
        torch.manual_seed(123)  # the probe must not depend on the global RNG
        return linear_probe_accuracy(*args, num_classes=3, epochs=3, seed=seed, **kwargs)

    assert accuracy(5) == accuracy(5) == accuracy(5, device="cpu")
    with pytest.raises(ValueError, match="epochs"):
        linear_probe_accuracy(*args, num_classes=3, epochs=0)


def test_knn_ties_go_to_the_lower_class_and_k_may_exceed_the_classes_and_the_set():
    # Two identical training points with labels 2 and 0: equal votes, class 0 wins.
    train_x, train_y = torch.tensor([[1.0, 0.0], [1.0, 0.0]]), torch.tensor([2, 0])
    query = torch.tensor([[2.0, 0.0], [3.0, 0.0]])
    assert knn_accuracy(train_x, train_y, query, torch.tensor([0, 0]), num_classes=3, k=2) == 100.0
    assert knn_accuracy(train_x, train_y, query, torch.tensor([2, 2]), num_classes=3, k=200) == 0.0
    # k = every point, a tiny temperature: the nearest neighbour decides (1-NN); a huge one: the majority.
    g = torch.Generator().manual_seed(3)
    train_x, test_x = torch.randn(50, 4, generator=g), torch.randn(30, 4, generator=g)
    train_y, test_y = torch.randint(0, 3, (50,), generator=g), torch.randint(0, 3, (30,), generator=g)
    cos = torch.nn.functional.normalize(test_x, dim=1) @ torch.nn.functional.normalize(train_x, dim=1).T
    nearest = 100.0 * (train_y[cos.argmax(dim=1)] == test_y).float().mean().item()
    got = knn_accuracy(train_x, train_y, test_x, test_y, num_classes=3, k=50, temperature=1e-3)
    assert got == pytest.approx(nearest)
    majority = int(torch.bincount(train_y, minlength=3).argmax())
    expected = 100.0 * (test_y == majority).float().mean().item()
    got = knn_accuracy(train_x, train_y, test_x, test_y, num_classes=3, k=500, temperature=1e6)
    assert got == pytest.approx(expected)
    with pytest.raises(ValueError, match="temperature > 0"):
        knn_accuracy(train_x, train_y, test_x, test_y, num_classes=3, temperature=0.0)


def test_extract_features_is_the_pooled_eval_mode_output_in_any_batching():
    encoder = build_encoder("resnet18", width=4).train()
    images = torch.randint(
        0, 256, (11, 3, 8, 8), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)
    )
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    features = extract_features(encoder, images, size=16, mean=mean, std=std, batch_size=4, device="cpu")
    assert features.shape == (11, 32) and features.dtype == torch.float32 and not encoder.training
    with torch.no_grad():
        whole = encoder(eval_transform(images, size=16, mean=mean, std=std))
    assert torch.allclose(features, whole, atol=1e-5)  # batch statistics unused: running BN statistics


#: OAR's FFN scores at label budgets 10% and 100%, then the embedding statistics, in evaluate_encoder's order.
FFN_SCORES = [
    "ffn10_top1",
    "ffn10_top5",
    "ffn100_top1",
    "ffn100_top5",
    "embedding_variance",
    "effective_rank_95",
]


def test_evaluate_encoder_end_to_end_on_digits_and_split_into_two_jobs(tmp_path):
    """evaluate_encoder in one process, and its features saved then probed in two jobs: the same numbers."""
    from contrastlab.evaluation.vision import encoder_features, load_features, probe_features, save_features
    from contrastlab.training.vision import VisionTrainSettings, train_vision

    # a width-4 ResNet trained on the CPU with NT-Xent (tau 0.1) on the digits in batches of 64
    settings = VisionTrainSettings(
        dataset="digits",
        loss="ntxent",
        loss_hp={"tau": 0.1},
        width=4,
        head_hidden=32,
        head_dim=16,
        batch_size=64,
        max_steps=10,
        log_every=5,
    )
    encoder = tmp_path / "enc"
    log, state = tmp_path / "log.jsonl", tmp_path / "s"
    train_vision(
        settings, data_root=None, out_dir=encoder, log_path=log, state_dir=state, device="cpu", progress=False
    )
    # download: digits ship with scikit-learn, so nothing is fetched.
    metrics = evaluate_encoder(
        encoder, data_root=tmp_path, download=True, linear={"epochs": 20}, knn={"k": 20}
    )
    assert metrics["n_train"] == 1437 and metrics["n_test"] == 360 and metrics["feature_dim"] == 32
    scores = metrics["scores"]
    assert 30 < scores["linear_top1"] <= 100 and 30 < scores["knn_top1"] <= 100  # chance: 10
    assert metrics["linear"]["lr"] == 0.02 and metrics["linear"]["epochs"] == 20 and metrics["knn"]["k"] == 20
    assert set(metrics["timings"]) == {"extract_s", "linear_s", "knn_s"}
    again = evaluate_encoder(encoder, data_root=None, linear={"epochs": 20}, knn={"k": 20})
    assert again["scores"] == metrics["scores"]  # deterministic on CPU
    # OAR's protocol: the FFN at two label budgets, top-1 and top-5, and the embedding statistics.
    ffn = {"label_fractions": [0.1, 1.0], "epochs": 30, "lr": 0.05, "hidden": [16, 8]}
    oar = evaluate_encoder(encoder, data_root=None, probes=["ffn"], ffn=ffn)
    assert set(oar["scores"]) == set(FFN_SCORES)
    assert oar["ffn"]["batch_size"] == 32 and oar["ffn"]["lr"] == 0.05
    assert set(oar["timings"]) == {"extract_s", "ffn_s"}
    assert oar["scores"]["ffn100_top5"] >= oar["scores"]["ffn100_top1"] > 30
    assert 1 <= oar["scores"]["effective_rank_95"] <= 32
    with pytest.raises(ValueError, match="unknown probe"):
        evaluate_encoder(encoder, data_root=None, probes=["svm"])
    probes = {
        "probes": ["linear", "knn", "ffn"],
        "linear": {"epochs": 3},
        "knn": {"k": 10},
        "ffn": {"label_fractions": [0.1, 1.0], "epochs": 3, "hidden": [16, 8], "lr": 0.05},
    }
    one_job = evaluate_encoder(encoder, data_root=None, device="cpu", **probes)
    save_features(tmp_path / "features.pt", encoder_features(encoder, data_root=None, device="cpu"))
    saved = load_features(tmp_path / "features.pt")
    assert saved["train_x"].shape == (1437, 32) and saved["test_y"].shape == (360,)
    split = probe_features(saved, device="cpu", **probes)
    assert split["scores"] == one_job["scores"] and split["diverged"] == one_job["diverged"]
    assert len(split["scores"]) == 1 + 1 + 4 + 2
    assert split["ffn_runs"] == one_job["ffn_runs"]
    same = ("n_train", "n_test", "feature_dim", "probes", "linear", "knn", "ffn", "training", "device")
    assert {k: split[k] for k in same} == {k: one_job[k] for k in same}
    assert split["encoding"]["device"] == "cpu"
    assert set(split["timings"]) == {"extract_s", "linear_s", "knn_s", "ffn_s"}


def _separable(scale):
    g = torch.Generator().manual_seed(0)
    y = torch.arange(400) % 4
    x = (torch.randn(4, 8, generator=g) * 3)[y] + 0.1 * torch.randn(400, 8, generator=g)
    return scale * x, y


FFN_KWARGS = {"num_classes": 4, "hidden": [16, 8], "epochs": 30, "batch_size": 32, "lr": 0.05}


def test_ffn_learns_separable_features_gives_chance_on_collapsed_ones_and_no_accuracy_if_diverged():
    """The FFN trains separable features to 100% (seeded) and collapsed ones (all equal: one answer for
    every image, OAR §5.1) to the predicted class's share without a flag. OAR's sweep spans orders of
    magnitude of feature scale at one FFN rate: at 1e3 the first SGD steps kill every ReLU (chance
    accuracy), at 1e30 the loss is not finite; both say why, with no accuracy."""

    def fit(x, y):
        return ffn_accuracy(x[:300], y[:300], x[300:], y[300:], **FFN_KWARGS)

    x, y = _separable(1.0)
    ok = fit(x, y)
    assert ok["diverged"] is None and ok["top1"] == ok["top5"] == 100.0 and ok["dead_fraction"] < 1
    assert fit(x, y) == ok  # seeded
    dead = fit(*_separable(1e3))
    assert dead["top1"] is None and dead["top5"] is None and dead["dead_fraction"] == 1.0
    assert "dead ReLUs" in dead["diverged"]
    inf = fit(*_separable(1e30))
    assert inf["top1"] is None and "non-finite" in inf["diverged"]
    flat = fit(torch.ones(400, 8), y)
    assert flat["diverged"] is None and flat["top1"] == 25.0 and flat["top5"] == 100.0  # 4 classes
    with pytest.raises(ValueError, match="hidden sizes"):
        ffn_accuracy(x, y, x, y, num_classes=4, hidden=[])


def test_ffn_divergence_criteria_one_by_one():
    from contrastlab.evaluation.vision import FFN_PRIOR_LOSS_FACTOR, _ffn_divergence

    x, y = _separable(1.0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 3), torch.nn.ReLU(), torch.nn.Linear(3, 4))
    fine = {"last_epoch_loss": 0.1, "non_finite_epoch": None}
    assert _ffn_divergence(model, x, y, fine, 4) is None
    assert "epoch 3" in _ffn_divergence(model, x, y, {**fine, "non_finite_epoch": 2}, 4)
    prior = math.log(4)  # balanced labels: predicting the frequencies costs log 4
    above = {**fine, "last_epoch_loss": FFN_PRIOR_LOSS_FACTOR * prior + 0.01}
    assert "label-frequency loss" in _ffn_divergence(model, x, y, above, 4)
    below = {**fine, "last_epoch_loss": FFN_PRIOR_LOSS_FACTOR * prior - 0.01}
    assert _ffn_divergence(model, x, y, below, 4) is None
    with torch.no_grad():
        model[0].weight.zero_()
        model[0].bias.fill_(-1.0)  # every ReLU dead: the hidden layer is 0 for every input
    assert "dead ReLUs" in _ffn_divergence(model, x, y, fine, 4)
    assert _ffn_divergence(model, torch.ones_like(x), y, fine, 4) is None  # equal features: collapse
    with torch.no_grad():
        model[2].weight[0, 0] = math.inf
    assert _ffn_divergence(model, x, y, fine, 4) == "non-finite FFN weights"


def test_embedding_variance_and_effective_rank_match_numpy():
    import numpy as np

    g = torch.Generator().manual_seed(1)
    x = torch.randn(200, 6, generator=g) * torch.tensor([5.0, 3.0, 1.0, 0.3, 0.1, 0.01])
    assert embedding_variance(x) == pytest.approx(
        float(np.var(x.numpy().astype(np.float64), axis=0, ddof=1).sum())
    )
    sigma2 = np.linalg.svd(x.numpy() - x.numpy().mean(0), compute_uv=False) ** 2
    share = np.cumsum(sigma2) / sigma2.sum()
    for energy in (0.5, 0.9, 0.95, 0.999):
        assert effective_rank(x, energy, centre=True) == int(np.argmax(share >= energy)) + 1
    assert effective_rank(torch.ones(5, 3), centre=True) == 0  # no variance at all (total collapse)
    line = torch.outer(torch.linspace(-1, 1, 50), torch.tensor([1.0, 2.0, 3.0]))
    assert effective_rank(line, centre=True) == 1


def test_a_diverged_encoders_metrics_list_every_score_key_as_diverged(tmp_path):
    """A diverged point's diverged.json read: no score, every score key in ``diverged``, with the reason."""
    from contrastlab.evaluation.vision import diverged_encoder_metrics, score_keys
    from contrastlab.search import diverged_reason, record_diverged

    assert diverged_reason(tmp_path / "encoder") is None
    record_diverged(tmp_path / "encoder", tmp_path / "log.jsonl", {"lr": 1.0}, "loss is not finite at step 3")
    reason = diverged_reason(tmp_path / "encoder")
    assert reason == "loss is not finite at step 3"
    assert '"event": "diverged"' in (tmp_path / "log.jsonl").read_text()
    statistics = ["embedding_variance", "effective_rank_95"]
    assert score_keys(["linear", "knn"]) == ["linear_top1", "knn_top1", *statistics]
    metrics = diverged_encoder_metrics(tmp_path / "encoder", reason, ["ffn"], {"label_fractions": [0.1, 1.0]})
    assert metrics["scores"] == {}
    assert list(metrics["diverged"]) == FFN_SCORES
    assert set(metrics["diverged"].values()) == {"encoder training diverged: loss is not finite at step 3"}


def test_the_probes_training_takes_every_row_once_per_epoch_the_last_batch_smaller():
    """10 rows in batches of 4 are three SGD steps an epoch (4, 4, 2, in the seeded order) on each batch's
    mean cross-entropy; weights after two epochs and the last epoch's mean loss equal a float64 hand loop."""
    from contrastlab.evaluation.vision import _fit

    g = torch.Generator().manual_seed(4)
    x, y = torch.randn(10, 3, generator=g), torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 2])
    lr, seed = 0.5, 7
    torch.manual_seed(seed)  # as linear_probe_accuracy initialises its layer
    probe = torch.nn.Linear(3, 3)
    w, b = probe.weight.detach().double().clone(), probe.bias.detach().double().clone()
    fit = _fit(
        probe, x, y, epochs=2, batch_size=4, seed=seed, sgd={"lr": lr, "momentum": 0.0, "weight_decay": 0}
    )
    order = torch.Generator().manual_seed(seed)
    for _ in range(2):
        permutation, losses = torch.randperm(10, generator=order), []
        for rows in (permutation[:4], permutation[4:8], permutation[8:]):
            xs, onehot = x[rows].double(), torch.eye(3, dtype=torch.float64)[y[rows]]
            p = torch.softmax(xs @ w.T + b, dim=1)
            losses.append(float(-(onehot * p.log()).sum(dim=1).mean()))
            grad = (p - onehot) / len(rows)
            w, b = w - lr * grad.T @ xs, b - lr * grad.sum(dim=0)
    assert torch.allclose(probe.weight.double(), w, atol=1e-5)
    assert torch.allclose(probe.bias.double(), b, atol=1e-5)
    assert fit == {"last_epoch_loss": pytest.approx(sum(losses) / 3, abs=1e-6), "non_finite_epoch": None}
    # the linear probe is that loop on the layer the seed initialises: its accuracy is the hand-made one's
    hand = 100.0 * float(((x.double() @ w.T + b).argmax(dim=1) == y).double().mean())
    probe_accuracy = linear_probe_accuracy(
        x, y, x, y, num_classes=3, epochs=2, batch_size=4, lr=lr, momentum=0.0, seed=seed
    )
    assert probe_accuracy == pytest.approx(hand)
