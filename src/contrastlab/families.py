"""Backbone families and a cell's step mode, each stated once and without torch.

- :data:`TEXT_FAMILIES`: what each transformers ``model_type`` of the sentence track needs (RoBERTa's
  head under ``li2024``, offset positions, the 4-D attention mask, a padding-free forward, the dropout keys).
- :data:`RESNETS`: each image encoder's block, blocks per stage, expansion and host launches, which
  ``models.vision`` builds from and ``cost.flops`` counts from.
- :func:`step_mode`: how a cell's training step runs on a device (eager, graph, compile + graph,
  padding-free; the dev batch). Both trainers (``training.capture.for_device``) and the plan
  (``cost.flops``) ask it, so the plan prices the step the trainer runs.

Here rather than in ``models``, which imports torch: the plan reads these facts in jobs without torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = [
    "DEV_BATCH_SIZE",
    "BERT_CONFIG_KEYS",
    "BERT_DROPOUT_KEYS",
    "DEV_BATCH_SIZE_ELSEWHERE",
    "RESNETS",
    "TEXT_FAMILIES",
    "ConfigKeys",
    "ResNet",
    "Shape",
    "StepMode",
    "TextFamily",
    "config_shape",
    "step_mode",
    "text_types",
]


#: Where BERT's config holds its hidden and its attention-probability dropout; most families share them.
BERT_DROPOUT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


@dataclass(frozen=True)
class ConfigKeys:
    """Where a family's ``config.json`` holds its shape (transformers' names of the config attributes):
    the hidden size, the layers, the feed-forward size, the attention heads, the positions and the token
    types (None: the family has no token-type embeddings)."""

    hidden: str = "hidden_size"
    layers: str = "num_hidden_layers"
    intermediate: str = "intermediate_size"
    heads: str = "num_attention_heads"
    positions: str = "max_position_embeddings"
    token_types: str | None = "type_vocab_size"


#: BERT's key names, which most families share.
BERT_CONFIG_KEYS = ConfigKeys()


@dataclass(frozen=True)
class TextFamily:
    """What a transformers ``model_type`` needs from this project.

    ``roberta_like``: ``li2024``'s head is Tanh then Linear (Li et al.'s RoBERTa runs), not a Linear;
    ``offset_positions``: position ids start at ``pad_token_id + 1`` (the model reserves the first
    ``pad_token_id + 1`` rows of its position table), so the longest input is that much shorter;
    ``mask_4d``: its modelling code takes a 4-D attention mask unchanged (SDPA with a boolean mask);
    ``padding_free``: :mod:`contrastlab.models.packed` has a padding-free forward for its model class;
    ``dropout_keys``: the config attributes (hidden, then attention) that every dropout of its model is
    built from, which the trainer sets to a cell's ``dropout``; ``config_keys``: where its ``config.json``
    holds its shape (:class:`ConfigKeys`), which the plan, the export and the MTEB metadata read.
    """

    roberta_like: bool = False
    offset_positions: bool = False
    mask_4d: bool = True
    padding_free: bool = False
    dropout_keys: tuple[str, str] = BERT_DROPOUT_KEYS
    config_keys: ConfigKeys = BERT_CONFIG_KEYS


#: The text families (a field left out is BERT's). ``offset_positions`` as transformers 5.23's modelling
#: code has it: the embeddings of modeling_{roberta,xlm_roberta,camembert,mpnet}.py build position ids with
#: ``create_position_ids_from_input_ids(input_ids, padding_idx)`` (positions from ``padding_idx + 1``);
#: modeling_{bert,distilbert,electra}.py take ``arange(seq_length)``. ``mask_4d``: these seven build
#: their attention bias with ``masking_utils.create_bidirectional_mask``, which returns a 4-D mask
#: unchanged. ``roberta_like`` is the head Li et al. gave RoBERTa (MPNet is not one of their backbones).
#: ``dropout_keys``: configuration_distilbert.py names them ``dropout`` and ``attention_dropout``.
#: ``config_keys``: DistilBERT's config names its shape ``dim``, ``n_layers``, ``hidden_dim``, ``n_heads``
#: and has no token types; MPNet's has no token types either; the others use BERT's names.
TEXT_FAMILIES: Mapping[str, TextFamily] = MappingProxyType(
    {
        "bert": TextFamily(padding_free=True),
        "roberta": TextFamily(roberta_like=True, offset_positions=True, padding_free=True),
        "xlm-roberta": TextFamily(roberta_like=True, offset_positions=True),
        "camembert": TextFamily(roberta_like=True, offset_positions=True),
        "distilbert": TextFamily(
            dropout_keys=("dropout", "attention_dropout"),
            config_keys=ConfigKeys("dim", "n_layers", "hidden_dim", "n_heads", token_types=None),
        ),
        "mpnet": TextFamily(offset_positions=True, config_keys=ConfigKeys(token_types=None)),
        "electra": TextFamily(),
    }
)


def text_types(need: str) -> tuple[str, ...]:
    """The ``model_type`` s of :data:`TEXT_FAMILIES` that have ``need`` (a :class:`TextFamily` field).

    >>> text_types("padding_free"), text_types("roberta_like")
    (('bert', 'roberta'), ('roberta', 'xlm-roberta', 'camembert'))
    """
    return tuple(name for name, family in TEXT_FAMILIES.items() if getattr(family, need))


@dataclass(frozen=True)
class Shape:
    """A text encoder's shape as its ``config.json`` gives it (:func:`config_shape`)."""

    model_type: str
    hidden: int
    layers: int
    intermediate: int
    heads: int
    vocab: int
    positions: int
    token_types: int


def config_shape(config: Mapping[str, Any], where: str = "config.json") -> Shape:
    """The shape of the encoder a ``config.json`` (as a dict) describes, read by its ``model_type``'s
    :attr:`TextFamily.config_keys` (BERT's names for a family not in :data:`TEXT_FAMILIES`); 0 token types
    for a family without them. The heads, vocabulary, positions and token types a config leaves out are
    BERT-base's (transformers' defaults); a missing size or layer count is a ``ValueError`` naming
    ``where``, the key and the family.

    >>> shape = config_shape({"model_type": "distilbert", "dim": 768, "n_layers": 6, "hidden_dim": 3072})
    >>> shape.hidden, shape.layers, shape.intermediate, shape.heads, shape.token_types
    (768, 6, 3072, 12, 0)
    """
    model_type = str(config.get("model_type") or "")
    family = TEXT_FAMILIES.get(model_type)
    keys = family.config_keys if family else BERT_CONFIG_KEYS

    def read(key: str, default: int | None = None) -> int:
        if key in config:
            return int(config[key])
        if default is not None:
            return default
        raise ValueError(
            f"{where}: no {key!r}, where a {model_type or 'model of no model_type'} config holds it "
            "(contrastlab.families.TEXT_FAMILIES: add the family with its config_keys)"
        )

    return Shape(
        model_type,
        read(keys.hidden),
        read(keys.layers),
        read(keys.intermediate),
        read(keys.heads, 12),
        read("vocab_size", 30522),
        read(keys.positions, 512),
        read(keys.token_types, 2) if keys.token_types else 0,
    )


@dataclass(frozen=True)
class ResNet:
    """An image encoder (He et al. 2016, Table 1): torchvision's block (``"basic"`` or
    ``"bottleneck"``), blocks per stage, the block's output expansion, and the host-launched kernels
    (non-view ATen ops, counted on the CPU with a ``TorchDispatchMode``; tests/cost/test_plan.py recounts
    them) of its forward + backward and of its forward alone, which the plan prices an eager step by."""

    block: str
    layers: tuple[int, ...]
    expansion: int
    launches: int
    forward_launches: int


#: The image encoders ``models.vision.build_encoder`` builds.
RESNETS: Mapping[str, ResNet] = MappingProxyType(
    {
        "resnet18": ResNet("basic", (2, 2, 2, 2), 1, launches=214, forward_launches=86),
        "resnet50": ResNet("bottleneck", (3, 4, 6, 3), 4, launches=560, forward_launches=226),
    }
)

#: Dev sentences per encoder call by device type when ``dev_batch_size`` is None: on a GPU larger batches
#: mean fewer launches (6 instead of 23 per STS-B dev evaluation); on a CPU the run keeps the batches it
#: always had, so no CPU number moves.
DEV_BATCH_SIZE = MappingProxyType({"cuda": 512})
DEV_BATCH_SIZE_ELSEWHERE = 128


@dataclass(frozen=True)
class StepMode:
    """How a cell's training step runs: captured as one CUDA graph (``graph``), with the encoder
    compiled (``compile``), on the real tokens only (``padding_free``, sentence cells); the dev batch
    (sentence cells; None for image cells); and the one-line notes that say why where it is not the
    obvious thing."""

    graph: bool
    compile: bool
    padding_free: bool
    dev_batch: int | None
    notes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """``eager``, ``graph``, ``compile``, ``compile + graph`` or ``padding-free``."""
        if self.padding_free:
            return "padding-free"
        return " + ".join(["compile"] * self.compile + ["graph"] * self.graph) or "eager"


def step_mode(
    settings: Mapping[str, Any],
    *,
    track: str,
    device_type: str,
    precision: str,
    model_type: str | None = None,
    n_images: int = 0,
) -> StepMode:
    """The step mode of a cell of ``track`` (``sentence`` or ``vision``) with these ``settings`` (a
    trainer's settings as a dict, or the plan's resolved ones: an absent key is the trainer's default),
    on a ``device_type`` at the resolved ``precision``, for a backbone of ``model_type`` (sentence) or
    ``n_images`` training images (vision). An explicit ``cuda_graph: true`` the image step cannot follow
    raises one line (the sentence settings refuse theirs when built; off CUDA it is the trainer's error).

    Sentence: ``cuda_graph`` None is on for CUDA with ``grad_accum: 1``. ``padding_free`` None is on for
    IEEE fp32 on CUDA with a backbone that has a padding-free forward, unless the cell names the graph or
    compile (why: docs/training-speed.md); on a CPU the padded step stays, so CPU numbers stay
    byte-identical. ``dev_batch_size`` None: :data:`DEV_BATCH_SIZE`.

    Vision: ``cuda_graph`` None is on for CUDA wherever the step can be captured (not OAR's, not with
    ``compile``, not with a partial last batch).

    >>> step_mode({}, track="sentence", device_type="cuda", precision="fp32", model_type="bert").name
    'padding-free'
    >>> step_mode({"cuda_graph": True}, track="sentence", device_type="cuda", precision="fp32",
    ...           model_type="bert").name
    'graph'
    """
    if track == "vision":
        return _vision_mode(settings, device_type, n_images)
    return _sentence_mode(settings, device_type, precision, model_type)


def sentence_switches_refused(settings: Mapping[str, Any]) -> str | None:
    """Why the sentence step cannot follow these switches together, with the fix (None: it can): a
    captured step holds one encoder pass, and padding-free batches change shape every step, which neither
    the graph nor compile follows. The trainer's settings and the config's check both ask it."""
    graph = settings.get("cuda_graph")
    grad_accum = int(settings.get("grad_accum") or 1)
    if graph and grad_accum != 1:
        return (
            f"cuda_graph captures one encoder pass per step; set grad_accum: 1 (got {grad_accum}) "
            "or cuda_graph: false"
        )
    if settings.get("padding_free") and (graph or settings.get("compile")):
        switch = "cuda_graph" if graph else "compile"
        return (
            f"padding_free changes the token count every batch, which {switch} cannot follow; set "
            f"padding_free: false or {switch}: false"
        )
    return None


def vision_settings_refused(settings: Mapping[str, Any]) -> str | None:
    """Why the image trainer refuses these settings together (None: it does not): the epoch kept needs a
    validation split, and the OAR and validation fractions share the training set. The trainer's settings
    and the config's check both ask it (in the train job, Snakemake had removed the finished cell)."""
    keep, val = settings.get("keep", "last"), float(settings.get("val_fraction") or 0.0)
    if (keep == "best_val_loss") != (val > 0):
        return (
            "keep: best_val_loss needs val_fraction in (0, 1) and keep: last none, got "
            f"keep {keep!r} with val_fraction {val}"
        )
    if (oar := float(settings.get("oar_fraction") or 0.0)) + val > 1:
        return f"oar_fraction {oar} + val_fraction {val} exceed the training set"
    return None


def _sentence_mode(settings: Mapping[str, Any], device_type: str, precision: str, model_type) -> StepMode:
    cuda, compiled = device_type == "cuda", bool(settings.get("compile"))
    dev_batch = settings.get("dev_batch_size") or DEV_BATCH_SIZE.get(device_type, DEV_BATCH_SIZE_ELSEWHERE)
    padding_free = settings.get("padding_free")
    if padding_free:  # asked for by name: the graph stays off (both: sentence_switches_refused)
        return StepMode(False, compiled, True, dev_batch)
    graph, notes = settings.get("cuda_graph"), []
    if graph is None:
        grad_accum = int(settings.get("grad_accum") or 1)
        graph = cuda and grad_accum == 1
        if cuda and not graph:
            notes.append(
                f"cuda_graph: off, the eager step (grad_accum {grad_accum}: a captured step holds one "
                "encoder pass)"
            )
    # a cell that names the graph or compile keeps the padded step it asked for (the graph's static shapes)
    by_choice = bool(settings.get("cuda_graph")) or compiled
    family = TEXT_FAMILIES.get(model_type or "")
    packs = cuda and precision == "fp32" and family is not None and family.padding_free
    if padding_free is None and not by_choice and packs:
        note = (
            f"padding_free: on ({precision} on {device_type}: the token-wise layers run on the real tokens "
            "only, the padded model's numbers up to rounding; eager step, no CUDA graph)"
        )
        return StepMode(False, compiled, True, dev_batch, (note,))
    return StepMode(bool(graph), compiled, False, dev_batch, tuple(notes))


def _vision_mode(settings: Mapping[str, Any], device_type: str, n_images: int) -> StepMode:
    why = _image_step_stays_eager(settings, n_images)
    compiled, asked = bool(settings.get("compile")), settings.get("cuda_graph")
    if asked is None:
        cuda = device_type == "cuda"
        notes = (f"cuda_graph: off, the eager step ({why})",) if cuda and why else ()
        return StepMode(cuda and why is None, compiled, False, None, notes)
    if asked and why is not None:
        raise ValueError(f"cuda_graph: true cannot capture this image step ({why}); set cuda_graph: false")
    return StepMode(bool(asked), compiled, False, None)


def _image_step_stays_eager(settings: Mapping[str, Any], n_images: int) -> str | None:
    """Why an image step cannot be captured (None: it can)."""
    if float(settings.get("oar_fraction") or 0) > 0:
        return "OAR's labelled pass is not captured; its fp32 step is GPU-bound"
    if settings.get("compile"):
        return "compile: true is not measured with the graph"
    batch = int(settings.get("batch_size") or 256)
    if settings.get("drop_last") is False and n_images % batch:
        return f"drop_last: false leaves a last batch of {n_images % batch} images, another shape"
    return None
