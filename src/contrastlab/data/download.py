"""Fetching the evaluation and training data (protocol.md §3-4): resumable, retried, pinned in the lock.

- :func:`fetch` downloads into ``<dest>.part`` and resumes it with an HTTP ``Range`` request after an
  interruption, retrying with exponential back-off; a tqdm bar shows progress.
- Every file is an entry of the artifacts lock (:mod:`contrastlab.artifacts`), keyed by its name: the
  first download records its sha256, size, URL and (for the Hugging Face hub) the commit the URL resolved
  to; every later one fetches that commit and must match those bytes. A mismatch raises
  :class:`LockMismatch`, one line naming the file, both digests and how to accept the new bytes; the
  bad file is moved aside to ``<dest>.corrupt``, never used.
- The publishers' own checks run before anything is recorded, so a wrong first download never enters
  the lock: an md5 (``fetch(..., md5=...)``, torchvision's CIFAR ``tgz_md5``), a content check
  (``check=``: wiki1m's 1,000,000 lines, :func:`expect_lines`), SentEval's per-file sha256.
- :func:`senteval_data` / :func:`wiki_corpus` use the user's local copies (``data.senteval_dir``,
  ``data.wiki_path``) when given, and download otherwise.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from http.client import HTTPException
from pathlib import Path

from contrastlab import artifacts as artifacts_lock
from contrastlab.artifacts import CHUNK, LOCK_FILE, ChecksumError, LockMismatch, sha256_file
from contrastlab.senteval import protocol
from contrastlab.senteval.protocol import COUNTS_MANIFEST
from contrastlab.senteval.tasks import SentEvalDataError, task_sentences

SENTEVAL_URL = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar"
WIKI1M_URL = (
    "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/wiki1m_for_simcse.txt"
)
#: Lines of the published ``wiki1m_for_simcse.txt`` (SimCSE's README: "1 million sentences sampled from
#: English Wikipedia"; 1,000,000 lines per the dataset's file page).
WIKI1M_LINES = 1_000_000
#: The corpus's entry in the artifacts lock and its file name (whatever URL it comes from).
CORPUS_NAME = "wiki1m_for_simcse.txt"
#: A Hugging Face download URL: ``<endpoint>/[datasets/]<repo>/resolve/<revision>/<file>``.
_HUB_RESOLVE = re.compile(r"^(?P<head>.+?/resolve/)(?P<revision>[^/]+)(?P<tail>/.+)$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


class DownloadError(RuntimeError):
    """A download failed after all retries."""


class ContentError(RuntimeError):
    """A download arrived whole but is not what its publisher published (e.g. a short corpus)."""


def md5_file(path: str | Path) -> str:
    """md5 of a file, for publishers that give only md5 (an integrity check, not a security one)."""
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def line_count(path: str | Path) -> int:
    """Lines of a text file as ``wc -l`` would count them, plus a last line without its newline."""
    lines, last = 0, b"\n"
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n")


def expect_lines(expected: int, what: str) -> Callable[[Path], None]:
    """A content check for :func:`fetch`: the file has exactly ``expected`` lines, else ContentError."""

    def check(path: Path) -> None:
        found = line_count(path)
        if found != expected:
            raise ContentError(f"{what} has {found:,} lines where the published file has {expected:,}")

    return check


def pin_revision(url: str, revision: str | None, *, name: str, lock_file: str | Path) -> str:
    """``url`` with a hub branch (``/resolve/main/``) replaced by the commit ``revision`` that the lock
    entry ``name`` of ``lock_file`` pins; other URLs unchanged. A URL that names another commit than the
    pin raises LockMismatch, one line saying what to do."""
    match = _HUB_RESOLVE.match(url)
    if revision is None or match is None:
        return url
    named = match["revision"]
    if _COMMIT.match(named) and named != revision:
        raise LockMismatch(
            f"{name}: {url} names commit {named}, the lock pins {revision}; point the URL at the pinned "
            f'commit (or a branch), or delete the entry "{name}" from "data" in {lock_file} and run again'
        )
    return f"{match['head']}{revision}{match['tail']}"


def _download_once(url: str, part: Path, timeout: float, progress: bool) -> str | None:
    """One attempt: resume ``part`` from its current size; raises on any transport error. Returns the
    commit the hub served it from (its ``X-Repo-Commit`` header; None for any other server)."""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "contrastlab"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as error:
        if error.code == 416 and have:  # nothing left to send: the part file is complete
            return error.headers.get("X-Repo-Commit")
        raise
    with response:
        commit = response.headers.get("X-Repo-Commit")
        if have and response.status != 206:  # the server ignored Range: start over
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length is not None else None
        from tqdm.auto import tqdm

        with (
            open(part, "ab" if have else "wb") as out,
            tqdm(
                total=total,
                initial=have,
                unit="B",
                unit_scale=True,
                desc=part.name.removesuffix(".part"),
                disable=not progress,
            ) as bar,
        ):
            for block in iter(lambda: response.read(CHUNK), b""):
                out.write(block)
                bar.update(len(block))
    got = part.stat().st_size
    if total is not None and got < total:
        raise DownloadError(f"connection closed after {got} of {total} bytes of {url}")
    return commit


def _reject(path: Path, aside: Path, message: str, error: type[Exception] = ChecksumError) -> Exception:
    """Move ``path`` aside (never used, kept for a look) and return the one-line error to raise."""
    path.replace(aside)
    return error(f"{message}; the file was moved aside to {aside}")


def _download(
    url: str, part: Path, retries: int, timeout: float, backoff: float, progress: bool
) -> str | None:
    last_error: Exception | None = None
    for attempt in range(retries + 1):
        try:
            return _download_once(url, part, timeout, progress)
        except urllib.error.HTTPError as error:
            if 400 <= error.code < 500 and error.code not in (408, 429):
                raise DownloadError(f"{url}: HTTP {error.code} {error.reason}") from None
            last_error = error
        except (urllib.error.URLError, HTTPException, OSError, DownloadError) as error:
            last_error = error
        if attempt < retries:
            time.sleep(backoff * 2**attempt)
    raise DownloadError(f"could not download {url} after {retries + 1} attempts: {last_error}")


def fetch(
    url: str,
    dest: str | Path,
    *,
    name: str | None = None,
    sha256: str | None = None,
    md5: str | None = None,
    check: Callable[[Path], None] | None = None,
    lock_file: str | Path = LOCK_FILE,
    retries: int = 5,
    timeout: float = 60.0,
    backoff: float = 2.0,
    progress: bool = True,
) -> Path:
    """Download ``url`` to ``dest`` (resumable, retried), held to the artifacts lock; returns ``dest``.

    ``name`` (default: the URL's file name) is the file's entry in ``lock_file``'s ``data``. With an
    entry, the pinned revision is fetched and the bytes must match; an existing ``dest`` that matches is
    used as it is, unless the entry came from another URL (then that URL is fetched and must give the
    same bytes: a pinned or mirrored URL of identical bytes changes nothing). Without an entry the file
    is downloaded, checked (``sha256``: a digest known beforehand; ``md5``: the publisher's; ``check``: a
    content check raising ContentError) and recorded. A file failing any check is moved aside to
    ``<dest>.corrupt`` and never recorded.
    """
    dest, lock_file = Path(dest), Path(lock_file)
    name = name or url.rstrip("/").rsplit("/", 1)[-1]
    pinned = artifacts_lock.entry(lock_file, "data", name)
    source = pin_revision(url, (pinned or {}).get("revision"), name=name, lock_file=lock_file)
    expected = (pinned or {}).get("sha256")
    if sha256 and expected and sha256.lower() != expected:
        raise artifacts_lock.mismatch(
            lock_file, "data", name, "sha256", expected, sha256.lower(), where="given"
        )
    expected = expected or (sha256.lower() if sha256 else None)
    aside = dest.with_name(dest.name + ".corrupt")
    if pinned is not None and dest.exists() and pinned.get("url") == url:
        if (found := sha256_file(dest)) != expected:
            mismatch = artifacts_lock.mismatch(
                lock_file, "data", name, "sha256", expected, found, where=str(dest)
            )
            raise _reject(dest, aside, str(mismatch), LockMismatch)
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    commit = _download(source, part, retries, timeout, backoff, progress)
    if md5 is not None and (got := md5_file(part)) != md5.lower():
        raise _reject(part, aside, f"md5 mismatch for {url}: got {got}, expected the published {md5.lower()}")
    if check is not None:
        try:
            check(part)
        except ContentError as error:
            raise _reject(part, aside, f"{name} from {url}: {error}", ContentError) from None
    digest = sha256_file(part)
    if expected is not None and digest != expected:
        mismatch = artifacts_lock.mismatch(lock_file, "data", name, "sha256", expected, digest, where=url)
        raise _reject(part, aside, str(mismatch), LockMismatch)
    revision = (pinned or {}).get("revision") or (commit if commit and _COMMIT.match(commit) else None)
    artifacts_lock.record(
        lock_file,
        "data",
        name,
        {"url": url, "revision": revision, "sha256": digest, "bytes": part.stat().st_size},
    )
    part.replace(dest)
    return dest


def _downstream_in(unpacked: Path) -> Path | None:
    """The folder of an unpacked SentEval archive that holds the task folders: the archive's top level, as
    SimCSE publishes ``senteval.tar`` (its ``download_dataset.sh`` unpacks it *inside*
    ``SentEval/data/downstream/``), or a ``downstream/`` folder, as SentEval's own layout has it."""
    found = sorted(unpacked.rglob("downstream"), key=lambda p: len(p.parts))
    if found and found[0].is_dir():
        return found[0]
    if any((unpacked / task).is_dir() for task in ("STS", "SICK")):
        return unpacked
    return None


def unpack_senteval(tar_path: str | Path, out_dir: str | Path, *, verify: bool = True) -> Path:
    """Unpack ``senteval.tar`` so that ``out_dir/downstream`` holds the tasks; returns ``out_dir``.

    The published tar has the task folders (``STS/``, ``SICK/``, ``MR/`` ...) at its top level; a tar with
    a ``downstream/`` folder is taken too. Extraction goes to a temporary folder beside ``out_dir`` and is
    moved into place at the end, so a failed unpack leaves nothing half-written. With ``verify`` every
    task is loaded (counts checked).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".unpack-") as tmp:
        unpacked = Path(tmp) / "tar"
        with tarfile.open(tar_path) as tar:
            tar.extractall(unpacked, filter="data")
        downstream = _downstream_in(unpacked)
        if downstream is None:
            raise DownloadError(
                f"{tar_path} holds neither SentEval's task folders (STS/, SICK/, MR/ ...) at its top level "
                "nor a downstream/ folder; is it senteval.tar?"
            )
        target = out_dir / "downstream"
        if target.exists():
            shutil.rmtree(target)
        os.replace(downstream, target)
    if verify:
        check_senteval(out_dir)
    return out_dir


#: sha256 and size of the 80 files of ``downstream/`` that the evaluation reads. Not hashes of the published
#: ``senteval.tar`` itself (no such hash is published): they are of unpacked copies that third-party
#: repositories committed, 79 of the 80 with two or more independent byte-identical witnesses;
#: ``SICK/SICK_test_annotated.txt`` (CRLF line ends) has one (realrun-review.md D3). A wrong pin stops
#: the data step with one line naming the file, never silently.
CANONICAL_SENTEVAL = Path(__file__).with_name("senteval_sha256.tsv")


def canonical_senteval_files() -> dict[str, tuple[int, str]]:
    """``{relative path: (bytes, sha256)}`` of the SentEval files the evaluation reads (see
    :data:`CANONICAL_SENTEVAL` for where the digests come from)."""
    rows = CANONICAL_SENTEVAL.read_text(encoding="utf-8").splitlines()[1:]
    return {path: (int(size), digest) for path, size, digest in (row.split("\t") for row in rows)}


def verify_senteval_checksums(data_dir: str | Path) -> None:
    """Every file the evaluation reads is present with its pinned size and sha256; otherwise
    ``SentEvalDataError`` naming the first file that differs (a cut-short sentence or one changed byte
    passes a row count, not this)."""
    data_dir = Path(data_dir)
    if (data_dir / "downstream" / COUNTS_MANIFEST).is_file():
        return  # a generated fixture (data.fixtures), which carries and checks its own row counts
    for relative, (size, digest) in canonical_senteval_files().items():
        path = data_dir / relative
        if not path.is_file():
            raise SentEvalDataError(
                f"{path} is missing; restore it from senteval.tar (or unset data.senteval_dir)"
            )
        if path.stat().st_size != size or sha256_file(path) != digest:
            raise SentEvalDataError(
                f"{path} differs from SentEval's published file ({path.stat().st_size} bytes, expected "
                f"{size} with sha256 {digest[:12]}...); restore the file, or unset data.senteval_dir to "
                "download it"
            )


def check_senteval(data_dir: str | Path, *, canonical: bool = False) -> None:
    """Load every task of ``data_dir/downstream``, the STS-B/SICK dev splits (model selection) too;
    raises SentEvalDataError naming a bad file. ``canonical``: also match every file's published
    sha256 (:func:`verify_senteval_checksums`); generated fixtures are checked by counts only."""
    if canonical:
        verify_senteval_checksums(data_dir)
    task_sentences(data_dir, protocol.TASKS, "test")
    task_sentences(data_dir, ("STSBenchmark", "SICKRelatedness"), "dev")


def senteval_data(
    senteval_dir: str | Path | None,
    downloads_dir: str | Path,
    out_dir: str | Path,
    *,
    url: str = SENTEVAL_URL,
    lock_file: str | Path = LOCK_FILE,
    **fetch_kwargs,
) -> Path:
    """Folder holding ``downstream/``: the user's ``data.senteval_dir`` if set (checked, not copied),
    else ``senteval.tar`` downloaded to ``downloads_dir`` and unpacked into ``out_dir``."""
    if senteval_dir:
        check_senteval(senteval_dir)
        return Path(senteval_dir)
    # The tar is fetched (or, when present, held to the lock) even when it was unpacked before, so that
    # the lock always names the bytes the unpacked folder came from.
    tar = fetch(url, Path(downloads_dir) / "senteval.tar", lock_file=lock_file, **fetch_kwargs)
    if (Path(out_dir) / "downstream").is_dir():
        check_senteval(out_dir)
        return Path(out_dir)
    return unpack_senteval(tar, out_dir)


def wiki_corpus(
    wiki_path: str | Path | None,
    downloads_dir: str | Path,
    *,
    url: str = WIKI1M_URL,
    lock_file: str | Path = LOCK_FILE,
    expected_lines: int | None = WIKI1M_LINES,
    **fetch_kwargs,
) -> Path:
    """The training corpus: the user's ``data.wiki_path`` if set, else ``wiki1m_for_simcse.txt`` fetched
    and held to its published 1,000,000 lines (``expected_lines``; None: no line check)."""
    if wiki_path:
        path = Path(wiki_path)
        if not path.is_file():
            raise FileNotFoundError(f"data.wiki_path {path} is not a file")
        return path
    check = expect_lines(expected_lines, CORPUS_NAME) if expected_lines else None
    dest = Path(downloads_dir) / CORPUS_NAME
    return fetch(url, dest, check=check, lock_file=lock_file, **fetch_kwargs)
