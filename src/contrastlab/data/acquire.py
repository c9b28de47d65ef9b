"""Workflow entry points for the data rules: a user's copy, the generated fixture, or the download.

Where the data lie (:meth:`contrastlab.config.data.DataConfig.locations`) and what they are are kept
apart: the cells depend on what the data are, so moving a copy, re-downloading it, pinning its URL or
switching to an identical copy retrains nothing, while a changed corpus retrains every cell that reads
it. SentEval's identity is its pinned per-file sha256 (:func:`senteval_identity`); the corpus's its
content digest: a user's file hashed, a download's lock entry, or, before the first download, the hub's
digest (one HEAD request) or the download itself, resolved before the workflow builds its jobs.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrastlab import artifacts as artifacts_lock
from contrastlab.data.corpus_check import check_corpus
from contrastlab.data.download import (
    CANONICAL_SENTEVAL,
    CORPUS_NAME,
    LOCK_FILE,
    SENTEVAL_URL,
    WIKI1M_LINES,
    WIKI1M_URL,
    HubFile,
    check_senteval,
    expect_lines,
    fetch,
    hub_transport_error,
    line_count,
    pin_revision,
    senteval_data,
    sha256_file,
    verify_senteval_checksums,
)
from contrastlab.data.fixtures import write_demo_corpus, write_senteval_fixture
from contrastlab.paths import Results
from contrastlab.senteval.protocol import COUNTS_MANIFEST


class ResourcesNotWritable(OSError):
    """The data a run needs must be written under ``resources_dir``, which cannot be written there: the
    message names the folder and the fix."""


#: The errors of a folder or file that cannot be written to (a read-only mount, a folder's mode).
UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


@contextlib.contextmanager
def writing_resources(resources_dir: str | Path | None) -> Iterator[None]:
    """Turn a file under ``resources_dir`` that cannot be written into one :class:`ResourcesNotWritable`
    line naming ``resources_dir``, the folder and the fix; other errors, and a file elsewhere (the
    artifacts lock), pass unchanged, as everything does with ``resources_dir`` None."""
    try:
        yield
    except OSError as error:
        if resources_dir is None or error.errno not in UNWRITABLE or not error.filename:
            raise
        folder = Path(os.fsdecode(error.filename)).parent
        if not folder.resolve().is_relative_to(Path(resources_dir).resolve()):
            raise
        raise ResourcesNotWritable(
            f"resources_dir {resources_dir} is not writable ({error.strerror} in {folder}), and the data "
            "this run needs must be written there; make it writable or set resources_dir to a writable "
            "folder (--config resources_dir=<folder>)"
        ) from error


def prepare_senteval(
    senteval_dir: str | Path,
    *,
    url: str = SENTEVAL_URL,
    downloads: str | Path,
    user_copy: bool,
    fixture: bool,
    lock_file: str | Path = LOCK_FILE,
    resources_dir: str | Path | None = None,
) -> Path:
    """Make ``senteval_dir/downstream`` exist and pass the count checks; returns ``senteval_dir``.

    ``user_copy``: ``senteval_dir`` is the user's ``data.senteval_dir`` (checked, never modified);
    ``fixture``: the generated demo tree is written there (files already holding it are left alone, so a
    read-only copy of a complete tree serves); otherwise ``senteval.tar`` is fetched. Real data (a user
    copy or the download) must match the published files' sha256, file by file. ``resources_dir``: the
    folder the config puts the data under, named by the error when it cannot be written
    (:func:`writing_resources`).
    """
    if user_copy:
        check_senteval(senteval_dir, canonical=True)
        return Path(senteval_dir)
    with writing_resources(resources_dir):
        if fixture:
            write_senteval_fixture(senteval_dir)
            check_senteval(senteval_dir)
            return Path(senteval_dir)
        copy = "data.senteval_dir (the folder holding downstream/)"
        return senteval_data(downloads, senteval_dir, url=url, lock_file=lock_file, local_copy=copy)


def prepare_corpus(
    corpus: str | Path,
    *,
    url: str = WIKI1M_URL,
    downloads: str | Path | None = None,
    user_copy: bool,
    fixture: bool,
    fixture_sentences: int = 2000,
    lock_file: str | Path = LOCK_FILE,
    expected_lines: int | None = WIKI1M_LINES,
    expected_sha256: str | None = None,
    resources_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Make the training corpus ``corpus`` exist (user copy, generated demo corpus, or download) and
    return what it is: ``{"corpus": "text", "sha256": ..., "lines": ...}``, the same for the same bytes
    wherever they came from. A download is held to the artifacts lock and to ``expected_lines`` (the
    published wiki1m's 1,000,000; a short or long file is moved aside and nothing is marked ready) and to
    ``expected_sha256`` (the digest the workflow resolved before any job, :func:`corpus_identity`). The
    generated corpus is left alone where it lies already; ``resources_dir`` as :func:`prepare_senteval`."""
    del downloads  # the corpus is fetched straight to its final path (resumable via its .part file)
    corpus = Path(corpus)
    if user_copy:
        if not corpus.is_file():
            raise FileNotFoundError(f"data.wiki_path {corpus} is not a file")
    elif fixture:
        with writing_resources(resources_dir):
            write_demo_corpus(corpus, fixture_sentences)
    else:
        check = expect_lines(expected_lines, corpus.name) if expected_lines else None
        with writing_resources(resources_dir):
            fetch(
                url,
                corpus,
                name=CORPUS_NAME,
                sha256=expected_sha256,
                check=check,
                lock_file=lock_file,
                local_copy="data.wiki_path (your wiki1m_for_simcse.txt)",
            )
    return {"corpus": "text", "sha256": sha256_file(corpus), "lines": line_count(corpus)}


def data_marker_path(results_dir: str | Path, what: str) -> str:
    """A run's marker of the data ``what`` (``senteval``, ``corpus``, ``images-<dataset>``): the file its
    data rule writes what the data are into, and the jobs that read them depend on."""
    return Results(results_dir).state("data", f"{what}.ready.json")


@dataclass(frozen=True)
class CorpusSource:
    """Where the training corpus comes from (:meth:`contrastlab.config.data.DataConfig.corpus_source`
    reads it from the config): the user's file ``wiki_path``, else the generated fixture of
    ``fixture_sentences`` sentences (None: no fixture), else the download of ``url`` to ``dest``, held to
    ``lines`` lines (None: no line check) and to the artifacts lock ``lock_file``."""

    wiki_path: str | None
    fixture_sentences: int | None
    url: str
    dest: str
    lines: int | None
    lock_file: str


def check_data_pins(lock_file: str | Path, urls: Mapping[str, str]) -> None:
    """Raise LockMismatch (one line) where a data URL (``{lock entry: url}``) names another commit than
    ``lock_file`` pins. Read from the lock alone (no network), so the workflow stops before any job."""
    pinned = artifacts_lock.read_lock(lock_file)["data"]
    for name, url in urls.items():
        if name in pinned:
            pin_revision(url, pinned[name].get("revision"), name=name, lock_file=lock_file)


def senteval_identity(senteval_dir: str | None, *, fixture: bool) -> dict[str, Any]:
    """What the SentEval data are, whatever their folder: the published files (a user's copy
    ``senteval_dir`` is verified here against their sha256, so a wrong copy stops the workflow before any
    job instead of failing inside one; the download is held to them too), or the generated fixture."""
    if fixture and not senteval_dir:
        return {"senteval": "fixture"}
    if senteval_dir:
        if not (Path(senteval_dir) / "downstream").is_dir():
            raise FileNotFoundError(
                f"data.senteval_dir {senteval_dir} holds no downstream/ folder; point it at the "
                "folder that holds downstream/, or unset it to download the data"
            )
        if (Path(senteval_dir) / "downstream" / COUNTS_MANIFEST).is_file():
            return {"senteval": "fixture"}  # a generated fixture is the fixture, wherever it lies
        verify_senteval_checksums(senteval_dir)
    return {"senteval": "published", "files_sha256": sha256_file(CANONICAL_SENTEVAL)}


def corpus_identity(source: CorpusSource, *, resolve: bool = False) -> dict[str, Any]:
    """What the training corpus is: its content digest, so the same bytes from a download, a user's file,
    a mirror or a URL pinned to a commit are one identity. A user's file is its sha256 (hashed here, a
    fraction of a second for wiki1m), a download the digest its lock entry pins; a download not pinned
    yet is, with ``resolve`` (the workflow's main process), resolved before any job
    (:func:`resolve_download_digest`), else ``None``; the fixture is its generator settings."""
    if source.wiki_path:
        corpus = Path(source.wiki_path)
        if not corpus.is_file():
            raise FileNotFoundError(f"data.wiki_path {corpus} is not a file; fix the path or unset it")
        # Hashed and checked in one pass (UTF-8, not empty, not blank): refused here, before any job.
        return {"corpus": "text", "sha256": check_corpus(corpus)}
    if source.fixture_sentences is not None:
        return {"corpus": "fixture", "sentences": source.fixture_sentences}
    pinned = artifacts_lock.entry(source.lock_file, "data", CORPUS_NAME)
    if pinned is not None:
        return {"corpus": "text", "sha256": pinned["sha256"]}
    return {"corpus": "text", "sha256": resolve_download_digest(source) if resolve else None}


def resolve_download_digest(source: CorpusSource, *, timeout: float = 30.0) -> str | None:
    """The sha256 of the corpus a download will get, before any job: for a hub file, the digest the hub
    gives for a file it keeps in git-lfs, as wiki1m (``huggingface_hub.get_hf_file_metadata``, one HEAD
    request); from another server, the download itself (into its place, checked and pinned as the corpus
    job would). The corpus job then holds the bytes to this digest. Where neither works (offline, a dry
    run without network), one line says so and None is returned: the corpus job fetches (or fails) in the
    run itself."""
    try:
        if HubFile.of(source.url) is not None:
            from huggingface_hub import get_hf_file_metadata

            etag = (get_hf_file_metadata(source.url, timeout=timeout).etag or "").lower()
            if len(etag) == 64 and all(c in "0123456789abcdef" for c in etag):
                return etag
        check = expect_lines(source.lines, CORPUS_NAME) if source.lines else None
        fetched = fetch(
            source.url, source.dest, name=CORPUS_NAME, check=check, lock_file=source.lock_file, retries=0
        )
        return sha256_file(fetched)
    except (OSError, ValueError, RuntimeError, hub_transport_error()) as error:
        message = " ".join(str(error).split())
        print(
            f"contrastlab note: the corpus's digest is not pinned yet and {source.url} could not tell it "
            f"({message})"
        )
        return None


def image_identity(
    dataset: str, *, user_copy: str | None, custom: Mapping[str, Any] | None
) -> dict[str, Any]:
    """What the images of ``dataset`` are, independent of where they lie (see :func:`corpus_identity`).

    CIFAR is held to the published archive's files (torchvision's md5 of every batch file), so a user's
    copy (the folder ``user_copy``, checked here so that a wrong path stops the workflow before any job)
    and the download are one identity; ``custom`` is the dataset's ``data.cifar_sources`` entry (a mirror,
    or a re-packed archive: another dataset to the workflow). Digits are the copy bundled with
    scikit-learn.
    """
    if dataset == "digits":
        return {"images": "digits", "source": "scikit-learn load_digits"}
    if dataset not in CIFAR_ARCHIVE_MD5:
        raise ValueError(
            f"unknown image dataset {dataset!r}; expected digits, {', '.join(CIFAR_ARCHIVE_MD5)}"
        )
    custom = custom or {}
    if user_copy:
        from contrastlab.data import images  # imports torch: only when there is a copy to check

        images.check_local_copy(dataset, user_copy, source=images.cifar_source(dataset, custom))
    if custom.get("archive_md5"):  # a re-packed archive: another dataset to the workflow
        return {"images": dataset, "source": "repacked", "archive_md5": custom["archive_md5"]}
    return {"images": dataset, "source": "published", "archive_md5": CIFAR_ARCHIVE_MD5[dataset]}


#: md5 of the published CIFAR archives (torchvision's CIFAR10/CIFAR100 ``tgz_md5``; a test keeps them equal),
#: here so that the workflow computes the data identity without importing torch.
CIFAR_ARCHIVE_MD5 = {
    "cifar10": "c58f30108f718f92721af3b95e74349a",
    "cifar100": "eb9058c3a382ffc7106e4002c42a8d85",
}
