"""The bridge from the SentEval protocol to MTEB on one checkpoint: where each point of difference comes from.

For each STS task the checkpoint is scored in a chain of settings from the SentEval protocol (protocol.md
§4, :func:`contrastlab.evaluation.senteval.score_sts`: cosine Spearman on SentEval's tokenised text,
STS12-16 pooled, STS-B and SICK-R on their test split) to MTEB's own score
(:func:`contrastlab.evaluation.mteb_sts.run_mteb`), one change per step (:data:`STEPS`):

1. ``text_form``: the same pairs, each sentence in MTEB's text (its tokenisation and case);
2. ``pooling``: SentEval's ``all`` (one Spearman over the sub-datasets concatenated) -> MTEB's single
   set: 0 whenever the pairs are the same (SentEval's ``mean`` of per-sub-dataset Spearmans is shown
   beside, ``senteval_mean``);
3. ``pairs``: within the scored split, SentEval's pairs that MTEB lacks leave, MTEB's that SentEval's
   files lack (STS13's SMT, rows without a gold score) come in;
4. ``split``: the pairs MTEB scores from SentEval's other splits come in (SICK-R: all 9,927 pairs, not
   the test split's 4,927);
5. ``similarity``: our cosine Spearman -> MTEB's evaluator's (its encoding batches, float32 cosine,
   under which a pair of identical sentences ties at exactly 1; docs/bridge.md).

Each part is the score after its step minus before, so the parts add up to MTEB minus SentEval (exact
but for float rounding). Pairs are matched by their letters and digits only and their gold.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from contrastlab.evaluation.mteb_sts import MTEB_TASKS, PairSet
from contrastlab.senteval import protocol as P
from contrastlab.senteval.tasks import Pairs, load_sts_pairs, load_sts_subsets

__all__ = ["STEPS", "bridge_checkpoint", "bridge_task", "senteval_side", "sentence_transformers_score"]

#: The chain's steps, SentEval -> MTEB, in order (module docstring).
STEPS = ("text_form", "pooling", "pairs", "split", "similarity")

Encode = Callable[[list[str]], np.ndarray]


def _key(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "", text.lower())


def senteval_side(data_dir: str | Path, task: str) -> tuple[list[Pairs], list[Pairs]]:
    """SentEval's scored pairs of ``task`` (its sub-datasets, or the test split) and its other splits."""
    if task in P.STS_SUBSETS:
        return load_sts_subsets(data_dir, task), []
    other = [load_sts_pairs(data_dir, task, split) for split in ("train", "dev")]
    return [load_sts_pairs(data_dir, task, "test")], other


def _lookup(encode: Encode, sentences: list[str]) -> Encode:
    """Embeddings of every sentence the chain needs, encoded once (one ``encode`` call)."""
    from contrastlab.evaluation.senteval import lookup_from  # imports torch: see _score_sts

    unique = sorted(set(sentences), key=lambda s: (len(s), s))
    return lookup_from(unique, encode(unique))


def _match(
    scored: list[Pairs], other: list[Pairs], mteb: PairSet
) -> tuple[list[int | None], list[str | None]]:
    """For each SentEval scored pair (concatenated), the MTEB row it is (or None); for each MTEB row,
    where SentEval has it: ``scored``, ``other`` (another split) or None."""
    free: dict[tuple, list[tuple[str, int]]] = defaultdict(list)
    n = 0
    for where, sets in (("scored", scored), ("other", other)):
        for pairs in sets:
            for a, b, g in zip(pairs.a, pairs.b, pairs.gold, strict=True):
                free[(_key(a), _key(b), round(float(g), 4))].append((where, n if where == "scored" else -1))
                n += where == "scored"
    counterpart: list[int | None] = [None] * n
    origin: list[str | None] = []
    for i, (a, b, g) in enumerate(zip(mteb.sentence1, mteb.sentence2, mteb.score, strict=True)):
        found = free.get((_key(a), _key(b), round(float(g), 4)))
        where, j = found.pop(0) if found else (None, -1)
        origin.append(where)
        if where == "scored":
            counterpart[j] = i
    return counterpart, origin


def _score_sts(lookup: Encode, subsets: list[Pairs]) -> float:
    """:func:`contrastlab.evaluation.senteval.score_sts`, imported when first scored: that module imports
    torch (its probes and encoders), and the ``tables`` job, which reads only this module's file names
    and :data:`STEPS`, would pay two seconds for it."""
    from contrastlab.evaluation.senteval import score_sts

    return score_sts(lookup, subsets)


def _spearman(lookup: Encode, a: list[str], b: list[str], gold: np.ndarray) -> float:
    return _score_sts(lookup, [Pairs("set", a, b, np.asarray(gold, dtype=np.float64))])


def bridge_task(
    encode: Encode, scored: list[Pairs], other: list[Pairs], mteb: PairSet, mteb_score: float
) -> dict[str, Any]:
    """The chain of one task (module docstring): ``senteval`` (the protocol's score), ``chain`` (the score
    after each of :data:`STEPS`), ``parts`` (each step's change), ``mteb`` (``mteb_score``, MTEB's own,
    in percent), ``total`` and the pair counts; scores in percent."""
    counterpart, origin = _match(scored, other, mteb)
    se_a = [s for p in scored for s in p.a]
    se_b = [s for p in scored for s in p.b]
    se_gold = np.concatenate([p.gold for p in scored])
    lookup = _lookup(encode, se_a + se_b + mteb.sentence1 + mteb.sentence2)
    start = _score_sts(lookup, scored)  # the SentEval protocol's number, computed as it computes it
    # 1. text form: the same pairs (per sub-dataset), in MTEB's text where MTEB has the pair
    a = [x if j is None else mteb.sentence1[j] for x, j in zip(se_a, counterpart, strict=True)]
    b = [y if j is None else mteb.sentence2[j] for y, j in zip(se_b, counterpart, strict=True)]
    ends = np.cumsum([len(p.a) for p in scored])
    texts = [
        Pairs(p.name, a[end - len(p.a) : end], b[end - len(p.a) : end], p.gold)
        for p, end in zip(scored, ends, strict=True)
    ]
    after_text = _score_sts(lookup, texts)
    # 2. pooling: one set, as MTEB scores it
    after_pooling = _spearman(lookup, a, b, se_gold)
    # 3. pairs present in the scored split; 4. MTEB's split (every MTEB row)
    keep = [i for i, o in enumerate(origin) if o != "other"]
    kept = [[rows[i] for i in keep] for rows in (mteb.sentence1, mteb.sentence2)]
    after_pairs = _spearman(lookup, *kept, mteb.score[keep])
    after_split = _spearman(lookup, mteb.sentence1, mteb.sentence2, mteb.score)
    chain = [start, after_text, after_pooling, after_pairs, after_split, float(mteb_score)]
    means = [_spearman(lookup, p.a, p.b, p.gold) for p in scored]
    return {
        "senteval": start,
        "senteval_mean": float(np.mean(means)),
        "mteb": float(mteb_score),
        "chain": dict(zip(STEPS, chain[1:], strict=True)),
        "parts": {step: chain[i + 1] - chain[i] for i, step in enumerate(STEPS)},
        "total": float(mteb_score) - start,
        "counts": {
            "senteval_pairs": len(se_gold),
            "mteb_pairs": len(mteb.score),
            "text_changed": sum(
                j is not None and (se_a[i], se_b[i]) != (mteb.sentence1[j], mteb.sentence2[j])
                for i, j in enumerate(counterpart)
            ),
            "senteval_only": sum(j is None for j in counterpart),
            "mteb_only": sum(o is None for o in origin),
            "other_split": sum(o == "other" for o in origin),
        },
    }


def sentence_transformers_score(model: Any, pairs: PairSet, batch_size: int = 64) -> float:
    """sentence-transformers' own ``EmbeddingSimilarityEvaluator`` on ``pairs``: its cosine Spearman,
    in percent (``spearman_cosine``; the gold normalised to 0-1 as its docs do, which Spearman ignores)."""
    from sentence_transformers.evaluation import EmbeddingSimilarityEvaluator, SimilarityFunction

    evaluator = EmbeddingSimilarityEvaluator(
        pairs.sentence1,
        pairs.sentence2,
        (pairs.score / 5.0).tolist(),
        main_similarity=SimilarityFunction.COSINE,
        batch_size=batch_size,
        name="stsb",
        show_progress_bar=False,
    )
    scores = evaluator(model)
    return float(scores[f"{evaluator.name}_spearman_cosine"]) * 100


def bridge_checkpoint(
    encode: Encode,
    senteval_dir: str | Path,
    pairs: Mapping[str, PairSet],
    mteb_scores: Mapping[str, Mapping[str, float]],
) -> dict[str, dict[str, Any]]:
    """:func:`bridge_task` for every SentEval STS task, keyed by SentEval's name; ``mteb_scores`` as
    :func:`~contrastlab.evaluation.mteb_sts.run_mteb` returns them (fractions), ``pairs`` the MTEB rows."""
    out = {}
    for task, name in MTEB_TASKS.items():
        scored, other = senteval_side(senteval_dir, task)
        score = mteb_scores[name]["cosine_spearman"] * 100
        out[task] = {"mteb_task": name, **bridge_task(encode, scored, other, pairs[name], score)}
    return out


#: Written in a cell's ``Results.mteb`` folder beside MTEB's own results folder.
BRIDGE_FILE = "bridge.json"
PROVENANCE_FILE = "provenance.json"


def _sts_rows(
    data: str,
    senteval_dir: str | Path,
    stsb_dir: str | Path | None,
    lock_file: str | Path | None,
    pins: Mapping[str, Mapping[str, str]],
) -> tuple[dict[str, PairSet], dict[str, Any]]:
    """MTEB's rows of the seven STS tasks and what ``provenance.json`` says of them: a stand-in's, from
    local files, with :func:`~contrastlab.evaluation.mteb_sts.standin_check`'s comparison, or the hub's
    at the pinned revisions, recorded in ``lock_file``."""
    from contrastlab.evaluation import mteb_sts

    if data == "standin":
        pairs = mteb_sts.standin_pairs(senteval_dir, stsb_dir)
        return pairs, {"data": "standin", "check": mteb_sts.standin_check(pairs)}
    pairs = {task: mteb_sts.hub_pairs(task) for task in MTEB_TASKS.values()}
    if lock_file is not None:
        mteb_sts.record_pins(lock_file, pairs, pins)
    return pairs, {"data": "hub"}


def mteb_checkpoint(
    model_dir: str | Path,
    senteval_dir: str | Path,
    out_dir: str | Path,
    *,
    data: str = "hub",
    stsb_dir: str | Path | None = None,
    batch_size: int = 64,
    device: str | None = None,
    name: str | None = None,
    lock_file: str | Path | None = None,
    overwrite: str = "always",
    meta: Mapping[str, Any] | None = None,
    tasks: Sequence[str] | None = None,
    benchmark: str | None = None,
) -> dict[str, Any]:
    """Rule ``mteb``'s work on one checkpoint: MTEB's seven STS tasks through ``mteb`` (results in MTEB's
    format under ``out_dir``), with the further ``tasks`` or named ``benchmark``'s tasks that config keys
    ``mteb.tasks`` / ``mteb.benchmark`` choose (:func:`~contrastlab.evaluation.mteb_sts.selected_tasks`;
    those need ``data: hub``), the bridge from the SentEval protocol on the seven (``bridge.json``), and
    sentence-transformers' ``EmbeddingSimilarityEvaluator`` on MTEB's STS-B rows; ``provenance.json``
    says where MTEB's rows came from (``data``: ``hub`` at the pinned revisions, recorded in
    ``lock_file``, or ``standin`` with :func:`~contrastlab.evaluation.mteb_sts.standin_check`'s
    comparison). ``overwrite`` (``only-missing`` resumes a killed run) and ``meta``:
    :func:`~contrastlab.evaluation.mteb_sts.run_mteb`'s. Returns what ``bridge.json`` holds."""
    import mteb

    from contrastlab.evaluation import mteb_sts
    from contrastlab.paths import write_json

    if data not in mteb_sts.DATA_SOURCES:
        raise ValueError(f"mteb.data must be one of {', '.join(mteb_sts.DATA_SOURCES)}, got {data!r}")
    if data == "standin" and (tasks is not None or benchmark is not None):
        raise ValueError(
            "mteb.tasks and mteb.benchmark need mteb.data: hub (the stand-in holds the seven STS tasks)"
        )
    out_dir = Path(out_dir)
    chosen = mteb_sts.selected_tasks(tasks, benchmark)
    model = mteb_sts.load_sentence_transformer(model_dir, device=device, name=name)
    pins = mteb_sts.task_pins(tuple(task.metadata.name for task in chosen))
    pairs, source = _sts_rows(data, senteval_dir, stsb_dir, lock_file, pins)
    scores = mteb_sts.run_mteb(
        model, pairs, out_dir, tasks=chosen, batch_size=batch_size, overwrite=overwrite, meta=meta
    )
    bridge = bridge_checkpoint(mteb_sts.encoder_of(model, batch_size), senteval_dir, pairs, scores)
    result = {
        "model_dir": str(model_dir),
        "tasks": bridge,
        "sentence_transformers": {
            "STSBenchmark": sentence_transformers_score(model, pairs["STSBenchmark"], batch_size)
        },
    }
    write_json(out_dir / BRIDGE_FILE, result)
    write_json(out_dir / PROVENANCE_FILE, {**source, "pins": pins, "mteb": mteb.__version__, "model": name})
    return result


def main(argv: list[str] | None = None) -> None:
    """``python -m contrastlab.evaluation.bridge MODEL SENTEVAL_DIR OUT [--standin] [--stsb-dir D]``:
    :func:`mteb_checkpoint` outside the workflow (docs/bridge.md), printing the bridge as a table."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m contrastlab.evaluation.bridge", description=main.__doc__)
    parser.add_argument("model", help="a sentence-transformers folder (a kept checkpoint, MiniLM's package)")
    parser.add_argument("senteval_dir", help="the folder holding SentEval's downstream/")
    parser.add_argument("out", help="where MTEB's results, bridge.json and provenance.json go")
    parser.add_argument("--standin", action="store_true", help="MTEB's rows from local files, not the hub")
    parser.add_argument("--stsb-dir", help="the folder of the original STS-B release's sts-test.csv")
    parser.add_argument("--name", help="the model's name in MTEB's results")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--task", action="append", dest="tasks", help="a further MTEB task (repeatable; needs the hub's data)"
    )
    parser.add_argument("--benchmark", help="a named MTEB benchmark's tasks too, e.g. 'MTEB(eng, v2)'")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the MTEB tasks already in OUT (their scores as MTEB stored them: rounded to 1e-5)",
    )
    args = parser.parse_args(argv)
    try:
        result = mteb_checkpoint(
            args.model,
            args.senteval_dir,
            args.out,
            data="standin" if args.standin else "hub",
            stsb_dir=args.stsb_dir,
            batch_size=args.batch_size,
            name=args.name,
            overwrite="only-missing" if args.resume else "always",
            tasks=args.tasks,
            benchmark=args.benchmark,
        )
    except ConnectionError as error:  # offline: MTEB's datasets load from the hub
        raise SystemExit(
            f"contrastlab: ConnectionError: {' '.join(str(error).split())}; MTEB's rows come from the hub: "
            "connect, or pass --standin (the seven STS tasks from local files)"
        ) from None
    except (KeyError, ValueError) as error:  # a --task or --benchmark mteb does not know, or with --standin
        raise SystemExit(f"contrastlab: {error.args[0]}") from None
    st = result["sentence_transformers"]
    print("task | SentEval | " + " | ".join(STEPS) + " | MTEB | MTEB - SentEval | ST evaluator")
    for task, r in result["tasks"].items():
        parts = " | ".join(f"{r['parts'][s]:+.4f}" for s in STEPS)
        extra = f"{st[task]:.4f}" if task in st else ""
        print(f"{task} | {r['senteval']:.4f} | {parts} | {r['mteb']:.4f} | {r['total']:+.4f} | {extra}")


if __name__ == "__main__":
    main()
