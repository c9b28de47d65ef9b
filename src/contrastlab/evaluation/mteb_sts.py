"""MTEB's own evaluator on a sentence checkpoint: the seven English STS tasks through the ``mteb`` package,
and the further MTEB tasks or named benchmark a config chooses (:func:`selected_tasks`).

Nothing here re-implements MTEB: each task is ``mteb.get_task(name)``, the model is the checkpoint as a
``SentenceTransformer`` (:mod:`contrastlab.models.export`), the scores come from ``mteb.evaluate`` and
``mteb.ResultCache`` writes them in MTEB's results format, the folder a user submits.

Where the pairs come from (``data``):

- ``hub``: MTEB loads each task's dataset from the hub at the revision its metadata pins
  (:func:`task_pins`); the rows' sha256 and that revision go into the artifacts lock (:func:`record_pins`).
- ``standin`` (tests, the demo, no hub): MTEB-format datasets from local files that hold MTEB's rows
  (:func:`standin_pairs`), set on the task objects as ``AbsTask.load_data`` does; :func:`standin_check`
  compares them with MTEB's task metadata on every run (docs/bridge.md). Results on a stand-in are
  labelled so (``provenance.json``); submit only a ``hub`` run's.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from contrastlab import artifacts as artifacts_lock
from contrastlab.senteval import protocol as P
from contrastlab.senteval.tasks import SentEvalDataError, downstream_root

__all__ = [
    "MTEB_TASKS",
    "PairSet",
    "load_sentence_transformer",
    "record_pins",
    "run_mteb",
    "selected_tasks",
    "standin_check",
    "standin_pairs",
    "task_pins",
]

#: SentEval task name -> MTEB task name (``mteb.get_task``): the English STS tasks both run, under the
#: same names but SICK-R's.
MTEB_TASKS = MappingProxyType({**{task: task for task in P.STS_TASKS}, "SICKRelatedness": "SICK-R"})
#: MTEB's names of the seven tasks, in SentEval's order.
TASK_NAMES = tuple(MTEB_TASKS.values())
#: The split MTEB scores on every one of them (``metadata.eval_splits``).
MTEB_SPLIT = "test"
DATA_SOURCES = ("hub", "standin")


@dataclass(frozen=True)
class PairSet:
    """One MTEB STS dataset split: ``sentence1``, ``sentence2`` and the gold ``score`` (0-5)."""

    sentence1: list[str]
    sentence2: list[str]
    score: np.ndarray

    def to_dataset(self):
        """The split as MTEB reads it: a ``datasets.DatasetDict`` with one ``test`` split."""
        from datasets import Dataset, DatasetDict

        rows = {"sentence1": self.sentence1, "sentence2": self.sentence2, "score": self.score.tolist()}
        return DatasetDict({MTEB_SPLIT: Dataset.from_dict(rows)})

    def sha256(self) -> str:
        """Digest of the rows (canonical JSON of the three columns): the bytes the artifacts lock pins."""
        payload = json.dumps([self.sentence1, self.sentence2, self.score.tolist()], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _mteb():
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    import mteb

    return mteb


def selected_tasks(tasks: Sequence[str] | None = None, benchmark: str | None = None) -> list[Any]:
    """MTEB's task objects that rule ``mteb`` scores (config keys ``mteb.tasks`` / ``mteb.benchmark``):
    the seven STS tasks first (``mteb.get_task`` each, in SentEval's order: the bridge needs them), then
    those of ``tasks`` (``mteb.get_task`` each) or of the named ``benchmark`` (``mteb.get_benchmark``'s
    task objects, with the splits and subsets the benchmark chose) that are not among the seven, in their
    order. Neither given: the seven. Unknown names raise mteb's ``KeyError``; mteb reads all of this from
    its own task metadata, with no network."""
    mteb = _mteb()
    chosen = [mteb.get_task(name) for name in TASK_NAMES]
    if tasks is not None:
        extra = [mteb.get_task(name) for name in tasks]
    elif benchmark is not None:
        extra = list(mteb.get_benchmark(benchmark).tasks)
    else:
        extra = []
    for task in extra:
        if task.metadata.name not in {t.metadata.name for t in chosen}:
            chosen.append(task)
    return chosen


def task_pins(tasks=TASK_NAMES) -> dict[str, dict[str, str]]:
    """``{mteb task: {"path": hub dataset, "revision": commit}}`` as MTEB's task metadata pins them."""
    mteb = _mteb()
    return {name: dict(mteb.get_task(name).metadata.dataset) for name in tasks}


# --- the stand-in: local files that hold MTEB's rows -------------------------------------------------


def _sts_file_rows(root: Path, task: str) -> PairSet:
    """STS12-16 as MTEB's copy has them: SentEval's STS files, each row's two tab fields exactly as in
    the file (MTEB's character totals equal them; SentEval re-joins whitespace tokens instead), rows
    whose gold score is empty dropped, the sub-datasets concatenated in SentEval's order."""
    kept = []
    for name in P.STS_SUBSETS[task]:
        folder = root / P.STS_DIRS[task]
        rows = (folder / f"STS.input.{name}.txt").read_text(encoding="utf-8").splitlines()
        scores = (folder / f"STS.gs.{name}.txt").read_text(encoding="utf-8").splitlines()
        kept += [
            (row.split("\t"), float(score)) for row, score in zip(rows, scores, strict=True) if score != ""
        ]
    return PairSet([f[0] for f, _ in kept], [f[1] for f, _ in kept], np.array([g for _, g in kept]))


def _split_rows(paths: list[Path], cols: tuple[int, int, int], header: bool) -> PairSet:
    """The rows of tab-separated ``paths`` concatenated (each one's header row dropped): columns ``cols``."""
    skip = 1 if header else 0
    fields = [
        line.split("\t") for path in paths for line in path.read_text(encoding="utf-8").splitlines()[skip:]
    ]
    a, b = [f[cols[0]] for f in fields], [f[cols[1]] for f in fields]
    return PairSet(a, b, np.array([float(f[cols[2]]) for f in fields]))


def standin_pairs(senteval_dir: str | Path, stsb_dir: str | Path | None = None) -> dict[str, PairSet]:
    """MTEB-format pairs of the seven tasks from local files, keyed by MTEB task name.

    - STS12-16: the SentEval tree's STS files (:func:`_sts_file_rows`): MTEB's copies are SentEval's
      tokenised, lowercased text, same pairs (3108, 1500 without SMT, 3750, 3000, 1186).
    - STSBenchmark: ``sts-test.csv`` of ``stsb_dir`` (the original, untokenised, mixed-case release, which
      MTEB's copy equals), or the SentEval copy's when ``stsb_dir`` is None (a generated fixture).
    - SICK-R: MTEB scores all 9,927 SICK pairs, so train, trial and test concatenated.
    """
    root = downstream_root(senteval_dir)
    out = {MTEB_TASKS[t]: _sts_file_rows(root, t) for t in P.STS_SUBSETS}
    stsb = Path(stsb_dir) / "sts-test.csv" if stsb_dir else root / P.SPLIT_FILES["STSBenchmark"]["test"]
    if not stsb.is_file():
        raise SentEvalDataError(
            f"missing STS-B test file {stsb} (mteb.stsb_dir names the folder holding sts-test.csv)"
        )
    out["STSBenchmark"] = _split_rows([stsb], (5, 6, 4), header=False)
    sick = [root / P.SPLIT_FILES["SICKRelatedness"][split] for split in ("train", "dev", "test")]
    out["SICK-R"] = _split_rows(sick, (1, 2, 3), header=True)
    return out


def pair_statistics(pairs: PairSet) -> dict[str, Any]:
    """The descriptive statistics MTEB stores per task (``task.metadata.descriptive_stats``), for ours."""
    return {
        "num_samples": len(pairs.score),
        "text1_characters": sum(map(len, pairs.sentence1)),
        "text2_characters": sum(map(len, pairs.sentence2)),
        "text1_unique": len(set(pairs.sentence1)),
        "text2_unique": len(set(pairs.sentence2)),
        "avg_score": float(np.mean(pairs.score)) if len(pairs.score) else float("nan"),
    }


def _mteb_statistics(task_name: str) -> dict[str, Any] | None:
    stats = (_mteb().get_task(task_name).metadata.descriptive_stats or {}).get(MTEB_SPLIT)
    if not stats:
        return None
    t1, t2 = stats["text1_statistics"], stats["text2_statistics"]
    return {
        "num_samples": stats["num_samples"],
        "text1_characters": t1["total_text_length"],
        "text2_characters": t2["total_text_length"],
        "text1_unique": t1["unique_texts"],
        "text2_unique": t2["unique_texts"],
        "avg_score": stats["label_statistics"]["avg_score"],
    }


def standin_check(pairs: Mapping[str, PairSet]) -> dict[str, dict[str, Any]]:
    """Per task, our rows' statistics beside MTEB's (its task metadata's ``descriptive_stats``) and how
    they compare: ``exact`` (every statistic equal; the gold mean to 1e-9), ``same pairs`` (counts and
    gold mean equal, character totals not), or ``different``."""
    out = {}
    for name, rows in pairs.items():
        ours, theirs = pair_statistics(rows), _mteb_statistics(name)
        if theirs is None:
            verdict = "no MTEB statistics"
        else:
            counts = all(ours[k] == theirs[k] for k in ("num_samples", "text1_unique", "text2_unique"))
            counts = counts and abs(ours["avg_score"] - theirs["avg_score"]) < 1e-9
            chars = all(ours[k] == theirs[k] for k in ("text1_characters", "text2_characters"))
            verdict = "exact" if counts and chars else "same pairs" if counts else "different"
        out[name] = {"ours": ours, "mteb": theirs, "match": verdict}
    return out


def record_pins(
    lock_file: str | Path, pairs: Mapping[str, PairSet], pins: Mapping[str, Mapping[str, str]]
) -> None:
    """Pin each hub dataset MTEB loaded in the artifacts lock's ``data`` section, keyed
    ``<hub path>@<split>``: the revision MTEB's metadata asked for and the sha256 of the rows
    (:meth:`PairSet.sha256`). A pinned entry whose rows now differ raises ``LockMismatch``."""
    for name, rows in pairs.items():
        pin = pins[name]
        key = f"{pin['path']}@{MTEB_SPLIT}"
        digest = rows.sha256()
        pinned = artifacts_lock.entry(lock_file, "data", key)
        if pinned is not None and pinned.get("sha256") != digest:
            raise artifacts_lock.mismatch(lock_file, "data", key, "sha256", pinned["sha256"], digest)
        if pinned is None:
            size = len(json.dumps([rows.sentence1, rows.sentence2, rows.score.tolist()]))
            url = f"https://huggingface.co/datasets/{pin['path']}"
            value = {"sha256": digest, "bytes": size, "url": url, "revision": pin["revision"]}
            artifacts_lock.record(lock_file, "data", key, value)


def hub_pairs(task_name: str) -> PairSet:
    """The test split MTEB loads for ``task_name`` (from the hub at its pinned revision; network)."""
    task = _mteb().get_task(task_name)
    task.load_data()
    split = task.dataset[MTEB_SPLIT]
    return PairSet(
        list(split["sentence1"]), list(split["sentence2"]), np.asarray(split["score"], dtype=float)
    )


# --- running MTEB ---------------------------------------------------------------------------------


def load_sentence_transformer(model_dir: str | Path, *, device: str | None = None, name: str | None = None):
    """The checkpoint as a ``SentenceTransformer`` (its exported modules), named ``name`` in MTEB's
    results (``model_card_data.model_name``; MTEB's folder ``results/<name with / as __>/...``)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device=device or "cpu")
    if name:
        model.model_card_data.model_name = name
    return model


def run_mteb(
    model: Any,
    pairs: Mapping[str, PairSet] | None,
    out_dir: str | Path,
    *,
    tasks: Sequence[Any] = TASK_NAMES,
    batch_size: int = 64,
    overwrite: str = "always",
    meta: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, float]]:
    """Run MTEB's ``tasks`` (names for ``mteb.get_task``, or task objects: :func:`selected_tasks`) on
    ``model`` (a ``SentenceTransformer``) with ``mteb.evaluate``, its results written by
    ``mteb.ResultCache(out_dir)`` in MTEB's format. ``pairs`` (MTEB task -> :class:`PairSet`) replaces the
    hub dataset of each task it names (the stand-in); a task it does not name, or None, loads the hub's.
    Returns, per task, MTEB's scores as fractions (MTEB's scale; :func:`_test_scores`).
    ``overwrite``: MTEB's ``overwrite_strategy`` (``only-missing`` keeps the tasks already in ``out_dir``;
    their scores come back as MTEB stored them, rounded to 1e-5, where a fresh run's are not).
    ``meta``: the checkpoint's ``ModelMeta`` fields (``contrastlab.hub.publish.checkpoint_meta``: licence,
    parameters, release date, revision), which MTEB then writes as the results' ``model_meta.json`` and
    whose revision names their folder; None: what MTEB reads off the model (no licence, no revision)."""
    mteb = _mteb()
    if meta is not None:
        from mteb.models import ModelMeta, SentenceTransformerEncoderWrapper

        model = SentenceTransformerEncoderWrapper(model)
        model.mteb_model_meta = ModelMeta.model_validate_json_resolved(json.dumps(dict(meta)))
    task_objects = []
    for name_or_task in tasks:
        task = mteb.get_task(name_or_task) if isinstance(name_or_task, str) else name_or_task
        name = task.metadata.name
        if pairs is not None and name in pairs:
            task.dataset = pairs[name].to_dataset()
            task.data_loaded = True  # what load_data sets once it has the dataset: it loads nothing now
        task_objects.append(task)
    result = mteb.evaluate(
        model,
        task_objects,
        cache=mteb.ResultCache(str(out_dir)),
        overwrite_strategy=overwrite,
        encode_kwargs={"batch_size": batch_size},
        show_progress_bar=False,
    )
    return {task_result.task_name: _test_scores(task_result) for task_result in result.task_results}


def _test_scores(task_result: Any) -> dict[str, float]:
    """The default subset's test-split scores of one ``mteb.TaskResult`` (``cosine_spearman``,
    ``main_score``, ...; every STS task has exactly one such entry), else its ``main_score`` as mteb
    averages it over the splits and subsets it scored (``TaskResult.get_score``)."""
    rows = task_result.scores.get(MTEB_SPLIT, [])
    entries = [row for row in rows if row.get("hf_subset", "default") == "default"]
    if len(entries) != 1:
        return {"main_score": float(task_result.get_score())}
    return {k: float(v) for k, v in entries[0].items() if isinstance(v, float)}


def encoder_of(model: Any, batch_size: int = 64) -> Callable[[list[str]], np.ndarray]:
    """``encode(list[str]) -> [n, d]`` of a ``SentenceTransformer`` (raw vectors, as it returns them)."""

    def encode(sentences: list[str]) -> np.ndarray:
        return np.asarray(
            model.encode(sentences, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
        )

    return encode
