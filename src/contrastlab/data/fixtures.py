"""Generated stand-ins for the real data: a tiny SentEval ``downstream/`` tree and a training corpus.

Everything is invented by a seeded template grammar (no sentence comes from the real data sets), in the
exact file formats of ``senteval.tar``, so the real loaders and the evaluator run on it unchanged. The
tree carries its own row counts (``protocol.COUNTS_MANIFEST``), which the loaders check instead of
protocol.md's. Labels follow the words (positive/negative adjectives, objective/subjective frames,
question words), and STS gold scores follow word overlap, so a bag-of-words encoder scores above chance.

Every run of the demo asks for the same files, and two runs may share one resources folder, or read it
from a read-only copy: a file already holding its content is left alone (not even its mtime changes), and
one that must be written is written beside itself and renamed into place (:func:`put_text`), so that a
reader sees the earlier file or the new one whole, never a cut one.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from contrastlab.paths import write_text
from contrastlab.senteval import protocol as P

SUBJECTS = (
    "the farmer, a student, my neighbour, the old captain, a young painter, the baker, our teacher, "
    "the tired doctor, a quiet child, the mayor, a tall dancer, the pilot"
).split(", ")
VERBS = "watches paints repairs carries finds describes builds cleans follows sells draws opens".split()
OBJECTS = (
    "a red bicycle, the wooden boat, an empty basket, the small garden, a broken clock, the green door, "
    "a heavy box, the long letter, a silver spoon, the narrow bridge, a paper kite, the stone wall"
).split(", ")
PLACES = (
    "near the river, in the kitchen, at the station, on the hill, behind the school, in the market, "
    "under the tree, by the harbour"
).split(", ")
POSITIVE = ["wonderful", "charming", "delightful", "brilliant", "moving", "clever", "warm", "lovely"]
NEGATIVE = ["dull", "clumsy", "boring", "awful", "tedious", "messy", "bland", "weak"]
ITEMS = ["film", "story", "camera", "player", "screen", "battery", "plot", "ending"]
WH = {
    "ABBR": ["what does {x} stand for ?", "what is the abbreviation of {x} ?"],
    "DESC": ["how does {x} work ?", "why is {x} important ?"],
    "ENTY": ["what kind of object is {x} ?", "which colour is {x} ?"],
    "HUM": ["who invented {x} ?", "who owns {x} ?"],
    "LOC": ["where can i find {x} ?", "where is {x} kept ?"],
    "NUM": ["how many people use {x} ?", "when was {x} first made ?"],
}


def _plain(rng: random.Random) -> str:
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(PLACES)} ."


def _sentiment(rng: random.Random, positive: bool) -> str:
    adjective = rng.choice(POSITIVE if positive else NEGATIVE)
    frame = rng.choice(["the {i} is {a} .", "a {a} {i} , really .", "i found the {i} {a} and {b} ."])
    other = rng.choice(POSITIVE if positive else NEGATIVE)
    return frame.format(i=rng.choice(ITEMS), a=adjective, b=other)


def _subjective(rng: random.Random, objective: bool) -> str:
    if objective:
        return f"{_plain(rng)[:-2]} while {rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} ."
    return f"i think {rng.choice(SUBJECTS)} is {rng.choice(POSITIVE + NEGATIVE)} and feel it deeply ."


def _perturb(rng: random.Random, sentence: str, keep: float) -> str:
    """Replace about ``1 - keep`` of the words by other vocabulary (STS / paraphrase pairs)."""
    pool = " ".join(SUBJECTS + VERBS + OBJECTS).split()
    return " ".join(w if rng.random() < keep or w == "." else rng.choice(pool) for w in sentence.split())


def _sts_rows(rng: random.Random, n: int) -> list[tuple[str, str, float]]:
    rows = []
    for _ in range(n):
        s1, keep = _plain(rng), rng.random()
        rows.append((s1, _perturb(rng, s1, keep), round(5 * keep, 3)))
    return rows


def put_text(path: str | Path, text: str) -> bool:
    """Make ``path`` hold ``text`` (UTF-8) and return whether it had to be written: a file holding it
    already is left as it is (inode and mtime too); otherwise the text goes to a temporary name in the
    same folder, renamed over ``path``, so that no reader, and no second writer, ever meets a cut file."""
    path, data = Path(path), text.encode("utf-8")
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    write_text(path, text)
    return True


def _write(path: Path, lines: list[str], counts: dict[str, int], root: Path, rows: int | None = None) -> None:
    put_text(path, "".join(line + "\n" for line in lines))
    if rows is not None:
        counts[path.relative_to(root).as_posix()] = rows


def write_senteval_fixture(out_dir: str | Path, seed: int = 0) -> Path:
    """Write a small SentEval tree to ``out_dir/downstream`` (all 14 tasks); returns ``out_dir``.

    Sizes allow ``test`` mode (10-fold, nested): 24 sentences per class for MR/CR/SUBJ/MPQA, 12 per
    class for TREC train, 20 per class for MRPC/SST2 train. STS15/16 gold files have empty rows, CR an
    empty sentence, SICK/MRPC header rows, as the real files do.
    """
    rng = random.Random(seed)
    out_dir = Path(out_dir)
    root = out_dir / "downstream"
    counts: dict[str, int] = {}

    for task, subsets in P.STS_SUBSETS.items():
        folder = root / P.STS_DIRS[task]
        for name in subsets:
            rows = _sts_rows(rng, 8)
            gold = [f"{g:.3f}" for _, _, g in rows]
            inputs = [f"{a}\t{b}" for a, b, _ in rows]
            if task in ("STS15", "STS16"):  # unscored pairs: empty gold rows, dropped by the loader
                for i in (2, 5):
                    gold[i] = ""
            _write(folder / f"STS.input.{name}.txt", inputs, counts, root)
            _write(folder / f"STS.gs.{name}.txt", gold, counts, root, sum(g != "" for g in gold))

    for split, n in (("train", 30), ("dev", 16), ("test", 16)):
        lines = [
            f"main-captions\tMSRvid\t2012test\t{i:04d}\t{g:.3f}\t{a}\t{b}"
            for i, (a, b, g) in enumerate(_sts_rows(rng, n))
        ]
        _write(root / P.SPLIT_FILES["STSBenchmark"][split], lines, counts, root, n)
    for split, n in (("train", 30), ("dev", 12), ("test", 16)):
        lines = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
        lines += [
            f"{i + 1}\t{a}\t{b}\t{1 + 0.8 * g:.1f}\tNEUTRAL" for i, (a, b, g) in enumerate(_sts_rows(rng, n))
        ]
        _write(root / P.SPLIT_FILES["SICKRelatedness"][split], lines, counts, root, n)

    makers = {
        "MR": lambda pos: _sentiment(rng, pos),
        "CR": lambda pos: _sentiment(rng, pos),
        "MPQA": lambda pos: rng.choice(POSITIVE if pos else NEGATIVE),  # MPQA items are short phrases
        "SUBJ": lambda pos: _subjective(rng, pos),
    }
    for task, (pos_file, neg_file) in P.BINARY_FILES.items():
        for rel, label in ((pos_file, True), (neg_file, False)):
            lines = [makers[task](label) for _ in range(24)]
            if task == "CR" and not label:
                lines[7] = ""  # the real custrev.neg has empty lines; SentEval keeps them as samples
            _write(root / rel, lines, counts, root, len(lines))

    for split, per_class in (("train", 20), ("dev", 6), ("test", 6)):
        lines = [f"{_sentiment(rng, bool(y))} \t{y}" for y in (1, 0) for _ in range(per_class)]
        rng.shuffle(lines)
        _write(root / P.SPLIT_FILES["SST2"][split], lines, counts, root, len(lines))

    for split, per_class in (("train", 12), ("test", 3)):
        lines = []
        for coarse, frames in WH.items():
            for _ in range(per_class):
                x = rng.choice(OBJECTS)
                lines.append(f"{coarse}:other {rng.choice(frames).format(x=x)}")
        rng.shuffle(lines)
        _write(root / P.SPLIT_FILES["TREC"][split], lines, counts, root, len(lines))

    for split, per_class in (("train", 20), ("test", 8)):
        lines = ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for i in range(2 * per_class):
            label = i % 2
            s1 = _plain(rng)
            s2 = _perturb(rng, s1, 0.9) if label else _plain(rng)
            lines.append(f"{label}\t{1000 + i}\t{2000 + i}\t{s1}\t{s2}")
        _write(root / P.SPLIT_FILES["MRPC"][split], lines, counts, root, 2 * per_class)

    manifest = {"fixture": True, "seed": seed, "rows": dict(sorted(counts.items()))}
    put_text(root / P.COUNTS_MANIFEST, json.dumps(manifest, indent=1) + "\n")
    return out_dir


def write_demo_corpus(path: str | Path, n: int, seed: int = 0, per_line: int = 1) -> Path:
    """Write ``n`` lines of ``per_line`` generated sentences each (the offline demo's training corpus has
    one a line) through :func:`put_text`: an identical file is left alone."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = random.Random(seed)
    makers = [_plain, lambda r: _sentiment(r, r.random() < 0.5), lambda r: _subjective(r, r.random() < 0.5)]
    lines = (" ".join(rng.choice(makers)(rng) for _ in range(per_line)) for _ in range(n))
    path = Path(path)
    put_text(path, "".join(line + "\n" for line in lines))
    return path
