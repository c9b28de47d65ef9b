"""Model cards: a Hugging Face ``README.md`` for a kept checkpoint, sentence and image, written when asked.

A card is written from the cell's finished files (checkpoint, metrics, data markers, MTEB's results) into
``<results_dir>/cards/<experiment>/<backbone>/<method>/seed<seed>/README.md`` by ``make publish`` for the
cell it publishes and by ``make cards`` for every finished cell (:func:`write_card`, :func:`write_cards`);
no workflow job writes one. A sentence card's front matter is huggingface_hub's ``ModelCardData``, with
the checkpoint's MTEB ``ModelMeta`` beside it (``mteb_model_meta.json``). Everything comes from the files
given; nothing is typed by hand and nothing depends on the time it is written.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from safetensors import SafetensorError

from contrastlab.blocks import escape_markdown, literals_of
from contrastlab.config import settings_digest
from contrastlab.hub.mteb_results import STANDIN, MtebScore, checkpoint_revision, mteb_scores
from contrastlab.hub.publish import (
    MODEL_META_FILE,
    CellFiles,
    PublishError,
    backbone_license,
    base_model_id,
    card_data,
    checkpoint_meta,
    citation_of,
    eval_results,
    front_matter,
    paper_tags_of,
    senteval_fixture,
    snakemake_command,
    training_corpus,
)
from contrastlab.hub.vision_card import VISION_LICENSE, vision_front_matter
from contrastlab.losses import catalog
from contrastlab.losses.catalog import LOSS_MODULES
from contrastlab.papers import paper_for, reference
from contrastlab.paths import SCORE_KEYS, UnreadableMetricsError, read_metrics, write_json, write_text
from contrastlab.tables.published import TABLES, load_meta, load_published, sweep_point_names

__all__ = [
    "TRAINING_KEYS",
    "loss_equation",
    "model_card",
    "published_scores",
    "vision_model_card",
    "write_card",
    "write_cards",
    "write_model_card",
]

#: The training settings a card lists (the rest are in the checkpoint's ``train_summary.json`` or, for an
#: image encoder, its ``settings.json``).
TRAINING_KEYS = tuple(
    "protocol lr batch_size max_length epochs max_steps dropout head_autocast grad_accum dev_task "
    "dev_pooling eval_every seed arch stem width image_size input_size optimizer lr_schedule weight_decay "
    "oar_fraction oar_weight".split()
)


def published_scores(
    experiment: str, backbone: str, method: str, settings: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The published scores of one cell in the experiment's score tables: table, reference, task, value.
    A sweep point of a table printing the best over its sweep (OAR Table 3's rates; the point's rate is
    ``settings``'s or the paper's) has its method's, as the tables put them beside it."""
    rows = []
    for name, spec in TABLES.items():
        if spec.experiment != experiment or spec.kind != "scores":
            continue
        meta = load_meta(name)
        paper = meta.get("paper", {})
        row, table = method, f"{paper.get('table', name)} ({name})"
        if best := meta["layout"].get("best_over_sweep"):
            own = [settings[best["label"]]] if best["label"] in (settings or {}) else []
            if point := sweep_point_names([method], best["label"], [*best["values"], *own]).get(method):
                row, table = point[0], f"{table}: the best over the paper's {best['label']} sweep"
        frame = load_published(name)
        # the cell's rows where the paper prints a number (NaN: "-")
        hits = frame[(frame["backbone"] == backbone) & (frame["method"] == row) & frame["value"].notna()]
        rows += [
            {"table": table, "reference": paper.get("reference", ""), "task": task, "value": float(value)}
            for task, value in zip(hits["key"], hits["value"], strict=True)
        ]
    return rows


def _papers(experiment: str) -> list[str]:
    seen: dict[str, list[str]] = {}  # each paper once, with its tables (or figures)
    for name, spec in TABLES.items():
        if spec.experiment == experiment and spec.kind == "scores":
            paper = load_meta(name).get("paper", {})
            ref = str(paper.get("reference", name)).rstrip(".")
            seen[ref] = [*seen.get(ref, []), paper.get("table", name)]
    if not seen and (paper := paper_for(experiment)):  # its paper's figures that read it, where no table does
        figures = [f for f in paper.figures.values() if experiment in f.experiments]
        shown = [m[0] for f in figures if (m := re.search(r"Fig\. [^:]+", f.caption))]
        seen = {reference(paper).rstrip("."): shown} if shown else {}
    return [f"{ref}, {_and_listed(names)}" for ref, names in seen.items()]


def _and_listed(names: list[str]) -> str:
    """``names``, each once, as "A", "A and B" or "A, B and C"."""
    *first, last = dict.fromkeys(names)
    return f"{', '.join(first)} and {last}" if first else last


def _number(value: Any) -> str:
    return "–" if value is None else f"{float(value):.2f}"


def model_card(
    *,
    experiment: str,
    backbone: str,
    method: str,
    seed: int,
    summary: Mapping[str, Any],
    metrics: Mapping[str, Any],
    data: Mapping[str, Any],
    base_model: str | None = None,
    license: tuple[str, str] | None = None,
    datasets: Sequence[str] = (),
    corpus_url: str | None = None,
    senteval_url: str | None = None,
    mteb: Sequence[MtebScore] = (),
) -> str:
    """The card's text: YAML front matter (huggingface_hub's ``ModelCardData``, :func:`~.publish.card_data`)
    and Markdown, from the checkpoint's ``train_summary.json`` (``summary``), its ``senteval.json``
    (``metrics``), the run's data markers (``data``), the backbone's ``(license, source)`` (``license``;
    None: unknown), the corpus's hub ids and URL (``datasets``, ``corpus_url``), MTEB's scores (``mteb``)."""
    settings = summary.get("settings", {})
    loss = settings.get("loss", method).rpartition(":")[2]  # a user loss's callable, not its file path
    published = published_scores(experiment, backbone, method, settings)
    papers = _papers(experiment)
    licence, licence_source = license or ("unknown", "not established")
    spearman = _number(summary.get("best_dev_spearman"))
    kept = f"kept step {summary.get('best_step')} (STS-B dev Spearman {spearman})"
    cell = dict(experiment=experiment, backbone=backbone, method=method, seed=seed)
    provenance = _card_provenance(cell, papers, loss, summary)
    front = card_data(
        model_name=f"contrastlab-{experiment}-{backbone}-{method}-seed{seed}",
        license=licence,
        base_model=base_model,
        datasets=datasets,
        tags=[*SENTENCE_TAGS, loss, *paper_tags_of(experiment)],
        results=eval_results(metrics, data, senteval_url=senteval_url, mteb=mteb),
        provenance=provenance,
    )
    body = [
        *_heading(experiment, backbone, method, seed, papers, "A sentence encoder", SENTENCE_KEPT),
        *_sentence_usage(metrics.get("pooling", "cls")),
        *_training(
            summary, loss, kept, ("", "Every setting is in the checkpoint's `train_summary.json`.", "")
        ),
        *_evaluation(
            SENTENCE_PROTOCOL.format(mode=metrics.get("mode"), probe=metrics.get("probe"))
            + (FIXTURE if senteval_fixture(data) else ""),
            metrics,
            published,
        ),
        *_mteb_rows(mteb),
        *_provenance(summary.get("meta", {}), data, corpus_url)[:-1],  # its list, ours, the blank line
        f"- Settings digest: `{provenance['settings_digest']}` (of `train_summary.json`'s settings)",
        f"- Licence: `{licence}`, the backbone's ({licence_source})",
        "",
        *PUBLISHING,
        *_citation(experiment),
    ]
    names = literals_of(cell, base_model, licence, list(datasets), list(data))
    return "\n".join([front_matter(front), "", *_as_markdown(body, names)])


def _as_markdown(lines: list[str], names) -> list[str]:
    """The card's Markdown ``lines`` with each of ``names`` (the cell's, the data's: text from the config
    and its files) escaped outside fenced code (:func:`~contrastlab.blocks.escape_markdown`), so
    that a reader shows the name as it reads."""
    out, fenced = [], False
    for line in lines:
        fenced ^= line.startswith("```")
        out.append(line if fenced or line.startswith("```") else escape_markdown(line, names))
    return out


def _card_provenance(
    cell: Mapping[str, Any], papers: list[str], loss: str, summary: Mapping[str, Any]
) -> dict[str, Any]:
    """The reproduction's provenance in the card's front matter (under ``contrastlab``): the cell, the
    papers, the loss and its hyperparameters, the settings' digest and the commit."""
    settings = summary.get("settings", {})
    return {
        **cell,
        "papers": papers,
        "loss": loss,
        "loss_hp": dict(settings.get("loss_hp", {})),
        "settings_digest": settings_digest(settings),
        "commit": summary.get("meta", {}).get("git_sha"),
        "uncommitted_changes": summary.get("meta", {}).get("git_dirty"),
    }


#: A sentence card's tags (and the loss's name).
SENTENCE_TAGS = ("sentence-transformers", "feature-extraction", "sentence-similarity", "contrastive-learning")
#: What a sentence card's checkpoint is.
SENTENCE_KEPT = "The best STS-B dev checkpoint of the run, unmodified."
#: What a sentence card's scores are.
SENTENCE_PROTOCOL = (
    "SentEval protocol as SimCSE runs it (mode `{mode}`, probe `{probe}`): STS Spearman × 100, transfer "
    "test accuracy per task and `tr_avg` (their mean; `tr_devacc_avg`: the mean dev accuracy Nie et al. "
    "print as TR.Avg). Published: the paper's number for this backbone and method, where it has one."
)
#: What a sentence card's scores are on the demo's generated SentEval data.
FIXTURE = " Scored on contrastlab's generated SentEval fixture, not the published tasks' data."
#: How a sentence checkpoint is published: the card's last section but the citation.
PUBLISHING = (
    "## Publishing",
    "",
    "The checkpoint folder is the complete sentence-transformers model. contrastlab's",
    "`make publish CELL=<cell> REPO=<user>/<repo>` lists what one commit uploads (the folder's files, this",
    "card as README.md, MTEB's ModelMeta) and makes that commit with `PUSH=1` (huggingface_hub's",
    "`HfApi.create_commit`); `make mteb-submit CELL=<cell>` stages MTEB's results for the leaderboard.",
    "",
)


def _citation(experiment: str) -> list[str]:
    """The card's last section: the BibTeX of the paper the experiment reproduces (:func:`citation_of`)."""
    return ["## Citation", "", "```bibtex", citation_of(experiment), "```", ""]


def _heading(
    experiment: str, backbone: str, method: str, seed: int, papers: list[str], what: str, kept: str
) -> list[str]:
    """The card's title and what it is: ``what`` trained to reproduce the papers' tables, ``kept``."""
    reproduces = "; ".join(papers) if papers else f"the experiment `{experiment}` (no published table)"
    return [
        f"# {experiment} / {backbone} / {method} / seed {seed}",
        "",
        f"{what} trained by contrastlab to reproduce {reproduces}. {kept}",
        "",
    ]


def _sentence_usage(pooling: str) -> list[str]:
    """How sentence-transformers loads the checkpoint, and the pooling our evaluation scored."""
    return [
        "## Usage",
        "",
        "```python",
        "from sentence_transformers import SentenceTransformer",
        "",
        'model = SentenceTransformer("<this folder or repo>")',
        'embeddings = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])',
        "```",
        "",
        f"Pooling `{pooling}` as our evaluation scored it (contrastlab's name; `cls` is the last layer's "
        "[CLS] before BERT's pooler), no normalisation: the vectors equal those the SentEval evaluation "
        "scored (to 1e-5). Compare them by cosine similarity.",
        "",
    ]


#: A Training line of a cell trained with OAR's anchor term (``oar_fraction`` > 0) beside its loss.
OAR_TERM = "- Plus the Orthonormal Anchor Regression loss (OAR §4) on `oar_fraction`'s labels"


def loss_equation(loss: str) -> str | None:
    """What the built-in ``loss`` computes, as its function's docstring in ``contrastlab.losses`` says (read
    from the source: no torch): the line beginning "Implements", else the first; each reference ``[k]`` by
    the title the module's docstring lists; None for a loss of the user's. Its function is named as the
    loss, underscores aside (infonce: ``info_nce``)."""
    if loss not in LOSS_MODULES:
        return None
    tree = ast.parse(Path(catalog.__file__).with_name(f"{LOSS_MODULES[loss]}.py").read_text())
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    function = next(f for f in functions if f.name.replace("_", "") == loss.replace("_", ""))
    lines = (ast.get_docstring(function) or "").splitlines() or [""]
    line = next((text for text in lines if text.startswith("Implements")), lines[0])
    titles = dict(re.findall(r'^\[(\d+)\][^"\n]*"([^"]+?)\.?"', ast.get_docstring(tree) or "", re.M))
    line = re.sub(r"\[(\d+)\]", lambda ref: f"“{' '.join(titles.get(ref[1], ref[0]).split())}”", line)
    return f"`contrastlab.losses.{LOSS_MODULES[loss]}.{function.name}`: {line}" if line else None


def _training(summary: Mapping[str, Any], loss: str, steps: str, after: Sequence[str]) -> list[str]:
    """The loss (and what its code says it implements), precision and device, the steps and ``steps``
    (what was kept, or the dataset), the training settings a card lists, then ``after``."""
    settings = summary.get("settings", {})
    equation = loss_equation(loss)
    return [
        "## Training",
        "",
        f"- Loss: `{loss}` with hyperparameters `{json.dumps(settings.get('loss_hp', {}), sort_keys=True)}`",
        *([f"- Code: {equation}"] if equation else []),
        f"- Precision: `{summary.get('precision', settings.get('precision'))}`; "
        f"device: {summary.get('device_name', '?')}",
        f"- Steps: {summary.get('steps')}; {steps}",
        *([OAR_TERM] if settings.get("oar_fraction") else []),
        *(f"- `{key}`: `{settings[key]}`" for key in TRAINING_KEYS if key in settings),
        *after,
    ]


def _evaluation(protocol: str, metrics: Mapping[str, Any], published: list[dict[str, Any]]) -> list[str]:
    """What ``protocol`` measured, each score with the published number beside it, and where those are
    from."""
    ours = {**metrics.get("scores", {}), **{key: metrics.get(key) for key in SCORE_KEYS}}
    paper = {row["task"]: row["value"] for row in published}
    lines = ["## Evaluation", "", protocol, "", "| task | ours | published | Δ |", "|---|---:|---:|---:|"]
    for task, value in ours.items():
        if value is None:
            continue
        theirs = paper.get(task)
        delta = f"{value - theirs:+.2f}" if theirs is not None else "–"
        lines.append(f"| {task} | {_number(value)} | {_number(theirs)} | {delta} |")
    tables = "; ".join(sorted({row["table"] for row in published}))
    return [*lines, "", *([f"Published numbers from {tables}.", ""] if published else [])]


def _mteb_rows(mteb: Sequence[MtebScore]) -> list[str]:
    """MTEB's scores as its results folder holds them (its evaluator, the dataset revision it read), × 100;
    a stand-in's (rows from local files) say "local stand-in" where a hub run names MTEB's datasets."""
    if not mteb:
        return []
    standin = any(score.standin for score in mteb)
    where = (
        f"on a {STANDIN}: MTEB's rows rebuilt from local files, not MTEB's hub datasets"
        if standin
        else "on the datasets and revisions it read"
    )
    lines = [
        f"MTEB's own evaluator (`mteb`), {where} (main score × 100; the model-index holds both protocols):",
        "",
        "| MTEB task | split | subset | metric | score | dataset revision |",
        "|---|---|---|---|---:|---|",
    ]
    for score in mteb:
        revision = STANDIN if score.standin else f"`{score.revision}`"
        lines.append(
            f"| {score.task} | {score.split} | {score.subset} | {score.metric} | {100 * score.value:.2f} "
            f"| {revision} |"
        )
    return [*lines, ""]


def _backbone_line(record: Mapping[str, Any] | None) -> list[str]:
    """The base model as it was fetched: hub repository and commit, package and version, or a folder."""
    if not record:
        return []
    weights = ", ".join(
        f"{name} sha256 `{digest}`" for name, digest in sorted(record.get("weights_sha256", {}).items())
    )
    if record.get("source") == "hf_id":
        what = f"`{record['hf_id']}` at commit `{record['revision']}`"
    elif record.get("source") == "package":
        what = f"package `{record.get('package')}` ({record.get('version')})"
    elif record.get("source") == "path":
        what = f"local folder `{record.get('path')}`" + (
            f" (a copy of `{record['hf_id']}`)" if record.get("hf_id") else ""
        )
    else:
        what = f"random initialisation `{json.dumps(record.get('random', {}), sort_keys=True)}`"
    return [f"- Backbone: {what}" + (f"; {weights}" if weights else "")]


def _provenance(meta: Mapping[str, Any], data: Mapping[str, Any], corpus_url: str | None = None) -> list[str]:
    return [
        "## Provenance",
        "",
        f"- Commit: `{meta.get('git_sha')}`{' (uncommitted changes)' if meta.get('git_dirty') else ''}",
        *_backbone_line(meta.get("inputs", {}).get("backbone")),
        f"- Packages: {', '.join(f'{k} {v}' for k, v in sorted(meta.get('versions', {}).items()))}",
        *(f"- Data `{name}`: `{json.dumps(value, sort_keys=True)}`" for name, value in sorted(data.items())),
        *([f"- Corpus: downloaded from `{corpus_url}`"] if corpus_url else []),
        "",
    ]


def vision_model_card(
    *,
    experiment: str,
    backbone: str,
    method: str,
    seed: int,
    summary: Mapping[str, Any] | None,
    metrics: Mapping[str, Any],
    data: Mapping[str, Any],
    torchvision_spec: Mapping[str, Any] | None = None,
) -> str:
    """The card of an image encoder: front matter (``library_name: pytorch``), how plain torchvision
    loads it (``torchvision.json``, :func:`contrastlab.models.export.write_torchvision_spec`), the loss,
    training settings and precision, the linear/kNN/FFN scores with the published number beside them,
    the provenance. ``summary`` is the encoder's ``settings.json`` (None for a sweep point whose
    training diverged: ``metrics["encoder_diverged"]`` says why)."""
    summary = summary or {}
    settings = summary.get("settings", {})
    loss = settings.get("loss", method).rpartition(":")[2]  # a user loss's callable, not its file path
    published = published_scores(experiment, backbone, method, settings)
    papers = _papers(experiment)
    name = f"contrastlab-{experiment}-{backbone}-{method}-seed{seed}"
    tags = (["oar"] if settings.get("oar_fraction") else []) + paper_tags_of(experiment)
    front = vision_front_matter(model_name=name, loss=loss, metrics=metrics, tags=tags)
    names = literals_of([experiment, backbone, method], list(data))
    lines = [*_heading(experiment, backbone, method, seed, papers, "An image encoder", VISION_KEPT)]
    if metrics.get("encoder_diverged"):
        lines += [
            "## Training diverged",
            "",
            f"This sweep point's training diverged ({metrics['encoder_diverged']}): there is no encoder "
            "and no score, and the tables and the rate figure show it as diverged.",
            "",
        ]
        meta = {}
    else:
        meta = summary.get("meta", {})
        lines += [
            *_vision_usage(torchvision_spec or {}, settings),
            *_training(
                summary,
                loss,
                f"dataset `{settings.get('dataset')}`",
                [f"- Licence: `{VISION_LICENSE[0]}`, {VISION_LICENSE[1]}", ""],
            ),
            *_evaluation(
                f"Frozen features, probes `{', '.join(metrics.get('probes', []))}` on the test split "
                f"({metrics.get('n_test', '?')} images), accuracy in percent (top-1, top-5 where named); "
                "`embedding_variance` and `effective_rank_95` are the features' geometry, no accuracy; "
                "published: the paper's number for this backbone and method, where its table has one.",
                metrics,
                published,
            ),
        ]
    body = [*lines, *_provenance(meta, data), *_citation(experiment)]
    return "\n".join([front, "", *_as_markdown(body, names)])


#: What an image card's encoder is.
VISION_KEPT = "The encoder as training kept it (its `keep` setting), without the training's projection head."


def _vision_usage(spec: Mapping[str, Any], settings: Mapping[str, Any]) -> list[str]:
    """How plain torchvision loads the encoder (its ``torchvision.json``), or that contrastlab must."""
    if spec.get("torchvision"):
        usage = (
            f"A torchvision `{spec.get('arch')}` loads `{spec.get('weights')}` as `torchvision.json` "
            f"describes (stem `{spec.get('stem')}`, width {spec.get('width')}, output "
            f"{spec.get('out_dim') or 'the pooled features'}); the snippets are in contrastlab's "
            "`docs/encoders.md`."
        )
        return ["## Usage", "", usage, ""]
    width = spec.get("width", settings.get("width"))
    return [
        "## Usage",
        "",
        f"No stock torchvision model has this shape (width {width}); contrastlab loads it (the encoder in "
        "eval mode and its `settings.json`):",
        "",
        "```python",
        "from contrastlab.training.vision import load_encoder",
        "",
        'encoder, summary = load_encoder("<this folder>")',
        "```",
        "",
    ]


def write_model_card(
    out: str | Path,
    *,
    experiment: str,
    backbone: str,
    method: str,
    seed: int,
    model_dir: str | Path,
    metrics_path: str | Path,
    markers: Mapping[str, str | Path],
    backbones: Mapping[str, Mapping[str, Any]] | None = None,
    data_config: Mapping[str, Any] | None = None,
    mteb_dir: str | Path | None = None,
) -> Path:
    """Read the checkpoint's summary, the metrics and the data markers; write the card to ``out`` (an image
    encoder's, :func:`vision_model_card`, for an ``encoder`` folder). A sentence card also gets the backbone's
    licence and hub id, the corpus's dataset id, MTEB's scores from ``mteb_dir`` where it exists, and beside
    it the checkpoint's MTEB ``ModelMeta`` (:data:`~.publish.MODEL_META_FILE`)."""
    metrics = read_metrics(metrics_path)
    data = {name: json.loads(Path(path).read_text()) for name, path in markers.items()}
    model_dir = Path(model_dir)
    cell = dict(experiment=experiment, backbone=backbone, method=method, seed=seed)
    if model_dir.name == "encoder":  # settings.json, torchvision.json: None where absent (a diverged point)
        summary, spec = (
            json.loads((model_dir / name).read_text()) if (model_dir / name).exists() else None
            for name in ("settings.json", "torchvision.json")
        )
        text = vision_model_card(**cell, summary=summary, metrics=metrics, data=data, torchvision_spec=spec)
        return write_text(out, text)
    summary = json.loads((model_dir / "train_summary.json").read_text())
    backbones = backbones or {}
    licence = backbone_license(backbone, backbones) if backbone in backbones else None
    base_model = base_model_id(backbone, backbones) if backbone in backbones else None
    datasets, corpus_url = training_corpus(data_config)
    text = model_card(
        **cell,
        summary=summary,
        metrics=metrics,
        data=data,
        base_model=base_model,
        license=licence,
        datasets=datasets,
        corpus_url=corpus_url,
        senteval_url=(data_config or {}).get("senteval_url"),
        mteb=mteb_scores(mteb_dir),
    )
    if (model_dir / "config.json").is_file():  # else a summary without weights (tests): nothing to describe
        # described first: weights that cannot be read leave no card behind
        meta = checkpoint_meta(model_dir, **cell, backbones=backbones, data_config=data_config)
        write_json(Path(out).with_name(MODEL_META_FILE), meta)
    return write_text(out, text)


def write_card(found: CellFiles, configfile: str | Path) -> Path:
    """Write the card of the finished cell ``found`` (:func:`write_model_card`) where it goes, over any
    earlier one; return its path. A :class:`~contrastlab.hub.publish.PublishError` names the fix (a
    ``snakemake`` command on ``configfile``) where the checkpoint or metrics are missing, the weights
    cannot be read, or an earlier card no older than the metrics recorded other weights (their sha256):
    they changed since, and its scores are not theirs. A card older than the metrics is written again."""
    if not (found.model_dir.is_dir() and found.metrics.is_file()):
        raise PublishError(
            f"{found.model_dir if not found.model_dir.is_dir() else found.metrics} does not exist: the cell "
            f"is not trained and evaluated yet; run `{snakemake_command(configfile, found.metrics)}` first"
        )
    retrain = "retrain the cell: " + snakemake_command(configfile, found.metrics, "--forcerun", "train")
    described = found.card.with_name(MODEL_META_FILE)
    try:
        if described.is_file() and described.stat().st_mtime >= found.metrics.stat().st_mtime:
            recorded = json.loads(described.read_text()).get("revision")  # none recorded: nothing to check
            actual = checkpoint_revision(found.model_dir) if recorded else None
            if actual != recorded:
                weights = sorted(found.model_dir.rglob("*.safetensors"))
                named = weights[0] if len(weights) == 1 else f"the weights in {found.model_dir}"
                raise PublishError(
                    f"{named} no longer matches the card: its sha256 is {actual[:16]}…, {described} "
                    f"recorded {recorded[:16]}… when the card was written; {retrain}"
                )
        return write_model_card(
            found.card,
            **found.fields,
            model_dir=found.model_dir,
            metrics_path=found.metrics,
            markers=found.markers,
            backbones=found.backbones,
            data_config=found.data if found.track == "sentence" else None,
            mteb_dir=found.mteb_dir,
        )
    except PublishError:
        raise
    except UnreadableMetricsError as error:  # it names the file and its own fix
        raise PublishError(str(error)) from None
    except (OSError, ValueError, SafetensorError) as error:  # weights cut short, a file missing or broken
        message = " ".join(str(error).split())
        # weights whose header names more bytes than the file holds, or none at all
        weights = isinstance(error, SafetensorError) or not any(found.model_dir.rglob("*.safetensors"))
        fix = retrain if weights else "restore the file it names, then run this again"
        raise PublishError(
            f"{found.cell.path}: its card could not be written ({type(error).__name__}: {message}); {fix}"
        ) from None


def write_cards(cells: Mapping[str, CellFiles], configfile: str | Path) -> tuple[list[Path], list[str]]:
    """``make cards``: the card of every finished cell of ``cells`` (:func:`write_card`), sentence and
    image; returns the cards written and one line for each finished cell whose card was refused. A cell
    not trained and evaluated yet is passed over."""
    written, refused = [], []
    for found in cells.values():
        if not (found.model_dir.is_dir() and found.metrics.is_file()):
            continue
        try:
            written.append(write_card(found, configfile))
        except PublishError as error:
            refused.append(str(error))
    return written, refused
