"""MTEB's side of a kept sentence checkpoint: its scores as MTEB wrote them (:func:`mteb_scores`, through
mteb's own ``TaskResult``), its mteb 2.26 ``ModelMeta`` (:func:`model_meta`), and the folder a pull request
to MTEB's results repository adds (:func:`stage_submission`, in the layout mteb's ``ResultCache`` loads;
:func:`submit_pull_request` opens it through ``ResultCache.submit_results(create_pr=True)``). A stand-in
run's scores name no hub dataset or revision, only "local stand-in".
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrastlab.families import config_shape

__all__ = [
    "PR_STEPS",
    "STANDIN",
    "MtebScore",
    "Submission",
    "checkpoint_date",
    "checkpoint_revision",
    "model_meta",
    "mteb_eval_results",
    "mteb_scores",
    "stage_submission",
    "submit_pull_request",
]

#: What a card says instead of MTEB's hub dataset and revision where the rows came from local files.
STANDIN = "local stand-in"


@dataclass(frozen=True)
class MtebScore:
    """One score of MTEB's results folder: task, split, subset, the dataset and revision MTEB evaluated,
    the metric (the task's ``main_score``) and its value as MTEB stores it (a fraction, not percent)."""

    task: str
    split: str
    subset: str
    dataset: str  # "local stand-in" where MTEB's rows came from local files
    revision: str | None  # None for a stand-in: no hub revision was read
    metric: str
    value: float
    standin: bool = False  # MTEB's rows came from local files (rule mteb's data: standin), not the hub
    task_type: str = "STS"  # the task's MTEB type (metadata.type): STS, Classification, Retrieval, ...


def mteb_scores(folder: str | Path | None) -> list[MtebScore]:
    """The scores in MTEB's results folder ``folder`` (``<model>/<revision>/<TaskName>.json``, or a
    ``mteb.ResultCache`` root holding it as ``results/``, whose ``provenance.json`` marks a stand-in's), read
    by ``mteb.TaskResult.from_disk``, with the task's dataset and main score from ``mteb.get_task``. Only
    files at that depth are read. Empty when ``folder`` is None or holds no results; a task found twice is an
    error (the card would not know which to show)."""
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
                        # a stand-in's rows are local files: MTEB's hub dataset and revision were not read
                        dataset=STANDIN if standin else meta.dataset["path"],
                        revision=None if standin else result.dataset_revision,
                        metric=meta.main_score,
                        value=float(row["main_score"]),
                        standin=standin,
                        task_type=meta.type,
                    )
                )
    return scores


def mteb_eval_results(mteb: Iterable[MtebScore]) -> list:
    """MTEB's scores as ``huggingface_hub.EvalResult`` objects: each task's main score × 100 on the split
    and subset MTEB scored, with the dataset and revision MTEB read; a stand-in's (rows from local files)
    name no hub dataset and no revision, only "local stand-in (<task>)". The task type is the Hub's
    ``sentence-similarity`` for MTEB's STS tasks, MTEB's own type (``Classification``, ...) for others."""
    from huggingface_hub import EvalResult

    return [
        EvalResult(
            task_type="sentence-similarity" if score.task_type == "STS" else score.task_type,
            task_name=score.task_type,
            dataset_type=f"{STANDIN} ({score.task})" if score.standin else score.dataset,
            dataset_name=f"MTEB {score.task} ({score.subset})"
            + (f" on a {STANDIN} built from local files" if score.standin else ""),
            dataset_config=score.subset,
            dataset_split=score.split,
            dataset_revision=score.revision,
            metric_type=score.metric,
            metric_name=f"{score.metric} x 100 (MTEB)",
            metric_value=round(100 * score.value, 4),
            source_name="MTEB",
            source_url="https://github.com/embeddings-benchmark/mteb",
        )
        for score in mteb
    ]


def _weight_files(model_dir: Path) -> list[Path]:
    files = sorted(model_dir.rglob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {model_dir}: not a kept checkpoint")
    return files


def checkpoint_revision(model_dir: str | Path) -> str:
    """The checkpoint's revision before any hub commit names it: the sha256 of its weights (each
    ``*.safetensors`` file's relative path and bytes, in path order), so the same weights always get the
    same revision folder and other weights never do."""
    model_dir = Path(model_dir)
    digest = hashlib.sha256()
    for file in _weight_files(model_dir):
        digest.update(file.relative_to(model_dir).as_posix().encode() + b"\0")
        with file.open("rb") as handle:
            digest.update(hashlib.file_digest(handle, "sha256").digest())
    return digest.hexdigest()


def checkpoint_date(model_dir: str | Path) -> str:
    """The day (UTC, ISO) the run wrote the checkpoint's weights: the newest ``*.safetensors`` file's
    modification time (the training log keeps no clock time)."""
    newest = max(file.stat().st_mtime for file in _weight_files(Path(model_dir)))
    return datetime.datetime.fromtimestamp(newest, datetime.UTC).date().isoformat()


def _parameters(model_dir: Path) -> int:
    """Parameters of every safetensors file in the folder and its module subfolders, from their headers
    (read through the numpy framework: the shapes only, so no torch import in the card job)."""
    from safetensors import safe_open

    total = 0
    for file in sorted(model_dir.rglob("*.safetensors")):
        if file.parent.name.endswith("_WeightedLayerPooling"):
            continue  # fixed 0/1 layer weights of our pooling, not trained parameters
        with safe_open(str(file), framework="numpy") as weights:
            for key in weights.keys():  # noqa: SIM118 - safe_open has no __iter__
                total += math.prod(int(size) for size in weights.get_slice(key).get_shape())
    return total


def model_meta(
    model_dir: str | Path,
    *,
    name: str,
    license: str,
    base_model: str | None,
    training_data: str | None,
    release_date: str | None = None,
    citation: str | None = None,
) -> dict[str, Any]:
    """The MTEB ``ModelMeta`` of the sentence-transformers checkpoint in ``model_dir``, as JSON-ready
    fields (``mteb.models.ModelMeta.model_validate_json_resolved`` loads them).

    Parameters, embedding parameters (vocabulary × hidden size) and fp32 memory follow mteb's own rules,
    read from the safetensors headers and the family's key names (:func:`~contrastlab.families.config_shape`).
    ``training_datasets`` is STSBenchmark, whose dev split chose the kept checkpoint; ``revision`` the
    weights' digest (:func:`checkpoint_revision`) until a hub commit names it; ``release_date``: the day
    the run wrote the weights unless given; ``license``: the backbone's (a fine-tuned checkpoint keeps its
    base model's; "unknown" becomes MTEB's "not specified"); ``citation``: the papers' BibTeX."""
    model_dir = Path(model_dir)
    shape = config_shape(json.loads((model_dir / "config.json").read_text()), str(model_dir / "config.json"))
    st_config = json.loads((model_dir / "sentence_bert_config.json").read_text())
    similarity = json.loads((model_dir / "config_sentence_transformers.json").read_text())
    n_parameters = _parameters(model_dir)
    return {
        "loader": "SentenceTransformerEncoderWrapper",
        "name": name,
        "revision": checkpoint_revision(model_dir),
        "release_date": release_date or checkpoint_date(model_dir),
        "languages": ["eng-Latn"],
        "n_parameters": n_parameters,
        "n_embedding_parameters": shape.vocab * shape.hidden,
        "memory_usage_mb": round(n_parameters * 4 / 1024**2),
        "max_tokens": st_config.get("max_seq_length"),
        "embed_dim": shape.hidden,
        "license": "not specified" if license == "unknown" else license,
        "open_weights": True,
        "public_training_code": None,
        "public_training_data": training_data,
        "framework": ["Sentence Transformers", "PyTorch", "safetensors"],
        "reference": f"https://huggingface.co/{name}",
        "similarity_fn_name": similarity.get("similarity_fn_name") or "cosine",
        "use_instructions": False,
        "training_datasets": ["STSBenchmark"],
        "adapted_from": base_model,
        "modalities": ["text"],
        "model_type": ["dense"],
        "citation": citation,
    }


#: The pull request's steps once :func:`stage_submission` has laid out the folder (pushing is the user's).
PR_STEPS = (
    "Fork https://github.com/embeddings-benchmark/results on GitHub, then clone your fork:",
    "  git clone https://github.com/<you>/results mteb-results && cd mteb-results",
    "  git checkout -b {branch}",
    "Copy the staged folder into the clone's results/ (it adds {model_path}/{revision}/):",
    "  cp -r {staged}/results/{model_path} results/",
    "Commit and push to your fork:",
    "  git add results/{model_path} && git commit -m 'Add {model} results' && git push -u origin {branch}",
    "Open a pull request from that branch to embeddings-benchmark/results (main), e.g. with GitHub's CLI:",
    "  gh pr create --repo embeddings-benchmark/results --title 'Add {model} results'",
)


@dataclass(frozen=True)
class Submission:
    """A staged submission: the staging root (a ``mteb.ResultCache`` root), the model's folder name, its
    revision, the task files copied, the pull request's steps, and mteb's answer where
    :func:`submit_pull_request` opened the pull request (None: staged only)."""

    root: Path
    model: str
    revision: str
    tasks: list[str]
    steps: list[str]
    pull_request: Mapping[str, Any] | None = None


def stage_submission(mteb_dir: str | Path, meta: dict[str, Any], staging: str | Path) -> Submission:
    """Lay out rule ``mteb``'s results of one checkpoint (``mteb_dir``: its ``ResultCache`` root) as MTEB's
    results repository expects them, under ``staging``: ``results/<meta name, / as __>/<meta revision>/``
    holding each ``<Task>.json`` (read and written by mteb's ``TaskResult``) and ``model_meta.json``
    (``meta``, validated by mteb's ``ModelMeta`` first). ``staging`` is emptied first. A stand-in run
    (MTEB's rows from local files) is refused: the leaderboard holds scores on MTEB's own datasets."""
    import mteb
    from mteb.models import ModelMeta

    mteb_dir, staging = Path(mteb_dir), Path(staging)
    provenance = mteb_dir / "provenance.json"
    if not provenance.is_file():
        raise ValueError(f"{provenance} does not exist: {mteb_dir} is not rule mteb's finished folder")
    if json.loads(provenance.read_text()).get("data") != "hub":
        raise ValueError(
            f"{mteb_dir} scored MTEB's tasks on a {STANDIN} (mteb.data: standin), not MTEB's hub datasets; "
            "rerun the cell with --config 'mteb={data: hub}' to submit"
        )
    files = sorted(p for p in (mteb_dir / "results").glob("*/*/*.json") if p.name != "model_meta.json")
    if not files:
        raise ValueError(f"no MTEB task results under {mteb_dir / 'results'}")
    checked = ModelMeta.model_validate_json_resolved(json.dumps(meta))
    path = checked.model_name_as_path()
    folder = staging / "results" / path / str(checked.revision)
    if staging.exists():
        shutil.rmtree(staging)
    folder.mkdir(parents=True)
    tasks = []
    for file in files:
        result = mteb.TaskResult.from_disk(file)
        result.to_disk(folder / f"{result.task_name}.json")
        tasks.append(result.task_name)
    (folder / "model_meta.json").write_text(json.dumps(meta, indent=4) + "\n", encoding="utf-8")
    fields = dict(model=checked.name, model_path=path, revision=checked.revision, staged=staging.resolve())
    steps = [step.format(**fields, branch=f"add-{path}") for step in PR_STEPS]
    return Submission(staging, path, str(checked.revision), tasks, steps)


def submit_pull_request(submission: Submission, meta: Mapping[str, Any]) -> Mapping[str, Any]:
    """Open the pull request to embeddings-benchmark/results with mteb 2.26's own
    ``ResultCache(<staging root>).submit_results(models=[ModelMeta], tasks=<staged tasks>, create_pr=True)``,
    which commits the staged results on a branch of a clone and, with PyGithub and a GitHub token, opens it.
    ``meta``: the staged ``model_meta.json`` fields. Returns mteb's answer (``status``, ``pr_url``, ...)."""
    import mteb
    from mteb.models import ModelMeta

    checked = ModelMeta.model_validate_json_resolved(json.dumps(dict(meta)))
    cache = mteb.ResultCache(str(submission.root))
    return cache.submit_results(
        models=[checked],
        tasks=list(submission.tasks),
        create_pr=True,
        message=f"Add {checked.name} results",
    )
