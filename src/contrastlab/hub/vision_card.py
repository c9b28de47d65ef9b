"""An image encoder's card metadata: huggingface_hub's ``ModelCardData`` with a ``model-index`` of its
probes' accuracies (linear probe, kNN, the OAR papers' FFN fine-tuning), written by huggingface_hub
(:func:`vision_front_matter`), never as YAML text.

The dataset a ``model-index`` names is the one the probes ran on: CIFAR-10 / CIFAR-100 by their hub
ids (the same images as the Toronto release the pipeline downloads); any other (the demo's
scikit-learn digits) by its own name, marked as contrastlab's local data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from contrastlab.hub.publish import front_matter

__all__ = ["VISION_LICENSE", "VISION_TAGS", "vision_eval_results", "vision_front_matter"]

#: An image card's tags (and the loss's name).
VISION_TAGS = ("image-feature-extraction", "contrastive-learning", "torchvision")

#: An image encoder's licence and where it comes from: contrastlab's own (LICENSE, pyproject.toml), since
#: the encoder is trained from random initialisation, with no pretrained weights whose licence it inherits
#: (a sentence card's is its backbone's).
VISION_LICENSE = ("mit", "contrastlab's, as the encoder is trained from random initialisation")

#: The hub dataset and its display name of each image dataset the configs name.
HUB_DATASETS = {"cifar10": ("uoft-cs/cifar10", "CIFAR-10"), "cifar100": ("uoft-cs/cifar100", "CIFAR-100")}

#: What each probe score is: ``(key pattern, metric name)``. One task ("image classification on frozen
#: features") holds them all: the Hub groups a model-index's results by task and dataset, and keeps one
#: task name per group, so the probe is named in each metric's name.
TASK_NAME = "Image classification on frozen features"
_PROBES = (
    (r"linear_top1", "Top-1 accuracy, linear probe"),
    (r"knn_top1", "Top-1 accuracy, weighted kNN"),
    (r"ffn(\d+)_top([15])", "Top-{1} accuracy, FFN fine-tuned on {0}% of the labels"),
)


def vision_eval_results(metrics: Mapping[str, Any]) -> list:
    """The probes' accuracies of ``metrics`` (the encoder's ``vision.json``) as huggingface_hub
    ``EvalResult`` objects (percent, 4 decimals), on the test split of its dataset, in the order the
    scores are stored; the geometry statistics (variance, effective rank) are not accuracies and stay out."""
    from huggingface_hub import EvalResult

    dataset = metrics.get("dataset")
    local = (str(dataset), f"{dataset} (contrastlab's local data, not a hub dataset)")
    dataset_type, dataset_name = HUB_DATASETS.get(dataset, local)
    results = []
    for key, value in metrics.get("scores", {}).items():
        for pattern, name in _PROBES:
            match = re.fullmatch(pattern, key)
            if match is None or value is None:
                continue
            results.append(
                EvalResult(
                    task_type="image-classification",
                    task_name=TASK_NAME,
                    dataset_type=dataset_type,
                    dataset_name=dataset_name,
                    dataset_split="test",
                    metric_type="accuracy",
                    metric_name=f"{name.format(*match.groups())} ({key})",
                    metric_value=round(float(value), 4),
                )
            )
    return results


def vision_front_matter(
    *, model_name: str, loss: str, metrics: Mapping[str, Any], tags: Sequence[str] = ()
) -> str:
    """An image card's front matter, written by huggingface_hub's ``ModelCardData``: ``library_name:
    pytorch``, ``pipeline_tag: image-feature-extraction``, ``license`` (:data:`VISION_LICENSE`), its tags
    (the loss, then ``tags``: the papers' ``arxiv:`` ones), and a ``model-index`` named ``model_name``
    holding the probes' accuracies (none for a diverged sweep point)."""
    from huggingface_hub import ModelCardData

    results = vision_eval_results(metrics)
    data = ModelCardData(
        library_name="pytorch",
        pipeline_tag="image-feature-extraction",
        license=VISION_LICENSE[0],
        tags=[*VISION_TAGS, loss, *tags],
        model_name=model_name if results else None,
        eval_results=results or None,
    )
    return front_matter(data)
