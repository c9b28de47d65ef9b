"""Checkpoints that others' tools load: sentence-transformers folders and torchvision loader specs.

:func:`write_sentence_transformers_files` makes a Hugging Face checkpoint folder a sentence-transformers
model in place (``modules.json``, ``sentence_bert_config.json``, module subfolders), so that
``SentenceTransformer(folder).encode(sentences)`` returns the vectors our evaluator scores
(:func:`contrastlab.models.text.pool`). JSON and safetensors only; sentence-transformers is never
imported. Each of :data:`~.text.POOLINGS` is built exactly from stock modules:

- ``cls`` (SimCSE's ``cls_before_pooler``): ``Transformer`` → ``Pooling(cls)``;
- ``avg``: ``Transformer`` → ``Pooling(mean)``;
- ``avg_embeddings_and_last`` / ``avg_first_layer_and_last``: ``Transformer`` (hidden states on) →
  ``WeightedLayerPooling`` with weight 1 on ``hidden_states[0]`` (or ``[1]``) and the last layer →
  ``Pooling(mean)``;
- ``cls_pooler``: ``Transformer`` → ``Pooling(cls)`` → ``Dense`` + Tanh from BERT's ``pooler.dense``.

No ``Normalize``: SentEval scores the raw vectors, so the export returns them raw. Inputs are truncated
at ``max_seq_length`` (the position limit), where our evaluator would fail instead.

:func:`write_torchvision_spec` writes ``torchvision.json`` beside an image encoder's weights: what a
plain ``torchvision.models`` ResNet needs to load them (README's "Using the trained encoders").
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from contrastlab.families import TEXT_FAMILIES, config_shape
from contrastlab.models.text import FIRST_LAST_POOLINGS, POOLINGS

__all__ = [
    "ST_FILES",
    "TORCHVISION_SPEC",
    "sentence_transformers_modules",
    "write_sentence_transformers_files",
    "write_torchvision_spec",
]

#: The files :func:`write_sentence_transformers_files` writes in the checkpoint's root.
ST_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")
TORCHVISION_SPEC = "torchvision.json"
_TANH = "torch.nn.modules.activation.Tanh"


def sentence_transformers_modules(pooling: str) -> list[str]:
    """The stock sentence-transformers modules, in order, that compute ``pooling``.

    >>> sentence_transformers_modules("cls_pooler")
    ['Transformer', 'Pooling', 'Dense']
    """
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")
    layers = ["WeightedLayerPooling"] if pooling in FIRST_LAST_POOLINGS else []
    return ["Transformer", *layers, "Pooling", *(["Dense"] if pooling == "cls_pooler" else [])]


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def _write_json(path: Path, value: dict[str, Any] | list[Any]) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n")


def _max_seq_length(folder: Path, model_config: dict[str, Any]) -> int | None:
    """The longest input the model takes: its position limit (RoBERTa's 514 less its 2 offsets), capped
    by the tokenizer's ``model_max_length`` where that is a real limit. Which families offset their
    positions: :data:`contrastlab.families.TEXT_FAMILIES`."""
    limits = []
    positions = model_config.get("max_position_embeddings")
    if positions:
        # positions offset past the padding index (RoBERTa, XLM-R, CamemBERT, MPNet: TEXT_FAMILIES)
        family = TEXT_FAMILIES.get(model_config.get("model_type") or "")
        offset = model_config.get("pad_token_id", 0) + 1 if family and family.offset_positions else 0
        limits.append(int(positions) - offset)
    tokenizer_max = _read_json(folder / "tokenizer_config.json").get("model_max_length")
    if isinstance(tokenizer_max, int) and tokenizer_max < 10**6:
        limits.append(tokenizer_max)
    return min(limits) if limits else None


def _pooler_weights(folder: Path) -> dict[str, torch.Tensor]:
    """BERT's pooler Linear (``pooler.dense``) from the checkpoint's safetensors, as Dense's ``linear``."""
    found: dict[str, torch.Tensor] = {}
    for file in sorted(folder.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as weights:
            for key in weights.keys():  # noqa: SIM118 - safe_open has no __iter__
                for part in ("weight", "bias"):
                    if key.endswith(f"pooler.dense.{part}"):
                        found[f"linear.{part}"] = weights.get_tensor(key).float().contiguous()
    if set(found) != {"linear.weight", "linear.bias"}:
        raise ValueError(
            f"pooling 'cls_pooler' needs a pooler layer (pooler.dense.*) in {folder}/*.safetensors"
        )
    return found


def _remove_previous_modules(folder: Path) -> None:
    """Delete the module subfolders an earlier ``modules.json`` listed (a copied sentence-transformers
    backbone brings its own, e.g. a ``Normalize`` our evaluator does not apply)."""
    for entry in _read_json(folder / "modules.json") or []:
        path = entry.get("path", "")
        if path and (folder / path).resolve().parent == folder.resolve():
            shutil.rmtree(folder / path, ignore_errors=True)


def write_sentence_transformers_files(folder: str | Path, pooling: str) -> list[Path]:
    """Make the Hugging Face checkpoint in ``folder`` a sentence-transformers model with ``pooling``.

    Writes :data:`ST_FILES` and one subfolder per module after the transformer (``1_Pooling``, ...);
    the weights and tokenizer stay where they are (the folder still loads with ``AutoModel``). Returns
    the paths written. Safe to run again: an earlier export's modules are replaced.
    """
    folder = Path(folder)
    config = _read_json(folder / "config.json")
    if not config:
        raise FileNotFoundError(f"no Hugging Face model (config.json) in {folder}")
    names = sentence_transformers_modules(pooling)
    shape = config_shape(config, str(folder / "config.json"))  # by the family's key names (DistilBERT: dim)
    dim = shape.hidden
    _remove_previous_modules(folder)
    modules: list[dict[str, Any]] = []
    written = []
    for index, name in enumerate(names):
        path = "" if name == "Transformer" else f"{index}_{name}"
        modules.append(
            {"idx": index, "name": str(index), "path": path, "type": f"sentence_transformers.models.{name}"}
        )
        if not path:
            continue
        sub = folder / path
        sub.mkdir(parents=True, exist_ok=True)
        if name == "Pooling":
            mode = "cls" if pooling in ("cls", "cls_pooler") else "mean"
            module_config: dict[str, Any] = {
                "word_embedding_dimension": dim,
                "pooling_mode_cls_token": mode == "cls",
                "pooling_mode_mean_tokens": mode == "mean",
                "pooling_mode_max_tokens": False,
                "pooling_mode_mean_sqrt_len_tokens": False,
            }
        elif name == "WeightedLayerPooling":
            layers = shape.layers
            weights = torch.zeros(layers + 1)
            weights[[FIRST_LAST_POOLINGS[pooling], layers]] = 1.0  # (first + last) / 2: the weights sum to 2
            save_file({"layer_weights": weights}, str(sub / "model.safetensors"))
            module_config = {"word_embedding_dimension": dim, "layer_start": 0, "num_hidden_layers": layers}
        else:  # Dense: BERT's pooler, Linear + Tanh
            save_file(_pooler_weights(folder), str(sub / "model.safetensors"))
            module_config = {
                "in_features": dim,
                "out_features": dim,
                "bias": True,
                "activation_function": _TANH,
            }
        _write_json(sub / "config.json", module_config)
        written.append(sub)
    st_config: dict[str, Any] = {"max_seq_length": _max_seq_length(folder, config), "do_lower_case": False}
    if pooling in FIRST_LAST_POOLINGS:
        st_config["config_args"] = {"output_hidden_states": True}
    _write_json(folder / "modules.json", modules)
    _write_json(folder / "sentence_bert_config.json", st_config)
    # STS scores by the cosine; no prompts. contrastlab_pooling records which of our poolings this is.
    _write_json(
        folder / "config_sentence_transformers.json",
        {
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
            "contrastlab_pooling": pooling,
        },
    )
    return [*(folder / name for name in ST_FILES), *written]


def write_torchvision_spec(
    folder: str | Path,
    *,
    arch: str,
    stem: str,
    width: int,
    out_dim: int | None,
    weights: str,
    head: torch.nn.Module | None = None,
    anchors: str | None = None,
) -> Path:
    """Write ``torchvision.json`` (and ``head.safetensors``) beside an image encoder's weights.

    The spec says how a plain ``torchvision.models.<arch>`` loads ``weights`` (our
    :class:`~.vision.ResNetEncoder`'s state dict, whose parameter names are torchvision's; our optional
    output Linear ``out.*`` is torchvision's ``fc``). ``torchvision`` is false where no stock
    torchvision ResNet has the shape: its stages are fixed at 64 channels, so a smaller ``width`` (the
    demo's) loads only through :func:`contrastlab.training.vision.load_encoder`. ``head``, the
    projection head (:class:`~.vision.ProjectionHead`), is saved as ``head.safetensors`` with the keys of
    ``nn.Sequential(Linear(in, hidden, bias=False), BatchNorm1d(hidden), ReLU(), Linear(hidden, out))``.
    """
    folder = Path(folder)
    head_spec = None
    if head is not None and any(True for _ in head.parameters()):
        state = {k.removeprefix("net."): v.detach().cpu().contiguous() for k, v in head.state_dict().items()}
        save_file(state, str(folder / "head.safetensors"))
        head_spec = {
            "file": "head.safetensors",
            "layers": "Linear(in, hidden, bias=False), BatchNorm1d(hidden), ReLU(), Linear(hidden, out)",
            "in": int(state["0.weight"].shape[1]),
            "hidden": int(state["0.weight"].shape[0]),
            "out": int(state["3.weight"].shape[0]),
        }
    spec = {
        "arch": arch,
        "stem": stem,  # cifar: conv1 = Conv2d(3, 64, 3, 1, 1, bias=False) and maxpool = Identity
        "width": width,
        "out_dim": out_dim,  # None: fc = Identity (pooled features); else torchvision's fc, our `out.*`
        "weights": weights,
        "rename": {"out.": "fc."} if out_dim is not None else {},
        "torchvision": width == 64,
        "head": head_spec,
        "anchors": anchors,  # OAR: safetensors key `anchors`, [K, D]
    }
    path = folder / TORCHVISION_SPEC
    _write_json(path, spec)
    return path
