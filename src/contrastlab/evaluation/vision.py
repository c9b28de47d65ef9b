"""Evaluation of a trained image encoder on frozen features (MACL App. B.3, Table B.3).

- Linear evaluation: a linear classifier on the frozen encoder's features, 100 epochs, batch 128,
  SGD lr 0.02, momentum 0.9, weight decay 0, constant rate (App. B.3). Deviation: the features are
  extracted once, from the unaugmented images (resized and normalised only), and the classifier trains
  on these precomputed features, as Spijkervet/SimCLR's ``linear_evaluation.py`` does; the paper does
  not say whether its linear stage augments the training images (the config lists this as a
  deviation). The features are used raw: no standardisation and no L2 normalisation (as that script).
- Weighted kNN, k = 200 (Table B.3): cosine similarity to every training feature, the k nearest vote
  with weight exp(cos / 0.1) (Wu et al. 2018, "Unsupervised Feature Learning via Non-Parametric
  Instance Discrimination", the kNN monitor of the SimCLR/MoCo CIFAR code bases).

Both report top-1 accuracy in percent on the test split; features are the encoder's pooled output
(before the projection head).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from contrastlab.data.images import IMAGE_STATS, NUM_CLASSES, load_images
from contrastlab.models import pick_device
from contrastlab.training.augment import eval_transform

__all__ = [
    "KNN_DEFAULTS",
    "LINEAR_DEFAULTS",
    "evaluate_encoder",
    "extract_features",
    "knn_accuracy",
    "linear_probe_accuracy",
]

#: MACL App. B.3 and Table B.3.
LINEAR_DEFAULTS = {"epochs": 100, "batch_size": 128, "lr": 0.02, "momentum": 0.9, "weight_decay": 0.0}
KNN_DEFAULTS = {"k": 200, "temperature": 0.1}


@torch.no_grad()
def extract_features(
    encoder: torch.nn.Module, images: Tensor, *, size: int, mean, std, batch_size: int, device
) -> Tensor:
    """Float32 features [N, D] of uint8 ``images`` [N, 3, H, W] (eval mode, no augmentation)."""
    encoder.eval()
    out = []
    for start in range(0, len(images), batch_size):
        x = eval_transform(images[start : start + batch_size].to(device), size=size, mean=mean, std=std)
        out.append(encoder(x).float())
    return torch.cat(out)


def linear_probe_accuracy(
    train_x: Tensor,
    train_y: Tensor,
    test_x: Tensor,
    test_y: Tensor,
    *,
    num_classes: int,
    epochs: int = 100,
    batch_size: int = 128,
    lr: float = 0.02,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    seed: int = 0,
    device: str | torch.device | None = None,
) -> float:
    """Top-1 % of a linear classifier trained with SGD on frozen features (MACL App. B.3).

    Raw features (not standardised or normalised), constant learning rate, shuffled mini-batches (the
    last one smaller; a generator seeded with ``seed``, independent of the global RNG), cross-entropy.
    Runs on ``device`` (default: the features' device).
    """
    if epochs < 1 or batch_size < 1 or lr <= 0:
        raise ValueError(f"epochs and batch_size must be >= 1 and lr > 0, got {epochs}, {batch_size}, {lr}")
    if device is not None:
        train_x, train_y, test_x, test_y = (t.to(device) for t in (train_x, train_y, test_x, test_y))
    generator = torch.Generator(device=train_x.device).manual_seed(seed)
    torch.manual_seed(seed)
    classifier = torch.nn.Linear(train_x.shape[1], num_classes).to(train_x.device)
    optimizer = torch.optim.SGD(classifier.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    for _ in range(epochs):
        order = torch.randperm(len(train_x), generator=generator, device=train_x.device)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            loss = F.cross_entropy(classifier(train_x[rows]), train_y[rows])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        predicted = classifier(test_x).argmax(dim=1)
    return 100.0 * (predicted == test_y).float().mean().item()


@torch.no_grad()
def knn_accuracy(
    train_x: Tensor,
    train_y: Tensor,
    test_x: Tensor,
    test_y: Tensor,
    *,
    num_classes: int,
    k: int = 200,
    temperature: float = 0.1,
    chunk: int = 1024,
) -> float:
    """Top-1 % of the weighted kNN classifier: the k most cosine-similar training features vote for
    their class with weight exp(cos / temperature) (Wu et al. 2018); test rows in chunks of ``chunk``.
    Ties in the vote go to the lower class index; ``k`` is capped at the training set's size. Memory:
    ``chunk`` x len(train_x) similarities at a time."""
    if k < 1 or temperature <= 0 or chunk < 1:
        raise ValueError(f"k and chunk must be >= 1 and temperature > 0, got {k}, {chunk}, {temperature}")
    train = F.normalize(train_x.float(), dim=1)
    k = min(k, len(train))
    correct = 0
    for start in range(0, len(test_x), chunk):
        query = F.normalize(test_x[start : start + chunk].float(), dim=1)
        similarity, index = (query @ train.T).topk(k, dim=1)
        votes = torch.zeros(len(query), num_classes, device=train.device)
        # exp((s - s_max) / T): the same vote up to a per-query factor, without overflow at small T.
        weights = ((similarity - similarity[:, :1]) / temperature).exp()
        votes.scatter_add_(1, train_y[index], weights)
        correct += (votes.argmax(dim=1) == test_y[start : start + chunk]).sum().item()
    return 100.0 * correct / len(test_x)


def evaluate_encoder(
    encoder_dir: str | Path,
    *,
    data_root: str | Path | None,
    batch_size: int = 512,
    linear: dict[str, Any] | None = None,
    knn: dict[str, Any] | None = None,
    device: str | None = None,
    download: bool = False,
) -> dict[str, Any]:
    """Linear and kNN top-1 of the encoder in ``encoder_dir`` (written by ``train_vision``) on its
    dataset's test split; returns ``{"scores": {"linear_top1", "knn_top1"}, "n_train", "n_test",
    "timings", ...}`` in percent. ``linear``/``knn`` override :data:`LINEAR_DEFAULTS` /
    :data:`KNN_DEFAULTS`; the probe's seed is the training seed. ``download``: fetch CIFAR into
    ``data_root`` first when it is absent."""
    from contrastlab.training.vision import load_encoder

    started = time.perf_counter()
    dev = pick_device(device)
    encoder, summary = load_encoder(encoder_dir, dev)
    s = summary["settings"]
    dataset, size = s["dataset"], summary["image_size"]
    mean, std = IMAGE_STATS[dataset]
    splits = {
        name: load_images(dataset, name, root=data_root, download=download, image_size=s["image_size"])
        for name in ("train", "test")
    }
    features = {
        name: extract_features(
            encoder, split.images, size=size, mean=mean, std=std, batch_size=batch_size, device=dev
        )
        for name, split in splits.items()
    }
    labels = {name: split.labels.to(dev) for name, split in splits.items()}
    extract_s = time.perf_counter() - started
    args = (features["train"], labels["train"], features["test"], labels["test"])
    num_classes = NUM_CLASSES[dataset]
    linear_settings = {**LINEAR_DEFAULTS, **(linear or {})}
    knn_settings = {**KNN_DEFAULTS, **(knn or {})}
    t = time.perf_counter()
    linear_top1 = linear_probe_accuracy(
        *args, num_classes=num_classes, seed=int(s["seed"]), **linear_settings
    )
    linear_s = time.perf_counter() - t
    t = time.perf_counter()
    knn_top1 = knn_accuracy(*args, num_classes=num_classes, **knn_settings)
    return {
        "scores": {"linear_top1": linear_top1, "knn_top1": knn_top1},
        "dataset": dataset,
        "n_train": len(labels["train"]),
        "n_test": len(labels["test"]),
        "feature_dim": features["train"].shape[1],
        "linear": linear_settings,
        "knn": knn_settings,
        "encoder_dir": str(encoder_dir),
        "device": str(dev),
        "timings": {"extract_s": extract_s, "linear_s": linear_s, "knn_s": time.perf_counter() - t},
    }
