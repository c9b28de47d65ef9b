"""Readers for the SentEval ``downstream/`` tree, each reading its files as SentEval (SimCSE's copy) does:

- rows: ``f.read().splitlines()`` (STS12-16, MR/CR/SUBJ/MPQA) splits on every Unicode line boundary and
  keeps empty lines as empty sentences; ``for line in f`` (STS-B, SICK, SST, TREC, MRPC) splits on
  newlines only, ``line.strip()`` first;
- encoding: latin-1 for MR/CR/SUBJ/MPQA and TREC, UTF-8 for the rest;
- tokens: ``str.split()``, re-joined with single spaces (the form every sentence has here);
- order before cross-validation: sorted by (number of tokens, label), stable: the folds depend on it.

Every reader checks each file's row count against ``protocol.EXPECTED_ROWS`` (or a generated fixture's
counts manifest) and fails with one line naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from contrastlab.senteval import protocol as P


class SentEvalDataError(ValueError):
    """A SentEval data file is missing, truncated or malformed (the message names the file)."""


@dataclass(frozen=True)
class Pairs:
    """Sentence pairs with gold similarity scores (one STS sub-dataset or split)."""

    name: str
    a: list[str]
    b: list[str]
    gold: np.ndarray


@dataclass(frozen=True)
class Labelled:
    """Sentences with integer labels, in SentEval's order."""

    sentences: list[str]
    labels: np.ndarray


@dataclass(frozen=True)
class LabelledPairs:
    """Sentence pairs with integer labels (MRPC), in SentEval's order."""

    a: list[str]
    b: list[str]
    labels: np.ndarray


def downstream_root(data_dir: str | Path) -> Path:
    """The ``downstream/`` folder inside ``data_dir`` (``data_dir`` itself if it is named so)."""
    data_dir = Path(data_dir)
    if (data_dir / "downstream").is_dir():
        return data_dir / "downstream"
    if data_dir.name == "downstream" and data_dir.is_dir():
        return data_dir
    raise SentEvalDataError(
        f"no SentEval data: {data_dir}/downstream is not a folder (unpack senteval.tar there)"
    )


def _damaged(path: Path, problem: str) -> SentEvalDataError:
    """The one-line error of a missing or damaged file ``path``, ending with its fix."""
    root = next((p for p in path.parents if p.name == "downstream"), path.parent)
    if (root / P.COUNTS_MANIFEST).exists():
        fix = "write the fixture again (contrastlab.data.fixtures.write_senteval_fixture)"
    else:  # not --forcerun senteval_data: its new marker would retrain every cell (mtime rerun trigger)
        fix = f"restore it from senteval.tar, unpacked inside {root} "
        fix += "(the workflow keeps it in <resources_dir>/downloads/)"
    return SentEvalDataError(f"{problem}; {fix}")


def _path(root: Path, rel: str) -> Path:
    path = root / rel
    if not path.is_file():
        raise _damaged(path, f"missing SentEval file {path}")
    return path


def _check_rows(root: Path, rel: str, found: int) -> None:
    """``found`` rows against the fixture's counts manifest when the tree has one, else protocol.md's."""
    manifest = root / P.COUNTS_MANIFEST
    if manifest.exists():
        want = json.loads(manifest.read_text(encoding="utf-8"))["rows"].get(rel)
    else:
        want = P.EXPECTED_ROWS.get(rel)
    if want is None:
        raise SentEvalDataError(f"no expected row count for {root / rel} (counts manifest incomplete)")
    if found != want:
        what = "truncated" if found < want else "longer than expected"
        raise _damaged(root / rel, f"{root / rel}: {found} rows, expected {want} ({what} or wrong file)")


def _join(text: str) -> str:
    return " ".join(text.split())


def _field(path: Path, row: int, fields: list[str], index: int) -> str:
    if index >= len(fields):
        raise _damaged(
            path, f"{path}: row {row + 1} has {len(fields)} tab-separated fields, needs {index + 1}"
        )
    return fields[index]


def _float(path: Path, row: int, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise _damaged(path, f"{path}: row {row + 1}: score {value!r} is not a number") from None


def _sorted_labelled(samples: list[tuple[str, int]]) -> Labelled:
    """Single-sentence samples in SentEval's order: sorted (stably) by (number of tokens, label)."""
    samples = sorted(samples, key=lambda item: (len(item[0].split()), item[1]))
    return Labelled([s for s, _ in samples], np.array([y for _, y in samples], dtype=np.int64))


def _split_lines(
    data_dir: str | Path, task: str, split: str, encoding: str, *, skip_header: bool = False
) -> tuple[Path, list[str]]:
    """The path and rows of ``split`` of ``task`` (``for line in f``, header dropped), its row count
    checked; an unknown split names the task's splits."""
    root = downstream_root(data_dir)
    rel = P.SPLIT_FILES[task].get(split)
    if rel is None:
        raise ValueError(
            f"unknown split {split!r} for {task}; choose one of {', '.join(P.SPLIT_FILES[task])}"
        )
    path = _path(root, rel)
    with open(path, encoding=encoding) as f:  # ``for line in f``: newline boundaries only
        lines = list(f)[1 if skip_header else 0 :]
    _check_rows(root, rel, len(lines))
    return path, lines


#: Columns (sentence 1, sentence 2, score) of the STS-B and SICK-R split files.
STS_PAIR_COLUMNS = {"STSBenchmark": (5, 6, 4), "SICKRelatedness": (1, 2, 3)}


# --- STS ------------------------------------------------------------------------------------------


def load_sts_subsets(data_dir: str | Path, task: str) -> list[Pairs]:
    """STS12-16 sub-datasets (SentEval ``STSEval.loadFile``): rows with an empty gold score dropped."""
    if task not in P.STS_SUBSETS:
        raise ValueError(f"{task!r} is not one of {', '.join(P.STS_SUBSETS)}")
    root = downstream_root(data_dir)
    out = []
    for name in P.STS_SUBSETS[task]:
        input_rel = f"{P.STS_DIRS[task]}/STS.input.{name}.txt"
        gold_rel = f"{P.STS_DIRS[task]}/STS.gs.{name}.txt"
        input_path, gold_path = _path(root, input_rel), _path(root, gold_rel)
        # ``f.read().splitlines()``: universal newlines, then every Unicode line boundary
        rows = [line.split("\t") for line in input_path.read_text(encoding="utf-8").splitlines()]
        raw_gold = gold_path.read_text(encoding="utf-8").splitlines()
        if len(rows) != len(raw_gold):
            short = input_path if len(rows) < len(raw_gold) else gold_path
            raise _damaged(
                short,
                f"{short}: truncated ({input_path.name} has {len(rows)} rows, "
                f"{gold_path.name} {len(raw_gold)})",
            )
        keep = [i for i, g in enumerate(raw_gold) if g != ""]
        _check_rows(root, gold_rel, len(keep))
        a = [_join(_field(input_path, i, rows[i], 0)) for i in keep]
        b = [_join(_field(input_path, i, rows[i], 1)) for i in keep]
        gold = np.array([_float(gold_path, i, raw_gold[i]) for i in keep], dtype=np.float64)
        out.append(Pairs(name, a, b, gold))
    return out


def load_sts_pairs(data_dir: str | Path, task: str, split: str) -> Pairs:
    """One split of STS-B or SICK-R as :class:`Pairs`: STS-B (``STSBenchmarkEval.loadFile``: sentences
    in columns 5 and 6, score in 4) and SICK-R (header row, sentences in columns 1 and 2, score in 3)."""
    if task not in STS_PAIR_COLUMNS:
        raise ValueError(f"split pairs exist for STSBenchmark and SICKRelatedness, not {task!r}")
    if split not in P.SPLIT_FILES[task]:
        raise ValueError(f"unknown split {split!r} for {task}; choose one of train, dev, test")
    cols = STS_PAIR_COLUMNS[task]
    path, lines = _split_lines(data_dir, task, split, "utf-8", skip_header=task == "SICKRelatedness")
    a, b, gold = [], [], []
    for i, line in enumerate(lines):
        fields = line.strip().split("\t")
        a.append(_join(_field(path, i, fields, cols[0])))
        b.append(_join(_field(path, i, fields, cols[1])))
        gold.append(_float(path, i, _field(path, i, fields, cols[2])))
    return Pairs(P.SPLIT_FILES[task][split], a, b, np.array(gold, dtype=np.float64))


def load_sts_split(data_dir: str | Path, task: str, split: str) -> tuple[list[str], list[str], np.ndarray]:
    """``(sentences1, sentences2, gold)`` of STS-B / SICK-R ``split`` (contracts.md; trainer's dev path)."""
    pairs = load_sts_pairs(data_dir, task, split)
    return pairs.a, pairs.b, pairs.gold


# --- transfer tasks -------------------------------------------------------------------------------


def load_binary(data_dir: str | Path, task: str) -> Labelled:
    """MR, CR, SUBJ, MPQA (``BinaryClassifierEval``): latin-1, splitlines, label 1 file first, sorted."""
    if task not in P.BINARY_FILES:
        raise ValueError(f"{task!r} is not one of {', '.join(P.BINARY_FILES)}")
    root = downstream_root(data_dir)
    samples: list[tuple[str, int]] = []
    for rel, label in zip(P.BINARY_FILES[task], (1, 0), strict=True):
        lines = _path(root, rel).read_text(encoding="latin-1").splitlines()  # ``f.read().splitlines()``
        _check_rows(root, rel, len(lines))
        samples += [(_join(line), label) for line in lines]
    return _sorted_labelled(samples)


def load_sst2(data_dir: str | Path, split: str) -> Labelled:
    """SST-2 (``SSTEval.loadFile``, binary): ``sentence<TAB>label`` per line, sorted by (tokens, label)."""
    path, lines = _split_lines(data_dir, "SST2", split, "utf-8")
    samples = []
    for i, line in enumerate(lines):
        fields = line.strip().split("\t")
        label = _field(path, i, fields, 1)
        if label not in ("0", "1"):
            raise _damaged(path, f"{path}: row {i + 1}: label {label!r} is not 0 or 1")
        samples.append((_join(fields[0]), int(label)))
    return _sorted_labelled(samples)


def load_trec(data_dir: str | Path, split: str) -> Labelled:
    """TREC (``TRECEval.loadFile``): latin-1, ``COARSE:fine question``, the fine label dropped, sorted."""
    path, lines = _split_lines(data_dir, "TREC", split, "latin-1")
    index = {name: i for i, name in enumerate(P.TREC_CLASSES)}
    samples = []
    for i, line in enumerate(lines):
        target, sep, rest = line.strip().partition(":")
        words = rest.split(" ", 1)
        if not sep or target not in index or len(words) < 2:
            raise _damaged(path, f"{path}: row {i + 1} is not 'CLASS:fine question'")
        samples.append((_join(words[1]), index[target]))
    return _sorted_labelled(samples)


def load_mrpc(data_dir: str | Path, split: str) -> LabelledPairs:
    """MRPC (``MRPCEval.loadFile``): header row, label in column 0, sentences in 3 and 4, sorted."""
    path, lines = _split_lines(data_dir, "MRPC", split, "utf-8", skip_header=True)
    rows = []
    for i, line in enumerate(lines):
        fields = line.strip().split("\t")
        label = _field(path, i + 1, fields, 0)
        if label not in ("0", "1"):
            raise _damaged(path, f"{path}: row {i + 2}: label {label!r} is not 0 or 1")
        rows.append(
            (_join(_field(path, i + 1, fields, 3)), _join(_field(path, i + 1, fields, 4)), int(label))
        )
    rows.sort(key=lambda r: (len(r[0].split()), len(r[1].split()), r[2]))
    return LabelledPairs(
        [r[0] for r in rows], [r[1] for r in rows], np.array([r[2] for r in rows], dtype=np.int64)
    )


# --- whole tasks: the data and sentences each one needs ------------------------------------------


def load_task(data_dir: Path, task: str, mode: str) -> Any:
    """The data one task needs in ``mode`` (only the STS-B/SICK-R split that is scored)."""
    if task in P.STS_SUBSETS:
        return load_sts_subsets(data_dir, task)
    if task in STS_PAIR_COLUMNS:
        return [load_sts_pairs(data_dir, task, P.STS_SPLIT_BY_MODE[mode])]
    if task in P.BINARY_FILES:
        return load_binary(data_dir, task)
    readers = {"SST2": load_sst2, "TREC": load_trec, "MRPC": load_mrpc}  # every split of the task
    if task in readers:
        return {split: readers[task](data_dir, split) for split in P.SPLIT_FILES[task]}
    raise ValueError(f"unknown task {task!r}")


def sentences_in(data: Any) -> Iterable[str]:
    """Every sentence of one task's :func:`load_task` data (with repeats)."""
    if isinstance(data, list | dict):  # STS sub-datasets, or a task's splits
        for part in data.values() if isinstance(data, dict) else data:
            yield from sentences_in(part)
    elif isinstance(data, Labelled):
        yield from data.sentences
    else:  # Pairs, LabelledPairs
        yield from data.a
        yield from data.b


def load_tasks(data_dir: str | Path, tasks: Iterable[str], mode: str) -> tuple[dict[str, Any], list[str]]:
    """The loaded ``tasks`` and every unique sentence to encode, shortest first: the one list, in the
    one order, that an evaluation encodes (so that an encoding made in a separate job is the same arrays)."""
    mode = P.check_mode(mode)
    loaded = {task: load_task(Path(data_dir), task, mode) for task in P.check_tasks(tasks)}
    unique = set().union(*map(sentences_in, loaded.values()))
    return loaded, sorted(unique, key=lambda s: (len(s), s))


def task_sentences(data_dir: str | Path, tasks: Iterable[str], mode: str = "test") -> list[str]:
    """Unique sentences ``evaluate`` encodes for ``tasks`` in ``mode``, shortest first."""
    return load_tasks(data_dir, tasks, mode)[1]
