"""Tokenised-corpus cache: built once, keyed by tokenizer + max_length + content, padded correctly."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from contrastlab.paths import REPO_ROOT
from contrastlab.training import corpus as corpus_module
from contrastlab.training.corpus import load_tokenized_corpus, read_sentences


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_dir)


def test_cache_is_reused_and_keyed(tmp_path, corpus, tokenizer):
    first, path = load_tokenized_corpus(corpus, tokenizer, 32, tmp_path)
    stamp = path.stat().st_mtime_ns
    again, same = load_tokenized_corpus(corpus, tokenizer, 32, tmp_path)
    assert same == path and path.stat().st_mtime_ns == stamp and np.array_equal(first.ids, again.ids)
    shorter, other = load_tokenized_corpus(corpus, tokenizer, 8, tmp_path)
    assert other != path and shorter.key != first.key
    changed = tmp_path / "changed.txt"
    changed.write_text(corpus.read_text() + "one more line\n")
    assert load_tokenized_corpus(changed, tokenizer, 32, tmp_path)[0].key != first.key


def test_batch_matches_the_tokenizer_with_dynamic_padding(tmp_path, corpus, tokenizer):
    sentences = read_sentences(corpus)[:5] + ["a much longer sentence " * 20]
    path = tmp_path / "c.txt"
    path.write_text("\n".join(sentences) + "\n")
    cached, _ = load_tokenized_corpus(path, tokenizer, 12, tmp_path)
    rows = np.array([5, 0, 3])
    ids, mask = cached.batch(rows, tokenizer.pad_token_id)
    want = tokenizer(
        [sentences[i] for i in rows], truncation=True, max_length=12, padding=True, return_tensors="pt"
    )
    assert ids.tolist() == want["input_ids"].tolist() and mask.tolist() == want["attention_mask"].tolist()


def test_a_file_system_without_flock_still_builds_the_cache_once(tmp_path, corpus, tokenizer, monkeypatch):
    """Where ``flock`` fails with ENOSYS (Lustre, some NFS) a soft lock still tokenises the cache once."""

    def no_flock(*args, **kwargs):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    built = []
    tokenize = corpus_module.tokenize_sentences

    def slow_tokenize(*args, **kwargs):
        built.append(threading.get_ident())
        time.sleep(0.5)  # long enough for the other job to arrive while this one holds the lock
        return tokenize(*args, **kwargs)

    monkeypatch.setattr(corpus_module, "tokenize_sentences", slow_tokenize)
    results = []

    def job():
        results.append(load_tokenized_corpus(corpus, tokenizer, 32, tmp_path))

    jobs = [threading.Thread(target=job) for _ in range(2)]
    for thread in jobs:
        thread.start()
    for thread in jobs:
        thread.join(timeout=120)
    assert len(results) == 2 and len(built) == 1, built
    assert np.array_equal(results[0][0].ids, results[1][0].ids) and results[0][1] == results[1][1]
    assert not list(tmp_path.glob(".*.lock"))  # the soft lock is gone once released


@pytest.mark.fault(
    "a truncated tokenised-corpus cache (half its bytes)",
    "the cache is rebuilt, with one line naming it; the ids are those of a fresh tokenisation",
)
def test_an_unreadable_cache_is_rebuilt_with_one_line(tmp_path, corpus, tokenizer, capsys, observed):
    """Reliability K5: a cut cache file is derived data: rebuilt, with one line saying so."""
    fresh, path = load_tokenized_corpus(corpus, tokenizer, 32, tmp_path)
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    capsys.readouterr()
    again, same = load_tokenized_corpus(corpus, tokenizer, 32, tmp_path)
    lines = capsys.readouterr().err.splitlines()
    observed(lines[0] if lines else "no line")
    assert same == path and path.read_bytes() == whole  # rebuilt whole, in place
    assert np.array_equal(again.ids, fresh.ids) and np.array_equal(again.offsets, fresh.offsets)
    assert len(lines) == 1 and lines[0].startswith(
        f"contrastlab: tokenised-corpus cache {path} cannot be read"
    )
    assert "BadZipFile" in lines[0] and lines[0].endswith("rebuilding it from the corpus")
    load_tokenized_corpus(corpus, tokenizer, 32, tmp_path)  # a readable cache: read, not rebuilt, no line
    assert capsys.readouterr().err == ""


def _train_jobs(tmp_path, corpus, marker, tiny_bert, senteval_dir, cut: str):
    """scripts/train.py run as the workflow's train job of a 2-step cell with the corpus ``marker``, in
    forks of one process: on ``corpus`` as it is (into ``model``; its sha256s of the corpus counted into
    ``hashed.txt``), then, after ``corpus`` is rewritten to ``cut``, into ``model2``."""
    driver = textwrap.dedent(
        f"""
        import os
        import runpy
        import sys
        from pathlib import Path
        from types import SimpleNamespace
        import yaml
        import contrastlab.artifacts as artifacts  # before any module takes sha256_file by name
        corpus, real = Path({str(corpus)!r}), artifacts.sha256_file
        hashed = Path({str(tmp_path / "hashed.txt")!r})
        def counted(path, *args, **kwargs):
            if Path(path).resolve() == corpus.resolve():
                hashed.write_text(str(int(hashed.read_text() or 0) + 1 if hashed.exists() else 1))
            return real(path, *args, **kwargs)
        artifacts.sha256_file = counted
        config = yaml.safe_load(open({str(REPO_ROOT / "config" / "demo.yaml")!r}))
        config["resources_dir"] = {str(tmp_path / "res")!r}
        config["results_dir"] = {str(tmp_path / "results")!r}
        config["data"].update(senteval_dir={str(senteval_dir)!r}, wiki_path=str(corpus))
        def job(model):
            sm = SimpleNamespace(
                config=config,
                rule="train",
                wildcards={{"experiment": "nie2023", "backbone": "tiny-bert", "method": "cl", "seed": "42"}},
                log=[{str(tmp_path / "train.log")!r}],
                threads=1,
                params=SimpleNamespace(
                    settings={{"loss": "infonce", "max_steps": 2, "batch_size": 8}},
                    state_dir=model + "-state",
                    point=None,
                ),
                input=SimpleNamespace(backbone={str(tiny_bert)!r}, corpus_ready={str(marker)!r}),
                output=SimpleNamespace(model=model, log_jsonl=model + ".jsonl"),
            )
            runpy.run_path({str(REPO_ROOT / "scripts" / "train.py")!r}, init_globals={{"snakemake": sm}})
        import contrastlab.training.cells, contrastlab.workflow.job  # imported once: each job a fork
        sys.stdout.flush(), sys.stderr.flush()
        if (pid := os.fork()) == 0:  # one job per process, as a warm starter runs them
            code = 1
            try:
                job({str(tmp_path / "model")!r})
                code = 0
            finally:
                os._exit(code)
        os.waitpid(pid, 0)
        corpus.write_text({cut!r})
        hashed = hashed.with_name("hashed-cut.txt")  # the first job's count stays as it is
        job({str(tmp_path / "model2")!r})
        """
    )
    return subprocess.run(
        [sys.executable, "-c", driver], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )


CORPUS = "".join(f"sentence number {i} of the corpus .\n" for i in range(300))


@pytest.mark.fault(
    "the corpus changed after its corpus.ready.json was written (C1)",
    "the train job refuses in one line naming the corpus and the marker; nothing is trained",
)
def test_a_train_job_hashes_its_corpus_once_and_refuses_one_changed_since_its_marker(
    tmp_path, tiny_bert, senteval_dir, observed
):
    """One digest serves the marker check and the cache key; a corpus changed since is refused in one line."""
    corpus, marker = tmp_path / "corpus.txt", tmp_path / "results" / "state" / "data" / "corpus.ready.json"
    recorded, cut = hashlib.sha256(CORPUS.encode()).hexdigest(), CORPUS[: len(CORPUS) // 2]
    marker.parent.mkdir(parents=True)
    marker.write_text(json.dumps({"corpus": "text", "lines": 300, "sha256": recorded}))
    corpus.write_text(CORPUS)
    done = _train_jobs(tmp_path, corpus, marker, tiny_bert, senteval_dir, cut)
    assert (tmp_path / "model" / "train_summary.json").is_file(), done.stderr[-2000:]
    assert (tmp_path / "hashed.txt").read_text() == "1"
    found = hashlib.sha256(cut.encode()).hexdigest()
    lines = [line for line in done.stderr.splitlines() if line.startswith("contrastlab:")]
    observed(
        lines[0] if lines else f"exit {done.returncode}, no line; trained: {(tmp_path / 'model2').exists()}"
    )
    assert done.returncode == 1, f"exit {done.returncode}; trained: {(tmp_path / 'model2').exists()}"
    assert lines == [
        f"contrastlab: rule train nie2023/tiny-bert/cl/seed42: CorpusChangedError: the corpus {corpus} "
        f"changed since {marker} was written (sha256 {found[:16]}, recorded {recorded[:16]}); rerun the "
        f"corpus rule (snakemake --forcerun corpus) and then this cell (log: {tmp_path / 'train.log'})"
    ]
    assert "Traceback" not in done.stderr and not (tmp_path / "model2").exists()
