"""Fetching the evaluation and training data (protocol.md §3-4): resumable, retried, sha256-locked.

- :func:`fetch` downloads into ``<dest>.part`` and resumes it with an HTTP ``Range`` request after an
  interruption, retrying with exponential back-off; a tqdm bar shows progress.
- Digests live in a committed lock file (``data.lock.json`` at the repository root), keyed by URL: the
  first download records the sha256, every later one must match it. A mismatch raises
  :class:`ChecksumError` and the bad file is moved aside to ``<dest>.corrupt`` — never used.
- A publisher's md5 (``fetch(..., md5=...)``, e.g. torchvision's CIFAR ``tgz_md5``) is checked before
  the sha256 is recorded, so a wrong first download never enters the lock file.
- :func:`senteval_data` / :func:`wiki_corpus` use the user's local copies (``data.senteval_dir``,
  ``data.wiki_path``) when given, and download otherwise.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from http.client import HTTPException
from pathlib import Path

from contrastlab.paths import REPO_ROOT, atomic_write

SENTEVAL_URL = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar"
WIKI1M_URL = (
    "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/wiki1m_for_simcse.txt"
)
LOCK_FILE = REPO_ROOT / "data.lock.json"
CHUNK = 1 << 20


class DownloadError(RuntimeError):
    """A download failed after all retries."""


class ChecksumError(RuntimeError):
    """A downloaded or existing file does not have the recorded sha256."""


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def md5_file(path: str | Path) -> str:
    """md5 of a file, for publishers that give only md5 (an integrity check, not a security one)."""
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def read_lock(lock_file: str | Path) -> dict[str, dict]:
    lock_file = Path(lock_file)
    return json.loads(lock_file.read_text(encoding="utf-8")) if lock_file.exists() else {}


def _record(lock_file: Path, url: str, digest: str, size: int) -> None:
    lock = read_lock(lock_file)
    lock[url] = {"sha256": digest, "bytes": size}
    with atomic_write(lock_file) as tmp:
        tmp.write_text(json.dumps(dict(sorted(lock.items())), indent=2) + "\n", encoding="utf-8")


def _expected_digest(url: str, sha256: str | None, lock_file: Path) -> str | None:
    locked = read_lock(lock_file).get(url, {}).get("sha256")
    if sha256 and locked and sha256.lower() != locked.lower():
        raise ChecksumError(f"sha256 given for {url} ({sha256}) differs from {lock_file} ({locked})")
    chosen = sha256 or locked
    return chosen.lower() if chosen else None


def _verify(
    path: Path, url: str, expected: str | None, lock_file: Path, aside: Path, md5: str | None = None
) -> None:
    if md5 is not None and (got := md5_file(path)) != md5.lower():
        path.replace(aside)
        raise ChecksumError(
            f"md5 mismatch for {url}: got {got}, expected the published {md5.lower()}; the file was "
            f"moved aside to {aside}; delete it and download again"
        )
    digest = sha256_file(path)
    if expected is None:
        _record(lock_file, url, digest, path.stat().st_size)
    elif digest != expected:
        path.replace(aside)
        raise ChecksumError(
            f"sha256 mismatch for {url}: got {digest}, expected {expected} (from {lock_file}); "
            f"the file was moved aside to {aside}; delete it and download again, or fix the lock entry"
        )


def _download_once(url: str, part: Path, timeout: float, progress: bool) -> None:
    """One attempt: resume ``part`` from its current size; raises on any transport error."""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "contrastlab"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as error:
        if error.code == 416 and have:  # nothing left to send: the part file is complete
            return
        raise
    with response:
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


def fetch(
    url: str,
    dest: str | Path,
    *,
    sha256: str | None = None,
    md5: str | None = None,
    lock_file: str | Path = LOCK_FILE,
    retries: int = 5,
    timeout: float = 60.0,
    backoff: float = 2.0,
    progress: bool = True,
) -> Path:
    """Download ``url`` to ``dest`` (resumable, retried) and check its sha256; returns ``dest``.

    The expected digest is ``sha256`` or the entry for ``url`` in ``lock_file``; with neither, the
    digest of the download is recorded there. ``md5``, when given, must match as well (checked first,
    so a wrong file is never recorded). An existing ``dest`` is verified, not re-downloaded.
    """
    dest, lock_file = Path(dest), Path(lock_file)
    expected = _expected_digest(url, sha256, lock_file)
    aside = dest.with_name(dest.name + ".corrupt")
    if dest.exists():
        _verify(dest, url, expected, lock_file, aside, md5)
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    last_error: Exception | None = None
    for attempt in range(retries + 1):
        try:
            _download_once(url, part, timeout, progress)
            break
        except urllib.error.HTTPError as error:
            if 400 <= error.code < 500 and error.code not in (408, 429):
                raise DownloadError(f"{url}: HTTP {error.code} {error.reason}") from None
            last_error = error
        except (urllib.error.URLError, HTTPException, OSError, DownloadError) as error:
            last_error = error
        if attempt < retries:
            time.sleep(backoff * 2**attempt)
    else:
        raise DownloadError(f"could not download {url} after {retries + 1} attempts: {last_error}")
    _verify(part, url, expected, lock_file, aside, md5)
    part.replace(dest)
    return dest


def unpack_senteval(tar_path: str | Path, out_dir: str | Path, *, verify: bool = True) -> Path:
    """Unpack ``senteval.tar`` so that ``out_dir/downstream`` holds the tasks; returns ``out_dir``.

    Extraction goes to a temporary folder beside ``out_dir`` and is moved into place at the end, so a
    failed unpack leaves nothing half-written. With ``verify`` every task is loaded (counts checked).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".unpack-") as tmp:
        with tarfile.open(tar_path) as tar:
            tar.extractall(tmp, filter="data")
        found = sorted(Path(tmp).rglob("downstream"), key=lambda p: len(p.parts))
        if not found or not found[0].is_dir():
            raise DownloadError(f"{tar_path} has no downstream/ folder; is it senteval.tar?")
        target = out_dir / "downstream"
        if target.exists():
            shutil.rmtree(target)
        os.replace(found[0], target)
    if verify:
        check_senteval(out_dir)
    return out_dir


#: sha256 and size of every file of the published senteval.tar's downstream/ (SimCSE's distribution).
CANONICAL_SENTEVAL = Path(__file__).with_name("senteval_sha256.tsv")


def canonical_senteval_files() -> dict[str, tuple[int, str]]:
    """``{relative path: (bytes, sha256)}`` of the published SentEval data."""
    rows = CANONICAL_SENTEVAL.read_text(encoding="utf-8").splitlines()[1:]
    return {path: (int(size), digest) for path, size, digest in (row.split("\t") for row in rows)}


def verify_senteval_checksums(data_dir: str | Path) -> None:
    """Every file of the published data is present with its published size and sha256; otherwise
    ``SentEvalDataError`` naming the first file that differs (a cut-short sentence or one changed byte
    passes a row count, not this)."""
    from contrastlab.senteval.protocol import COUNTS_MANIFEST
    from contrastlab.senteval.tasks import SentEvalDataError

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
                f"{path} differs from the published senteval.tar ({path.stat().st_size} bytes, expected "
                f"{size} with sha256 {digest[:12]}...); restore the file, or unset data.senteval_dir to "
                "download it"
            )


def check_senteval(data_dir: str | Path, *, canonical: bool = False) -> None:
    """Load every task of ``data_dir/downstream``, the STS-B/SICK dev splits (model selection) too;
    raises SentEvalDataError naming a bad file. ``canonical``: also match every file's published
    sha256 (:func:`verify_senteval_checksums`); generated fixtures are checked by counts only."""
    from contrastlab.senteval import protocol
    from contrastlab.senteval.tasks import task_sentences

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
    if (Path(out_dir) / "downstream").is_dir():
        check_senteval(out_dir)
        return Path(out_dir)
    tar = fetch(url, Path(downloads_dir) / "senteval.tar", lock_file=lock_file, **fetch_kwargs)
    return unpack_senteval(tar, out_dir)


def wiki_corpus(
    wiki_path: str | Path | None,
    downloads_dir: str | Path,
    *,
    url: str = WIKI1M_URL,
    lock_file: str | Path = LOCK_FILE,
    **fetch_kwargs,
) -> Path:
    """The training corpus: the user's ``data.wiki_path`` if set, else ``wiki1m_for_simcse.txt`` fetched."""
    if wiki_path:
        path = Path(wiki_path)
        if not path.is_file():
            raise FileNotFoundError(f"data.wiki_path {path} is not a file")
        return path
    return fetch(url, Path(downloads_dir) / "wiki1m_for_simcse.txt", lock_file=lock_file, **fetch_kwargs)
