"""The generated demo data: a SentEval tree the real loaders accept, and a training corpus."""

from __future__ import annotations

import json

import pytest

from contrastlab.data.acquire import prepare_corpus, prepare_senteval
from contrastlab.data.download import sha256_file
from contrastlab.data.fixtures import write_demo_corpus, write_senteval_fixture
from contrastlab.senteval import protocol as P
from contrastlab.senteval.tasks import task_sentences


def test_fixture_is_deterministic_and_counts_itself(tmp_path):
    write_senteval_fixture(tmp_path / "a", seed=3)
    write_senteval_fixture(tmp_path / "b", seed=3)
    manifest = json.loads((tmp_path / "a" / "downstream" / P.COUNTS_MANIFEST).read_text())
    assert manifest["fixture"] is True
    assert set(manifest["rows"]) == set(P.EXPECTED_ROWS)  # same files as the real tree
    for rel in manifest["rows"]:
        assert (tmp_path / "a/downstream" / rel).read_bytes() == (
            tmp_path / "b/downstream" / rel
        ).read_bytes()
    assert len(task_sentences(tmp_path / "a", P.TASKS)) > 500


def test_demo_corpus(tmp_path):
    path = write_demo_corpus(tmp_path / "c" / "corpus.txt", 50)
    lines = path.read_text().splitlines()
    assert len(lines) == 50 and all(line.strip() for line in lines)


def test_prepare_entry_points_offline(tmp_path):
    folder = prepare_senteval(tmp_path / "fx", downloads=tmp_path / "dl", user_copy=False, fixture=True)
    assert (folder / "downstream" / P.COUNTS_MANIFEST).exists()
    assert prepare_senteval(folder, downloads=tmp_path / "dl", user_copy=True, fixture=False) == folder
    corpus = prepare_corpus(tmp_path / "c.txt", user_copy=False, fixture=True, fixture_sentences=20)
    assert len((tmp_path / "c.txt").read_text().splitlines()) == 20
    assert corpus == {"corpus": "text", "sha256": sha256_file(tmp_path / "c.txt"), "lines": 20}


def test_user_copy_must_match_the_published_checksums(tmp_path, shared):
    """A row count misses a cut-short sentence or one changed byte; the published sha256 does not."""
    import shutil

    from contrastlab.data.download import canonical_senteval_files
    from contrastlab.senteval.tasks import SentEvalDataError

    real = tmp_path / "senteval"
    shutil.copytree(shared / "data" / "senteval", real)
    assert len(canonical_senteval_files()) == 80
    assert prepare_senteval(real, downloads=tmp_path / "dl", user_copy=True, fixture=False) == real
    mr = real / "downstream" / "MR" / "rt-polarity.pos"
    original = mr.read_bytes()
    faults = {
        "short last sentence": original.rstrip(b"\n")[:-5] + b"\n",
        "one byte altered": original[:100] + bytes([original[100] ^ 1]) + original[101:],
        "empty": b"",
    }
    for fault, content in faults.items():
        mr.write_bytes(content)
        with pytest.raises(SentEvalDataError, match="rt-polarity.pos differs from SentEval.s published file"):
            prepare_senteval(real, downloads=tmp_path / "dl", user_copy=True, fixture=False)
        assert fault
    mr.unlink()
    with pytest.raises(SentEvalDataError, match="rt-polarity.pos is missing"):
        prepare_senteval(real, downloads=tmp_path / "dl", user_copy=True, fixture=False)
