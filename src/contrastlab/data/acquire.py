"""Workflow entry points for the data rules: a user's copy, the generated fixture, or the download."""

from __future__ import annotations

from pathlib import Path

from contrastlab.data.download import (
    LOCK_FILE,
    SENTEVAL_URL,
    WIKI1M_URL,
    check_senteval,
    fetch,
    senteval_data,
    verify_senteval_checksums,
)
from contrastlab.data.fixtures import write_demo_corpus, write_senteval_fixture


def prepare_senteval(
    senteval_dir: str | Path,
    *,
    url: str = SENTEVAL_URL,
    downloads: str | Path,
    user_copy: bool,
    fixture: bool,
    lock_file: str | Path = LOCK_FILE,
) -> Path:
    """Make ``senteval_dir/downstream`` exist and pass the count checks; returns ``senteval_dir``.

    ``user_copy``: ``senteval_dir`` is the user's ``data.senteval_dir`` (checked, never modified);
    ``fixture``: the generated demo tree is written there; otherwise ``senteval.tar`` is fetched. Real
    data (a user copy or the download) must match the published files' sha256, file by file.
    """
    if user_copy:
        check_senteval(senteval_dir, canonical=True)
        return Path(senteval_dir)
    if fixture:
        write_senteval_fixture(senteval_dir)
        check_senteval(senteval_dir)
        return Path(senteval_dir)
    folder = senteval_data(None, downloads, senteval_dir, url=url, lock_file=lock_file)  # counts checked
    verify_senteval_checksums(folder)
    return folder


def prepare_corpus(
    corpus: str | Path,
    *,
    url: str = WIKI1M_URL,
    downloads: str | Path | None = None,
    user_copy: bool,
    fixture: bool,
    fixture_sentences: int = 2000,
    lock_file: str | Path = LOCK_FILE,
) -> Path:
    """Make the training corpus ``corpus`` exist (user copy, generated demo corpus, or download)."""
    del downloads  # the corpus is fetched straight to its final path (resumable via its .part file)
    corpus = Path(corpus)
    if user_copy:
        if not corpus.is_file():
            raise FileNotFoundError(f"data.wiki_path {corpus} is not a file")
        return corpus
    if fixture:
        return write_demo_corpus(corpus, fixture_sentences)
    return fetch(url, corpus, lock_file=lock_file)
