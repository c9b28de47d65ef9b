"""Evaluation of a trained image encoder on frozen features (MACL App. B.3, Table B.3; OAR §5).

- Linear evaluation: a linear classifier on the frozen features, 100 epochs, batch 128, SGD lr 0.02,
  momentum 0.9, weight decay 0, constant rate (App. B.3). Deviation (the config lists it): the features
  are extracted once from the unaugmented images and used raw (no standardisation or L2 normalisation),
  as Spijkervet/SimCLR's ``linear_evaluation.py``; the paper does not say whether it augments.
- Weighted kNN, k = 200 (Table B.3): the k most cosine-similar training features vote with weight
  exp(cos / 0.1) (Wu et al. 2018, the kNN monitor of the SimCLR/MoCo CIFAR code bases).
- FFN fine-tuning (OAR §5): three hidden layers (256/128/64 for CIFAR-10, 512/1024/1024 for CIFAR-100;
  ReLU), SGD, batch 32, 100 epochs, on the frozen features of a labelled fraction (10/50/100%; the 10%
  subset is :func:`~contrastlab.data.images.labelled_subset`); top-1 and top-5. The encoder stays frozen:
  the paper's argument (collapsed embeddings give chance accuracy) is about the embeddings. Beside it,
  OAR Fig. 2-3's total variance and effective rank (95% energy) of the test embeddings. An FFN that
  diverges on raw features (:data:`FFN_DIVERGENCE`) reports no accuracy, never the chance-level number
  a collapsed embedding would also give.

Accuracies are percent on the test split; features are the encoder's output (before any head).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from contrastlab.data.images import IMAGE_STATS, NUM_CLASSES, labelled_subset, load_images
from contrastlab.data.transforms import eval_transform
from contrastlab.models import pick_device
from contrastlab.paths import atomic_write
from contrastlab.precision import ieee_fp32
from contrastlab.search import diverged_reason
from contrastlab.training.synthetic import effective_rank
from contrastlab.training.vision import load_encoder

__all__ = [
    "FFN_DEFAULTS",
    "FFN_DIVERGENCE",
    "KNN_DEFAULTS",
    "LINEAR_DEFAULTS",
    "PROBES",
    "embedding_variance",
    "encoder_features",
    "evaluate_encoder",
    "evaluate_features",
    "extract_features",
    "ffn_accuracy",
    "knn_accuracy",
    "linear_probe_accuracy",
    "job_features",
    "load_features",
    "probe_features",
    "save_features",
]

#: MACL App. B.3 and Table B.3.
LINEAR_DEFAULTS = {"epochs": 100, "batch_size": 128, "lr": 0.02, "momentum": 0.9, "weight_decay": 0.0}
KNN_DEFAULTS = {"k": 200, "temperature": 0.1}
#: OAR §5.1 (hidden sizes, batch 32, SGD, 100 epochs); the rate and momentum are not stated (our choice).
FFN_DEFAULTS = {
    "hidden": [256, 128, 64],
    "label_fractions": [0.1, 0.5, 1.0],
    "epochs": 100,
    "batch_size": 32,
    "lr": 0.01,
    "momentum": 0.9,
    "weight_decay": 0.0,
}
#: When an FFN run counts as diverged (:func:`ffn_accuracy`; its accuracy is then not reported).
FFN_DIVERGENCE = (
    "the FFN's training loss became non-finite (checked after every epoch; training stops there), its "
    "weights are non-finite, its last epoch's mean training loss exceeds 1.5x the cross-entropy of "
    "predicting the training labels' frequencies (a converged FFN reaches that with its output bias "
    "alone, collapsed features included), or its last hidden layer gives one vector for every training "
    "feature although the features differ (its ReLUs died: the output no longer depends on the input)"
)
#: The factor of the loss criterion above.
FFN_PRIOR_LOSS_FACTOR = 1.5

#: The evaluations :func:`evaluate_encoder` can run: linear + kNN (MACL) or the FFN (OAR).
PROBES = ("linear", "knn", "ffn")


@torch.no_grad()
@ieee_fp32()  # PyTorch's default runs fp32 convolutions in TF32 on Ampere and later
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
    """Top-1 % of a linear classifier trained with SGD and cross-entropy on raw frozen features (MACL
    App. B.3; :func:`_fit`'s loop), on ``device`` (default: the features')."""
    if epochs < 1 or batch_size < 1 or lr <= 0:
        raise ValueError(f"epochs and batch_size must be >= 1 and lr > 0, got {epochs}, {batch_size}, {lr}")
    if device is not None:
        train_x, train_y, test_x, test_y = (t.to(device) for t in (train_x, train_y, test_x, test_y))
    torch.manual_seed(seed)
    classifier = torch.nn.Linear(train_x.shape[1], num_classes).to(train_x.device)
    sgd = {"lr": lr, "momentum": momentum, "weight_decay": weight_decay}
    _fit(classifier, train_x, train_y, epochs=epochs, batch_size=batch_size, seed=seed, sgd=sgd)
    with torch.no_grad():
        predicted = classifier(test_x).argmax(dim=1)
    return 100.0 * (predicted == test_y).float().mean().item()


def _fit(
    model, train_x, train_y, *, epochs: int, batch_size: int, seed: int, sgd: dict, stop_if_non_finite=False
) -> dict[str, Any]:
    """Cross-entropy training of ``model`` with SGD (``sgd``: lr, momentum, weight_decay) on shuffled
    mini-batches (the last one smaller) drawn from a generator seeded with ``seed``, independent of the
    global RNG: the loop of both the linear probe and the FFN. Returns ``last_epoch_loss`` (the mean
    of the last epoch's batch losses) and ``non_finite_epoch`` (the first epoch with a non-finite batch
    loss, or None); with ``stop_if_non_finite`` training stops after that epoch (one check per epoch)."""
    generator = torch.Generator(device=train_x.device).manual_seed(seed)
    optimizer = torch.optim.SGD(model.parameters(), **sgd)
    epoch_loss, batches = torch.zeros((), device=train_x.device), 0
    for epoch in range(epochs):
        order = torch.randperm(len(train_x), generator=generator, device=train_x.device)
        epoch_loss.zero_()
        batches = 0
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            loss = F.cross_entropy(model(train_x[rows]), train_y[rows])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            epoch_loss += loss.detach()
            batches += 1
        if stop_if_non_finite and not bool(torch.isfinite(epoch_loss)):
            return {"last_epoch_loss": float(epoch_loss) / batches, "non_finite_epoch": epoch}
    last = float(epoch_loss) / max(batches, 1)
    return {"last_epoch_loss": last, "non_finite_epoch": None if math.isfinite(last) else epochs - 1}


def ffn_accuracy(
    train_x: Tensor,
    train_y: Tensor,
    test_x: Tensor,
    test_y: Tensor,
    *,
    num_classes: int,
    hidden: list[int] | tuple[int, ...] = (256, 128, 64),
    epochs: int = 100,
    batch_size: int = 32,
    lr: float = 0.01,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    seed: int = 0,
) -> dict[str, float]:
    """Top-1 and top-5 % of a feed-forward classifier (Linear-ReLU per ``hidden`` size, then a linear
    output) trained on raw frozen features (OAR §5.1-5.2; :func:`_fit`'s loop, weights seeded by ``seed``).

    Top-5 counts a hit among the five highest logits (capped at the class count). Returns ``{"top1",
    "top5", "diverged", "last_epoch_loss", "dead_fraction"}``: ``diverged`` is None, or the reason
    (:data:`FFN_DIVERGENCE`) with no accuracies; ``dead_fraction`` is the share of the last hidden
    layer's units that are 0 on every training feature (a partly dead FFN still reports its accuracy).
    """
    if epochs < 1 or batch_size < 1 or lr <= 0 or not hidden or min(hidden) < 1:
        raise ValueError(
            f"epochs and batch_size must be >= 1, lr > 0 and hidden sizes >= 1, got {epochs}, "
            f"{batch_size}, {lr}, {list(hidden)}"
        )
    torch.manual_seed(seed)
    sizes = [train_x.shape[1], *hidden]
    layers: list[torch.nn.Module] = []
    for fan_in, fan_out in zip(sizes, sizes[1:], strict=False):
        layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(sizes[-1], num_classes)).to(train_x.device)
    fit = _fit(
        model,
        train_x,
        train_y,
        epochs=epochs,
        batch_size=batch_size,
        seed=seed,
        sgd={"lr": lr, "momentum": momentum, "weight_decay": weight_decay},
        stop_if_non_finite=True,
    )
    diverged = _ffn_divergence(model, train_x, train_y, fit, num_classes)
    with torch.no_grad():
        dead = float((model[:-1](train_x) <= 0).all(dim=0).float().mean())
    info = {"diverged": diverged, "last_epoch_loss": fit["last_epoch_loss"], "dead_fraction": dead}
    if diverged is not None:
        return {"top1": None, "top5": None, **info}
    with torch.no_grad():
        top = model(test_x).topk(min(5, num_classes), dim=1).indices
    hits = top == test_y.unsqueeze(1)
    return {
        "top1": 100.0 * hits[:, 0].float().mean().item(),
        "top5": 100.0 * hits.any(dim=1).float().mean().item(),
        **info,
    }


@torch.no_grad()
def _ffn_divergence(model, train_x, train_y, fit: dict, num_classes: int) -> str | None:
    """The reason the trained FFN counts as diverged (:data:`FFN_DIVERGENCE`), or None."""
    if fit["non_finite_epoch"] is not None:
        return f"non-finite training loss in epoch {fit['non_finite_epoch'] + 1}"
    if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
        return "non-finite FFN weights"
    share = torch.bincount(train_y, minlength=num_classes).double() / len(train_y)
    prior_loss = float(-(share[share > 0] * share[share > 0].log()).sum())
    if fit["last_epoch_loss"] > FFN_PRIOR_LOSS_FACTOR * prior_loss + 1e-6:
        return (
            f"last-epoch training loss {fit['last_epoch_loss']:.4g} > {FFN_PRIOR_LOSS_FACTOR} x the "
            f"label-frequency loss {prior_loss:.4g}"
        )
    hidden = model[:-1](train_x)
    features_differ = bool((train_x != train_x[:1]).any())
    if features_differ and bool((hidden == hidden[:1]).all()):
        return "the last hidden layer is constant over the training features (dead ReLUs)"
    return None


def embedding_variance(x: Tensor) -> float:
    """Σ_d Var(x[:, d]) (unbiased): the "variance of embeddings" of OAR Fig. 2, "aggregating the
    variances across each dimension" of the raw encoder outputs.

    >>> embedding_variance(torch.tensor([[0.0, 1.0], [2.0, 1.0]]))
    2.0
    """
    return float(x.double().var(dim=0).sum())


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


#: Keys of an encoder's settings.json copied into its metrics file (as senteval.TRAINING_KEYS).
TRAINED_WITH_KEYS = (
    "precision",
    "requested_precision",
    "tf32_matmul",
    "tf32_conv",
    "device_name",
    "steps",
    "keep",
    "kept_epoch",
)


#: The key of a features file (:func:`encoder_features`) that marks an encoder whose training diverged.
DIVERGED_KEY = "encoder_diverged"


@ieee_fp32()  # the README's "evaluation in IEEE fp32"
def encoder_features(
    encoder_dir: str | Path,
    *,
    data_root: str | Path | None,
    batch_size: int = 512,
    device: str | None = None,
    download: bool = False,
) -> dict[str, Any]:
    """The GPU half of an image evaluation: the frozen encoder in ``encoder_dir`` on its dataset's train
    and test splits. Returns ``{"train_x", "train_y", "test_x", "test_y"}`` (on ``device``), ``dataset``,
    ``seed`` (the training seed, the probes' seed), ``training`` (:data:`TRAINED_WITH_KEYS` of its
    settings.json), ``encoder_dir`` and ``encoding`` (``device``, ``extract_s``), for
    :func:`probe_features` here or, saved with :func:`save_features`, in a CPU job (rules/vision.smk)."""
    started = time.perf_counter()
    dev = pick_device(device)
    encoder, summary = load_encoder(encoder_dir, dev)
    s = summary["settings"]
    dataset, size = s["dataset"], summary.get("input_size") or summary["image_size"]
    mean, std = IMAGE_STATS[dataset]
    out: dict[str, Any] = {}
    for name in ("train", "test"):
        split = load_images(dataset, name, root=data_root, download=download, image_size=s["image_size"])
        out[f"{name}_x"] = extract_features(
            encoder, split.images, size=size, mean=mean, std=std, batch_size=batch_size, device=dev
        )
        out[f"{name}_y"] = split.labels.to(dev)
    return {
        **out,
        "dataset": dataset,
        "seed": int(s["seed"]),
        "training": {key: summary.get(key) for key in TRAINED_WITH_KEYS},
        "encoder_dir": str(encoder_dir),
        "encoding": {"device": str(dev), "extract_s": time.perf_counter() - started},
    }


def job_features(
    encoder_dir: str | Path, *, data_root: str | Path | None, batch_size: int = 512, device: str | None = None
) -> dict[str, Any]:
    """What the GPU job of an image evaluation writes to its features file: :func:`encoder_features`, or
    ``{DIVERGED_KEY: reason}`` for a point whose training diverged (its ``diverged.json``,
    :func:`contrastlab.search.record_diverged`: there is no encoder to extract with)."""
    reason = diverged_reason(encoder_dir)
    if reason is not None:
        return {DIVERGED_KEY: reason}
    return encoder_features(encoder_dir, data_root=data_root, batch_size=batch_size, device=device)


def evaluate_features(
    encoder_dir: str | Path,
    features_path: str | os.PathLike,
    evaluation: Mapping[str, Any],
    *,
    device: str | None = None,
) -> dict[str, Any]:
    """The metrics of the CPU job of an image evaluation: the probes the experiment's ``evaluation``
    section configures (``probes``, default linear and kNN; ``linear``, ``knn``, ``ffn``) fitted on the
    features its GPU job saved (:func:`probe_features`), or, for a point whose training diverged (the
    encoder folder's ``diverged.json``), :func:`diverged_encoder_metrics`."""
    probes = list(evaluation.get("probes") or ("linear", "knn"))
    reason = diverged_reason(encoder_dir)
    if reason is not None:
        return diverged_encoder_metrics(encoder_dir, reason, probes, evaluation.get("ffn"))
    return probe_features(
        load_features(features_path),
        probes=probes,
        linear=dict(evaluation["linear"]),
        knn=dict(evaluation["knn"]),
        ffn=dict(evaluation.get("ffn") or {}),
        device=device,
    )


def save_features(path: str | os.PathLike, features: Mapping[str, Any]) -> None:
    """Write :func:`encoder_features`' answer (tensors moved to the CPU), or ``{DIVERGED_KEY: reason}``
    for an encoder whose training diverged, to ``path`` atomically."""
    cpu = {k: v.cpu() if isinstance(v, Tensor) else v for k, v in features.items()}
    with atomic_write(path) as tmp:
        torch.save(cpu, tmp)


def load_features(path: str | os.PathLike) -> dict[str, Any]:
    """What :func:`save_features` wrote (on the CPU)."""
    return torch.load(Path(path), map_location="cpu", weights_only=True)


def _check_probes(probes: Sequence[str]) -> None:
    unknown = sorted(set(probes) - set(PROBES))
    if unknown or not probes:
        raise ValueError(f"unknown probe(s) {unknown or probes}; choose from {', '.join(PROBES)}")


@ieee_fp32()  # the probes' matmuls too: the README's "evaluation in IEEE fp32"
def probe_features(
    features: Mapping[str, Any],
    *,
    probes: list[str] | tuple[str, ...] = ("linear", "knn"),
    linear: dict[str, Any] | None = None,
    knn: dict[str, Any] | None = None,
    ffn: dict[str, Any] | None = None,
    device: str | None = None,
) -> dict[str, Any]:
    """The CPU half of an image evaluation: the ``probes`` (:data:`PROBES`) fitted on the frozen features
    of :func:`encoder_features` (moved to ``device``, default: where they are); returns the metrics
    :func:`evaluate_encoder` documents. Nothing here needs the encoder or a GPU."""
    _check_probes(probes)
    dev = torch.device(device) if device is not None else features["train_x"].device
    args = tuple(features[k].to(dev) for k in ("train_x", "train_y", "test_x", "test_y"))
    train_x, train_y, test_x, test_y = args
    num_classes, seed = NUM_CLASSES[features["dataset"]], int(features["seed"])
    seeded = {"num_classes": num_classes, "seed": seed}  # the linear probe's and the FFN's
    used = {
        "linear": {**LINEAR_DEFAULTS, **(linear or {})},
        "knn": {**KNN_DEFAULTS, **(knn or {})},
        "ffn": {**FFN_DEFAULTS, **(ffn or {})},
    }
    scores: dict[str, float] = {}
    diverged: dict[str, str] = {}
    ffn_runs: dict[str, dict[str, Any]] = {}
    timings = {"extract_s": features["encoding"]["extract_s"]}
    for probe in probes:
        t = time.perf_counter()
        if probe == "linear":
            scores["linear_top1"] = linear_probe_accuracy(*args, **seeded, **used["linear"])
        elif probe == "knn":
            scores["knn_top1"] = knn_accuracy(*args, num_classes=num_classes, **used["knn"])
        else:
            settings = {k: v for k, v in used["ffn"].items() if k != "label_fractions"}
            for fraction in used["ffn"]["label_fractions"]:
                rows = labelled_subset(len(train_y), fraction, seed).to(dev)
                top = ffn_accuracy(train_x[rows], train_y[rows], test_x, test_y, **seeded, **settings)
                percent = round(100 * fraction)
                ffn_runs[f"ffn{percent}"] = {k: v for k, v in top.items() if k not in ("top1", "top5")}
                for k in ("top1", "top5"):
                    if top["diverged"] is None:
                        scores[f"ffn{percent}_{k}"] = top[k]
                    else:
                        diverged[f"ffn{percent}_{k}"] = top["diverged"]
        timings[f"{probe}_s"] = time.perf_counter() - t
    scores["embedding_variance"] = embedding_variance(test_x)
    scores["effective_rank_95"] = float(effective_rank(test_x, centre=True))  # the spread around the mean
    return {
        "scores": scores,
        "diverged": diverged,
        "dataset": features["dataset"],
        "n_train": len(train_y),
        "n_test": len(test_y),
        "feature_dim": train_x.shape[1],
        "probes": list(probes),
        **({"ffn_runs": ffn_runs} if ffn_runs else {}),
        **{probe: used[probe] for probe in probes},
        "encoder_dir": features["encoder_dir"],
        "device": str(dev),  # the probes'; the features': encoding.device
        "encoding": dict(features["encoding"]),
        "timings": timings,
        "training": dict(features["training"]),
    }


def evaluate_encoder(
    encoder_dir: str | Path,
    *,
    data_root: str | Path | None,
    batch_size: int = 512,
    probes: list[str] | tuple[str, ...] = ("linear", "knn"),
    linear: dict[str, Any] | None = None,
    knn: dict[str, Any] | None = None,
    ffn: dict[str, Any] | None = None,
    device: str | None = None,
    download: bool = False,
) -> dict[str, Any]:
    """The ``probes`` (:data:`PROBES`) of the encoder in ``encoder_dir`` on its dataset's test split, in
    one process: :func:`encoder_features` then :func:`probe_features` (the workflow runs them as a GPU
    and a CPU job). Returns ``{"scores": {...}, "diverged", "n_train", "n_test", "timings", ...}``.

    Scores, in percent: ``linear_top1``, ``knn_top1``, the FFN's ``ffn<P>_top1`` / ``ffn<P>_top5`` per
    label percentage P; always ``embedding_variance`` and ``effective_rank_95``. A diverged FFN run
    (:data:`FFN_DIVERGENCE`) has its keys in ``diverged`` (key -> reason) instead. ``linear``/``knn``/
    ``ffn`` override the ``*_DEFAULTS``; ``download`` fetches CIFAR into ``data_root`` when absent."""
    _check_probes(probes)  # before the features are extracted
    features = encoder_features(
        encoder_dir, data_root=data_root, batch_size=batch_size, device=device, download=download
    )
    return probe_features(features, probes=probes, linear=linear, knn=knn, ffn=ffn)


def score_keys(probes: Sequence[str], ffn: Mapping[str, Any] | None = None) -> list[str]:
    """The score keys :func:`evaluate_encoder` reports for ``probes`` (the embedding statistics last)."""
    fractions = {**FFN_DEFAULTS, **(ffn or {})}["label_fractions"]
    keys = {"linear": ["linear_top1"], "knn": ["knn_top1"]}
    keys["ffn"] = [f"ffn{round(100 * f)}_{k}" for f in fractions for k in ("top1", "top5")]
    return [k for probe in probes for k in keys[probe]] + ["embedding_variance", "effective_rank_95"]


def diverged_encoder_metrics(
    encoder_dir: str | Path, reason: str, probes: Sequence[str], ffn: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The metrics of a point whose encoder's training diverged (its ``diverged.json``): no score, every
    key in ``diverged`` with the reason, so the tables and figures show it as diverged and the run goes on."""
    return {
        "scores": {},
        "diverged": dict.fromkeys(score_keys(probes, ffn), f"encoder training diverged: {reason}"),
        "encoder_diverged": reason,
        "probes": list(probes),
        "encoder_dir": str(encoder_dir),
    }
