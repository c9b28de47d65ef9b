"""The generated demo data: a SentEval tree the real loaders accept, and a training corpus."""

from __future__ import annotations

import json
import os
import time

import pytest

from contrastlab.data.acquire import prepare_corpus, prepare_senteval
from contrastlab.data.download import sha256_file
from contrastlab.data.fixtures import write_demo_corpus, write_senteval_fixture
from contrastlab.senteval import protocol as P
from contrastlab.senteval.tasks import task_sentences


def test_fixture_is_deterministic_and_counts_itself(tmp_path):
    a, b = (write_senteval_fixture(tmp_path / name, seed=3) / "downstream" for name in "ab")
    manifest = json.loads((a / P.COUNTS_MANIFEST).read_text())
    assert manifest["fixture"] is True
    assert set(manifest["rows"]) == set(P.EXPECTED_ROWS)  # same files as the real tree
    for rel in manifest["rows"]:
        assert (a / rel).read_bytes() == (b / rel).read_bytes()
    assert len(task_sentences(tmp_path / "a", P.TASKS)) > 500


def test_prepare_entry_points_offline(tmp_path):
    folder = prepare_senteval(tmp_path / "fx", downloads=tmp_path / "dl", user_copy=False, fixture=True)
    assert (folder / "downstream" / P.COUNTS_MANIFEST).exists()
    assert prepare_senteval(folder, downloads=tmp_path / "dl", user_copy=True, fixture=False) == folder
    corpus = prepare_corpus(tmp_path / "c.txt", user_copy=False, fixture=True, fixture_sentences=20)
    lines = (tmp_path / "c.txt").read_text().splitlines()
    assert len(lines) == 20 and all(line.strip() for line in lines)
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
    for content in faults.values():
        mr.write_bytes(content)
        with pytest.raises(SentEvalDataError, match="rt-polarity.pos differs from SentEval.s published file"):
            prepare_senteval(real, downloads=tmp_path / "dl", user_copy=True, fixture=False)
    mr.unlink()
    with pytest.raises(SentEvalDataError, match="rt-polarity.pos is missing"):
        prepare_senteval(real, downloads=tmp_path / "dl", user_copy=True, fixture=False)


# Two writers of one resources folder (C1): each writes the corpus and the SentEval tree again and again,
# alternating between two seeds so that files really are replaced (the same seed finds them identical
# and writes nothing), and checks the tree as the senteval job does; prints its failures.
_WRITER = """
import sys, time
from contrastlab.data.download import check_senteval
from contrastlab.data.fixtures import write_demo_corpus, write_senteval_fixture
folder, corpus, first, until = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
calls, failures = 0, []
while time.time() < until:
    seed = (first + calls) % 2
    calls += 1
    try:
        write_demo_corpus(corpus, 3000, seed=seed)
        write_senteval_fixture(folder, seed=seed)
        check_senteval(folder)
    except Exception as error:
        failures.append(f"{type(error).__name__}: {' '.join(str(error).split())}")
print(calls, len(failures), failures[0] if failures else "")
"""


@pytest.mark.fault(
    "two processes rewriting the demo corpus and SentEval fixture of one folder while a third reads (C1)",
    "every read sees a whole file of one version; no writer fails",
)
def test_two_writers_of_the_generated_data_never_show_a_cut_file(tmp_path, observed):
    import subprocess
    import sys

    versions = {}
    for seed in (0, 1):  # the two versions a reader may see, whole
        corpus = write_demo_corpus(tmp_path / f"v{seed}" / "corpus.txt", 3000, seed=seed)
        tree = write_senteval_fixture(tmp_path / f"v{seed}", seed=seed) / "downstream"
        versions[seed] = (corpus.read_bytes(), (tree / _STS_FILE).read_bytes())
    assert versions[0][0] != versions[1][0] and versions[0][1] != versions[1][1]
    folder, corpus = tmp_path / "shared", tmp_path / "shared" / "corpus.txt"
    write_demo_corpus(corpus, 3000)
    write_senteval_fixture(folder)
    until = time.time() + 4.0
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(folder), str(corpus), str(k), str(until)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in (0, 1)
    ]
    reads, cut = 0, []
    while time.time() < until + 0.5:
        for path, index in ((corpus, 0), (folder / "downstream" / _STS_FILE, 1)):
            found = path.read_bytes()
            reads += 1
            if found not in (versions[0][index], versions[1][index]):
                cut.append(f"{path.name}: {len(found)} of {len(versions[0][index])} bytes")
    results = [writer.communicate(timeout=30)[0].split(" ", 2) for writer in writers]
    failed = [result[2].strip() for result in results if result[1] != "0"]
    observed(f"{reads} reads, {len(cut)} cut; writers' failures: {failed[0] if failed else 'none'}")
    assert all(writer.returncode == 0 for writer in writers)
    assert not cut and not failed, f"{len(cut)} of {reads} reads cut, e.g. {cut[:1]}; writers: {failed}"
    assert reads > 100 and all(int(result[0]) >= 3 for result in results)  # the race was run


_STS_FILE = "STS/STS15-en-test/STS.input.answers-students.txt"


@pytest.mark.fault(
    "the generated data written again where identical data lie (C1, F4)",
    "nothing is written: every file keeps its inode and mtime",
)
def test_identical_generated_data_is_left_alone(tmp_path, observed):
    write_senteval_fixture(tmp_path / "fx")
    write_demo_corpus(tmp_path / "corpus.txt", 200)
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in files}
    time.sleep(0.01)  # a rewrite now gets another mtime, even on a coarse clock
    write_senteval_fixture(tmp_path / "fx")
    write_demo_corpus(tmp_path / "corpus.txt", 200)
    after = {p: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in files}
    touched = [p.name for p in files if after[p][:2] != before[p][:2]]
    observed(f"{len(touched)} of {len(files)} files rewritten")
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == files  # no temporary file left
    assert not touched, f"{len(touched)} of {len(files)} files rewritten, e.g. {touched[:3]}"
    assert after == before
    assert len(files) == 71  # 70 task files and the counts manifest of the tree, and the corpus


AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.mark.skipif(AS_ROOT, reason="root writes into a read-only folder")
@pytest.mark.fault(
    "a read-only resources_dir holding complete generated data, then one lacking a file (F4)",
    "the complete data is used as it is; the missing file is one line naming resources_dir and the fix",
)
def test_a_read_only_resources_dir_is_used_when_complete_and_named_when_not(tmp_path, observed):
    from contrastlab.data.acquire import ResourcesNotWritable

    resources = tmp_path / "res"
    senteval, corpus = resources / "data" / "senteval-fixture", resources / "data" / "demo_corpus-50.txt"
    kwargs = {"user_copy": False, "fixture": True, "resources_dir": resources}
    prepare_senteval(senteval, downloads=resources / "downloads", **kwargs)
    made = prepare_corpus(corpus, fixture_sentences=50, **kwargs)
    made_paths = [resources, *resources.rglob("*")]
    try:
        for path in made_paths:  # as a read-only copy: no file can be written, none made
            path.chmod(0o555 if path.is_dir() else 0o444)
        assert prepare_senteval(senteval, downloads=resources / "downloads", **kwargs) == senteval
        assert prepare_corpus(corpus, fixture_sentences=50, **kwargs) == made
        with pytest.raises(ResourcesNotWritable) as refused:
            prepare_corpus(resources / "data" / "demo_corpus-60.txt", fixture_sentences=60, **kwargs)
    finally:
        for path in made_paths:
            path.chmod(0o755 if path.is_dir() else 0o644)
    message = str(refused.value)
    observed(message)
    assert "\n" not in message
    assert message == (
        f"resources_dir {resources} is not writable (Permission denied in {resources}/data), and the data "
        "this run needs must be written there; make it writable or set resources_dir to a writable folder "
        "(--config resources_dir=<folder>)"
    )
    assert sorted(resources.rglob("*")) == sorted(made_paths[1:])  # nothing made, nothing left behind


def test_only_a_file_under_resources_dir_is_named_as_resources_dir(tmp_path):
    """An unwritable file under resources_dir (EROFS too) is named as resources_dir; one elsewhere is not."""
    import errno

    from contrastlab.data.acquire import ResourcesNotWritable, writing_resources

    resources = tmp_path / "res"
    with pytest.raises(ResourcesNotWritable) as named, writing_resources(resources):
        raise OSError(errno.EROFS, "Read-only file system", str(resources / "data" / "demo_corpus-2000.txt"))
    assert str(named.value).startswith(
        f"resources_dir {resources} is not writable (Read-only file system in {resources}/data), "
    )
    lock = tmp_path / "artifacts.lock.json"
    with pytest.raises(PermissionError) as kept, writing_resources(resources):
        raise PermissionError(errno.EACCES, "Permission denied", str(lock))
    assert type(kept.value) is PermissionError and kept.value.filename == str(lock)
    with pytest.raises(PermissionError) as unknown, writing_resources(None):
        raise PermissionError(errno.EACCES, "Permission denied", str(resources / "data" / "x"))
    assert type(unknown.value) is PermissionError
