"""Each task reader, on the generated tree: SentEval's reading rules, counts, one-line errors."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from contrastlab.senteval import protocol as P
from contrastlab.senteval import tasks as T


def test_expected_rows_add_up_to_protocol_totals():
    rows = P.EXPECTED_ROWS
    for task, subsets in P.STS_SUBSETS.items():
        assert sum(rows[f"{P.STS_DIRS[task]}/STS.gs.{n}.txt"] for n in subsets) == P.PROTOCOL_TOTALS[task]
    for task, files in P.BINARY_FILES.items():
        assert sum(rows[f] for f in files) == P.PROTOCOL_TOTALS[task]
    for task, splits in P.SPLIT_FILES.items():
        assert tuple(rows[f] for f in splits.values()) == P.PROTOCOL_TOTALS[task]
    assert "SMT" not in P.STS_SUBSETS["STS13"]


def test_sts_subsets_drop_empty_gold_rows(fixture_dir):
    for task in P.STS_SUBSETS:
        subsets = T.load_sts_subsets(fixture_dir, task)
        assert [s.name for s in subsets] == list(P.STS_SUBSETS[task])
        per_file = 6 if task in ("STS15", "STS16") else 8  # the fixture blanks 2 of 8 gold rows there
        assert all(len(s.a) == len(s.b) == len(s.gold) == per_file for s in subsets)


def test_sentences_are_single_space_joined_tokens(tmp_path, fixture_dir):
    root = tmp_path / "t"
    shutil.copytree(fixture_dir, root)
    path = root / "downstream/STS/STS12-en-test/STS.input.MSRpar.txt"
    lines = path.read_text().splitlines()
    lines[0] = "  a\u00a0 b\t  c   d "  # non-breaking space is whitespace for str.split
    path.write_text("\n".join(lines) + "\n")
    first = T.load_sts_subsets(root, "STS12")[0]
    assert (first.a[0], first.b[0]) == ("a b", "c d")


def test_sts_splits(fixture_dir):
    for task in ("STSBenchmark", "SICKRelatedness"):
        for split in ("train", "dev", "test"):
            s1, s2, gold = T.load_sts_split(fixture_dir, task, split)
            assert len(s1) == len(s2) == len(gold) > 0 and gold.dtype == np.float64
            assert all(isinstance(s, str) and "  " not in s for s in s1 + s2)
    with pytest.raises(ValueError, match="unknown split"):
        T.load_sts_split(fixture_dir, "STSBenchmark", "valid")


def test_binary_tasks_sorted_and_keep_empty_lines(fixture_dir):
    for task in P.BINARY_FILES:
        data = T.load_binary(fixture_dir, task)
        assert len(data.sentences) == 48 and sorted(np.bincount(data.labels)) == [24, 24]
        keys = [(len(s.split()), y) for s, y in zip(data.sentences, data.labels, strict=True)]
        assert keys == sorted(keys)
    cr = T.load_binary(fixture_dir, "CR")
    assert cr.sentences[0] == "" and cr.labels[0] == 0  # the empty line is a (negative) sample


def test_sst_trec_mrpc(fixture_dir):
    sst = T.load_sst2(fixture_dir, "train")
    assert set(sst.labels) == {0, 1} and len(sst.sentences) == 40
    trec = T.load_trec(fixture_dir, "train")
    assert sorted(set(trec.labels)) == list(range(6)) and len(trec.sentences) == 72
    assert not any(s.split()[0].startswith("other") for s in trec.sentences)  # fine label dropped
    mrpc = T.load_mrpc(fixture_dir, "test")
    assert len(mrpc.a) == len(mrpc.b) == 16 and "Quality" not in mrpc.a  # header skipped
    for m in (mrpc, T.load_mrpc(fixture_dir, "train")):  # sorted by (tokens a, tokens b, label)
        keys = [(len(a.split()), len(b.split()), y) for a, b, y in zip(m.a, m.b, m.labels, strict=True)]
        assert keys == sorted(keys)


def test_truncated_and_missing_files_fail_with_one_line_naming_them(tmp_path, fixture_dir):
    root = tmp_path / "t"
    shutil.copytree(fixture_dir, root)
    pos = root / "downstream/MR/rt-polarity.pos"
    pos.write_text("".join(pos.read_text().splitlines(keepends=True)[:10]))
    fixture = "(contrastlab.data.fixtures.write_senteval_fixture)"
    with pytest.raises(T.SentEvalDataError) as info:
        T.load_binary(root, "MR")
    assert "rt-polarity.pos" in str(info.value) and "truncated" in str(info.value)
    assert "\n" not in str(info.value) and str(info.value).endswith("; write the fixture again " + fixture)
    gold = root / "downstream/STS/STS15-en-test/STS.gs.images.txt"
    gold.write_text("".join(gold.read_text().splitlines(keepends=True)[:4]))
    with pytest.raises(T.SentEvalDataError, match="STS.gs.images.txt: truncated"):
        T.load_sts_subsets(root, "STS15")
    (root / "downstream/TREC/TREC_10.label").unlink()
    with pytest.raises(T.SentEvalDataError, match="missing SentEval file .*TREC_10.label"):
        T.load_trec(root, "test")
    # without the fixture's counts manifest, protocol.md's counts apply
    (root / "downstream" / P.COUNTS_MANIFEST).unlink()
    inside = re.escape(str(root / "downstream"))
    fix = rf"; restore it from senteval.tar, unpacked inside {inside} \(.*/downloads/\)$"
    with pytest.raises(T.SentEvalDataError, match="expected 5331 .*" + fix):
        T.load_binary(root, "MR")
    with pytest.raises(T.SentEvalDataError, match="no SentEval data"):
        T.load_binary(tmp_path / "nowhere", "MR")
