"""A sentence backbone as the plan sees it before anything is fetched: its architecture (the FLOPs and memory
of :mod:`contrastlab.cost.flops`) and its ``model_type``, which decides its cells' step mode.

The plan reads the model type from the config.json rule ``fetch_backbone`` writes where it is on disk;
before that, from the Hub configs it knows (:data:`HUB_CONFIGS`); else from the family the Hub id's name
spells (:func:`model_type_named_by`), and :func:`model_type_blocks` says which backbones it inferred or
could not tell, and how it priced them. Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

from contrastlab import config as cl_config
from contrastlab.blocks import Paragraph
from contrastlab.families import TEXT_FAMILIES, config_shape

#: config.json on the Hub of the backbones config.yaml names, by each repository's present id: model
#: type, hidden size, layers, intermediate size, attention heads, vocabulary, positions, token types.
HUB_CONFIGS = {
    "google-bert/bert-base-uncased": ("bert", 768, 12, 3072, 12, 30522, 512, 2),
    "google-bert/bert-large-uncased": ("bert", 1024, 24, 4096, 16, 30522, 512, 2),
    "FacebookAI/roberta-base": ("roberta", 768, 12, 3072, 12, 50265, 514, 1),
    "FacebookAI/roberta-large": ("roberta", 1024, 24, 4096, 16, 50265, 514, 1),
}

#: The former ids of those repositories (their names without the organisation), which config.yaml names
#: and the Hub redirects to them.
FORMER_HUB_IDS = {hf_id.split("/")[1]: hf_id for hf_id in HUB_CONFIGS}

#: The architecture of each known repository (as above, less the model type) by every id the Hub answers
#: to (benchmarks/train_throughput.py builds its models from it).
KNOWN_ARCHITECTURES = {
    hf_id: HUB_CONFIGS[FORMER_HUB_IDS.get(hf_id, hf_id)][1:] for hf_id in [*FORMER_HUB_IDS, *HUB_CONFIGS]
}


@dataclass(frozen=True)
class Transformer:
    """A BERT-like encoder's shape and parameter counts (``non_embedding`` feeds the FLOPs)."""

    hidden: int
    layers: int
    intermediate: int
    heads: int
    non_embedding: int
    total: int
    source: str
    #: ``config.model_type`` (``bert``, ``roberta``, ...); "" where it is not known
    model_type: str = ""
    #: where ``model_type`` comes from: ``config`` (a config.json or BertConfig, the trainer's source),
    #: ``id`` (the family the Hub id names, :func:`model_type_named_by`), "" (not known)
    model_type_from: str = "config"


def transformer_parameters(
    hidden: int, layers: int, intermediate: int, vocab: int, positions: int, token_types: int
) -> tuple[int, int]:
    """``(non-embedding, total)`` parameters of a BERT/RoBERTa encoder with its pooler.

    Per layer: Q, K, V and output projections ``4h² + 4h``, the feed-forward ``2hi + i + h``, two
    LayerNorms ``4h``; embeddings ``(vocab + positions + token_types)·h + 2h``; pooler ``h² + h``.

    >>> transformer_parameters(768, 12, 3072, 30522, 512, 2)  # bert-base-uncased: 109.48M in all
    (85054464, 109482240)
    """
    per_layer = 4 * hidden * hidden + 4 * hidden + 2 * hidden * intermediate + intermediate + 5 * hidden
    non_embedding = layers * per_layer
    embeddings = (vocab + positions + token_types) * hidden + 2 * hidden
    return non_embedding, non_embedding + embeddings + hidden * hidden + hidden


def _transformer(
    hidden, layers, intermediate, heads, vocab, positions, types, source, model_type=""
) -> Transformer:
    non_embedding, total = transformer_parameters(hidden, layers, intermediate, vocab, positions, types)
    return Transformer(hidden, layers, intermediate, heads, non_embedding, total, source, model_type)


def _from_config(config: dict, source: str) -> Transformer:
    """An architecture from a config.json's keys, by its family's names (:func:`config_shape`)."""
    s = config_shape(config, source)
    shape = (s.hidden, s.layers, s.intermediate, s.heads, s.vocab, s.positions, s.token_types)
    return _transformer(*shape, source, s.model_type)


def model_type_named_by(hf_id: str) -> str:
    """The model type of :data:`~contrastlab.families.TEXT_FAMILIES` that a Hub id's repository name
    spells as whole words, where it spells exactly one (``roberta`` inside ``xlm-roberta`` is the
    latter); "" where none or several. A guess the trainer never makes (it reads config.json).

    >>> model_type_named_by("princeton-nlp/unsup-simcse-bert-base-uncased")
    'bert'
    >>> model_type_named_by("FacebookAI/xlm-roberta-base"), model_type_named_by("microsoft/deberta-v3-base")
    ('xlm-roberta', '')
    """
    words = "-" + "-".join(re.split(r"[^a-z0-9]+", hf_id.rsplit("/", 1)[-1].lower())) + "-"
    named = {family for family in TEXT_FAMILIES if f"-{family}-" in words}
    named = {family for family in named if not any(f"-{family}-" in f"-{o}-" for o in named - {family})}
    return named.pop() if len(named) == 1 else ""


def backbone_transformer(grid: cl_config.Grid, alias: str) -> Transformer:
    """A sentence backbone's architecture and model type, never downloaded: :data:`HUB_CONFIGS`, a
    ``random`` BertConfig, a local or fetched ``config.json``, else ``params_millions`` as the
    non-embedding count with the model type the Hub id names."""
    spec = grid.backbone(alias)
    candidates = [Path(grid.resources.backbone_dir(alias), "config.json")]
    if "path" in spec:
        candidates.insert(0, Path(spec["path"], "config.json"))
    if "package" in spec:
        found = importlib.util.find_spec(spec["package"])
        for location in (found.submodule_search_locations or []) if found else []:
            candidates.insert(0, Path(location, "model", "config.json"))
    hf_id = spec.get("hf_id") or ""
    known = HUB_CONFIGS.get(FORMER_HUB_IDS.get(hf_id, hf_id))
    if known:
        model_type, *shape = known
        return _transformer(*shape, f"{hf_id}'s config", model_type)
    if "random" in spec:  # transformers' BertConfig defaults (BERT-base's) where the spec leaves one out
        sizes = {"hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072}
        return _from_config({**sizes, **spec["random"], "model_type": "bert"}, "its random BertConfig")
    for candidate in candidates:
        if candidate.is_file():
            return _from_config(json.loads(candidate.read_text()), str(candidate))
    n = int(float(spec.get("params_millions", 110)) * 1e6)
    named = model_type_named_by(hf_id)
    source = "params_millions (no architecture known)"
    return Transformer(768, 12, 3072, 12, n, n, source, named, "id" if named else "")


def model_type_blocks(grid: cl_config.Grid) -> list[Paragraph]:
    """The plan's paragraphs on the sentence backbones whose model type no config gave: the family their
    Hub id names (or none), and so the step mode their cells are priced in until ``fetch_backbone`` writes
    the config.json the trainer reads. Empty where every backbone's config is known."""
    paragraphs = []
    sentence = (c.backbone for c in grid.cells if grid.experiment(c.experiment).track != "vision")
    for alias in dict.fromkeys(sentence):
        model = backbone_transformer(grid, alias)
        if model.model_type_from == "config":
            continue
        spec = grid.backbone(alias)
        if model.model_type:
            priced = f"as a `{model.model_type}`, the family its id names"
        else:
            priced = (
                "as a family without a padding-free forward, as its id names none (IEEE-fp32 cells as the "
                "padded graph; a BERT or a RoBERTa would train them padding-free)"
            )
        paragraphs.append(
            Paragraph(
                f"Backbone `{alias}` (`{spec.get('hf_id') or spec.get('path') or spec.get('package')}`): not "
                f"in the plan's table and not fetched, so priced at `params_millions` and {priced}. The "
                f"trainer reads its family from {Path(grid.resources.backbone_dir(alias), 'config.json')}, "
                "which rule `fetch_backbone` writes; the plan reads it too once it is there."
            )
        )
    return paragraphs
