"""Linear and kNN evaluation of image encoders, and the encoders themselves."""

from __future__ import annotations

import math

import pytest
import torch
from torchvision.models import resnet18, resnet50

from contrastlab.evaluation.vision import evaluate_encoder, knn_accuracy, linear_probe_accuracy
from contrastlab.vision_models import ProjectionHead, build_encoder


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


def test_linear_probe_is_deterministic_given_the_seed():
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(300, 8, generator=g), torch.randint(0, 3, (300,), generator=g)

    def weights_after(seed):
        torch.manual_seed(123)  # the probe must not depend on the global RNG
        return linear_probe_accuracy(x[:200], y[:200], x[200:], y[200:], num_classes=3, epochs=3, seed=seed)

    assert weights_after(5) == weights_after(5)


def test_cifar_resnet18_is_torchvisions_with_the_cifar_stem():
    ours, theirs = build_encoder("resnet18", stem="cifar"), resnet18()
    n_ours = sum(p.numel() for p in ours.parameters())
    n_theirs = sum(p.numel() for p in theirs.parameters())
    assert (
        n_ours
        == n_theirs - theirs.fc.weight.numel() - theirs.fc.bias.numel() - 64 * 3 * 7 * 7 + 64 * 3 * 3 * 3
    )
    weights = {k: v for k, v in theirs.state_dict().items() if not k.startswith(("fc.", "conv1."))}
    missing, unexpected = ours.load_state_dict(weights, strict=False)
    assert missing == ["conv1.weight"] and unexpected == []
    assert (
        ours.conv1.kernel_size == (3, 3)
        and ours.conv1.stride == (1, 1)
        and isinstance(ours.maxpool, torch.nn.Identity)
    )
    assert ours(torch.zeros(2, 3, 32, 32)).shape == (2, 512)


def test_imagenet_stem_resnet50_is_torchvisions():
    ours, theirs = build_encoder("resnet50", stem="imagenet", width=64), resnet50()
    weights = {k: v for k, v in theirs.state_dict().items() if not k.startswith("fc.")}
    assert ours.load_state_dict(weights, strict=True) is not None and ours.feature_dim == 2048


def test_narrow_encoders_and_the_head():
    encoder = build_encoder("resnet18", width=8)
    assert encoder.feature_dim == 64 and encoder(torch.zeros(3, 3, 16, 16)).shape == (3, 64)
    assert ProjectionHead(64, 32, 16)(torch.zeros(3, 64)).shape == (3, 16)
    with pytest.raises(ValueError, match="unknown encoder 'resnet34'; valid: resnet18, resnet50"):
        build_encoder("resnet34")
    with pytest.raises(ValueError, match="unknown stem"):
        build_encoder("resnet18", stem="tiny")


def test_evaluate_encoder_end_to_end_on_digits(tmp_path):
    from contrastlab.training.vision import VisionTrainSettings, train_vision

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
    train_vision(
        settings,
        data_root=None,
        out_dir=tmp_path / "enc",
        log_path=tmp_path / "log.jsonl",
        state_dir=tmp_path / "s",
        device="cpu",
        progress=False,
    )
    metrics = evaluate_encoder(tmp_path / "enc", data_root=None, linear={"epochs": 20}, knn={"k": 20})
    assert metrics["n_train"] == 1437 and metrics["n_test"] == 360 and metrics["feature_dim"] == 32
    assert (
        30 < metrics["scores"]["linear_top1"] <= 100 and 30 < metrics["scores"]["knn_top1"] <= 100
    )  # chance: 10
    again = evaluate_encoder(tmp_path / "enc", data_root=None, linear={"epochs": 20}, knn={"k": 20})
    assert again["scores"] == metrics["scores"]  # deterministic on CPU
