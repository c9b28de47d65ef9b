"""Fetching the evaluation and training data (protocol.md §3-4): through the libraries, pinned in the lock.

- :func:`fetch` downloads a Hugging Face hub file (``.../resolve/<revision>/<file>``) with
  ``hf_hub_download`` at the pinned commit (resumed and retried by the library, kept in its cache, so
  ``HF_HUB_OFFLINE=1`` serves a pinned file), and any other URL with pooch (transport and server errors
  retried; a client error such as 404 is final). The file reaches ``<dest>.part`` whole or not at all,
  and ``dest`` only after every check.
- Every file is an entry of the artifacts lock (:mod:`contrastlab.artifacts`), keyed by its name: the
  first download records its sha256, size, URL and hub commit; every later one fetches that commit and
  must match (else :class:`LockMismatch`, one line with both digests and how to accept the new bytes;
  the bad file moved aside to ``<dest>.corrupt``).
- Content checks run before the digest is compared or recorded, so only bytes that passed them are
  pinned: the publisher's md5 (torchvision's CIFAR ``tgz_md5``) and a ``check=`` (wiki1m's 1,000,000
  lines; ``senteval.tar`` unpacks safely, in its layout, every task with its row counts and published
  sha256). A download failing one is moved aside to ``<dest>.corrupt`` (the libraries would delete it)
  and fetched anew next run; one passing them but differing from the lock is kept as ``<dest>.unpinned``
  and the line says which entry to delete to pin it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple
from urllib.parse import unquote

from contrastlab import artifacts as artifacts_lock
from contrastlab.artifacts import CHUNK, LOCK_FILE, ChecksumError, LockMismatch, sha256_file
from contrastlab.paths import atomic_write
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
#: The same URL read as :class:`HubFile`'s parts (the endpoint is the scheme and host).
_HUB_FILE = re.compile(
    r"^(?P<endpoint>https?://[^/]+)/(?P<kind>datasets/|spaces/)?(?P<repo>[^/]+(?:/[^/]+)?)"
    r"/resolve/(?P<revision>[^/]+)/(?P<file>.+)$"
)


class DownloadError(RuntimeError):
    """A download failed after all retries."""


class ContentError(RuntimeError):
    """A download arrived whole but is not what its publisher published (e.g. a short corpus)."""


def md5_file(path: str | Path) -> str:
    """md5 of a file, for publishers that give only md5 (an integrity check, not a security one)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, lambda: hashlib.md5(usedforsecurity=False)).hexdigest()


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


class HubFile(NamedTuple):
    """A file on a Hugging Face hub, as its download URL names it:
    ``<endpoint>/[datasets/|spaces/]<repo_id>/resolve/<revision>/<filename>``."""

    endpoint: str
    repo_type: str
    repo_id: str
    revision: str
    filename: str

    @classmethod
    def of(cls, url: str) -> HubFile | None:
        """The hub file ``url`` downloads, or None for a URL of no hub's shape (a plain URL)."""
        match = _HUB_FILE.match(url)
        if match is None:
            return None
        kind = (match["kind"] or "models/").removesuffix("s/")
        return cls(match["endpoint"], kind, match["repo"], unquote(match["revision"]), unquote(match["file"]))


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


#: The OS's reason a connection failed, as the libraries quote it: ``[Errno -2] Name or service not known``.
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")


def failed_because(error: BaseException) -> str:
    """Why a download failed, in one short sentence: a connection that could not be made (no network, an
    unknown host), wherever the libraries' layers of text and chained errors hold it, as ``could not
    connect (<the OS's reason>)``; anything else as its message, without the hub client's "Please check
    your connection" advice (the caller names the fix)."""
    chain: list[BaseException] = []
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or error.__context__
    for one in chain:
        if found := _ERRNO.search(str(one)):
            return f"could not connect ({found[1].strip()})"
    return re.sub(r"\.? Please check your .*$", "", _one_line(chain[0]))


def _hub_download(hub: HubFile, timeout: float, progress: bool) -> tuple[Path, str | None]:
    """The file through ``huggingface_hub.hf_hub_download`` at ``hub.revision``, into the Hugging Face
    cache (resumed and retried by the library; offline, ``HF_HUB_OFFLINE=1``, from the cache alone).
    Returns its path in the cache and the commit it was served from."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError
    from tqdm.auto import tqdm

    class Bar(tqdm):  # the library opens its own bars; progress=False keeps them closed
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "disable": kwargs.get("disable") or not progress})

    try:
        cached = Path(
            hf_hub_download(
                hub.repo_id,
                hub.filename,
                repo_type=hub.repo_type,
                revision=hub.revision,
                endpoint=hub.endpoint,
                etag_timeout=timeout,
                tqdm_class=Bar,
            )
        )
    except (OSError, EntryNotFoundError, ValueError, hub_transport_error()) as error:
        raise DownloadError(
            f"could not download {hub.filename} of {hub.repo_id}@{hub.revision}: {failed_because(error)}"
        ) from None
    # The cache keeps a file at snapshots/<commit>/<filename>: the folder names the commit it came from.
    commit = cached.parents[len(PurePosixPath(hub.filename).parts) - 1].name
    return cached, commit


def hub_transport_error() -> type[Exception]:
    """The base class of the hub client's transport errors (connection, timeout), which it raises once its
    own retries are spent."""
    import httpx2

    return httpx2.HTTPError


def _no_retry_on_client_error(downloader: Callable) -> Callable:
    """pooch's HTTP ``downloader``, except that a client error (HTTP 4xx but 408/429) is final: pooch
    retries every ``requests`` error, and a missing file does not appear by asking again."""
    import requests

    def download(url: str, output_file: Any, store: Any, check_only: bool = False) -> Any:
        try:
            return downloader(url, output_file, store, check_only)
        except requests.HTTPError as error:
            status, reason = error.response.status_code, error.response.reason
            if 400 <= status < 500 and status not in (408, 429):
                raise DownloadError(f"{url}: HTTP {status} {reason}") from None
            raise

    return download


def _plain_download(url: str, part: Path, retries: int, timeout: float, progress: bool) -> None:
    """``url`` to ``part`` with pooch: streamed to a temporary file beside it and moved into place whole,
    retried ``retries`` times after a transport error or a server error (pooch waits 1 s, 2 s, ... up to
    10 s between tries). The checks are :func:`fetch`'s, after the download."""
    import pooch
    import requests

    part.unlink(missing_ok=True)  # pooch would take a file already there for the download
    store = pooch.create(
        path=part.parent,
        base_url="",
        registry={part.name: None},
        urls={part.name: url},
        retry_if_failed=retries,
    )
    http = pooch.HTTPDownloader(progressbar=progress, timeout=timeout, headers={"User-Agent": "contrastlab"})
    try:
        store.fetch(part.name, downloader=_no_retry_on_client_error(http))
    except requests.RequestException as error:
        raise DownloadError(
            f"could not download {url} after {retries + 1} attempts: {failed_because(error)}"
        ) from None


def _reject(path: Path, aside: Path, message: str, error: type[Exception] = ChecksumError) -> Exception:
    """Move ``path`` aside (never used, kept for a look) and return the one-line error to raise."""
    path.replace(aside)
    return error(f"{message}; the file was moved aside to {aside}")


def _passed_but_unpinned(
    part: Path, dest: Path, url: str, name: str, lock_file: Path, pinned: dict[str, Any], digest: str
) -> LockMismatch:
    """The one-line error for a download that passed every content check but is not the bytes the lock
    pins: kept aside as ``<dest>.unpinned`` (not called corrupt, not used), saying which digest is which
    and which entry to delete to pin the download."""
    keep = dest.with_name(dest.name + ".unpinned")
    size = part.stat().st_size
    part.replace(keep)
    return LockMismatch(
        f"{name}: the download from {url} (sha256 {digest}, {size:,} bytes) passed its content checks "
        f"but is not the sha256 {pinned['sha256']} ({pinned.get('bytes', '?'):,} bytes) pinned in "
        f"{lock_file}, whose bytes are not here to check; to pin the download, delete the entry "
        f'"{name}" from "data" in {lock_file} and run again (kept aside, unused, at {keep})'
    )


def _download(url: str, part: Path, retries: int, timeout: float, progress: bool) -> str | None:
    """``url`` into ``part`` (whole, or not at all): a hub file through huggingface_hub (copied out of its
    cache), any other URL through pooch. Returns the hub commit the file came from (None for a plain URL)."""
    hub = HubFile.of(url)
    if hub is None:
        _plain_download(url, part, retries, timeout, progress)
        return None
    cached, commit = _hub_download(hub, timeout, progress)
    # A copy, not a link: a file edited in place under resources/ must never reach the cache's blob.
    with atomic_write(part) as tmp:
        shutil.copyfile(cached, tmp)
    return commit


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
    progress: bool = True,
    local_copy: str | None = None,
) -> Path:
    """Download ``url`` to ``dest``, held to the artifacts lock (see the module docstring); returns ``dest``.

    ``name`` (default: the URL's file name) is the entry in ``lock_file``'s ``data``. An existing ``dest``
    matching the entry is used as it is, unless the entry came from another URL (then that URL must give
    the same bytes). ``md5`` is the publisher's, ``check`` a content check raising ContentError, ``sha256``
    a digest known beforehand. ``retries`` and ``timeout`` are pooch's for a plain URL; a hub file gets
    huggingface_hub's own retries, ``timeout`` for its metadata request. ``local_copy``: the config key
    that gives a copy instead (e.g. ``data.wiki_path``), named as the fix when the download fails.
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
    try:
        commit = _download(source, part, retries, timeout, progress)
    except DownloadError as error:
        fix = f"; to use a copy you have instead, set {local_copy}" if local_copy else ""
        raise DownloadError(f"{error}{fix}") from None
    _publisher_checks(part, dest, aside, url, md5, check)
    digest = sha256_file(part)
    if pinned is not None and digest != expected and (md5 is not None or check is not None):
        raise _passed_but_unpinned(part, dest, url, name, lock_file, pinned, digest)
    if expected is not None and digest != expected:
        mismatch = artifacts_lock.mismatch(lock_file, "data", name, "sha256", expected, digest, where=url)
        raise _reject(part, aside, str(mismatch), LockMismatch)
    revision = (pinned or {}).get("revision") or (commit if commit and _COMMIT.match(commit) else None)
    entry = {"url": url, "revision": revision, "sha256": digest, "bytes": part.stat().st_size}
    artifacts_lock.record(lock_file, "data", name, entry)
    part.replace(dest)
    return dest


def _publisher_checks(
    part: Path, dest: Path, aside: Path, url: str, md5: str | None, check: Callable[[Path], None] | None
) -> None:
    """:func:`fetch`'s checks before anything is compared with the lock or recorded: the publisher's
    ``md5``, and the content ``check``; a file failing one is moved aside and the one-line error, naming
    the file, its URL and the fix, raised."""
    if md5 is not None and (got := md5_file(part)) != md5.lower():
        raise _reject(part, aside, f"md5 mismatch for {url}: got {got}, expected the published {md5.lower()}")
    if check is not None:
        try:
            check(part)
        except ContentError as error:
            part.replace(aside)
            raise ContentError(
                f"{dest} downloaded from {url}: {error}; it was moved aside to {aside} and nothing was "
                "pinned; run again to download it anew, and if the same comes back, fix the URL"
            ) from None


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


def _archive_problem(tar_path: Path, error: Exception) -> str:
    """What a file that :mod:`tarfile` could not unpack is, in words: a member refused by the ``data``
    filter (outside its folder, a link out), not a tar at all (an error page served in its place), or a
    cut-short or damaged tar."""
    size = tar_path.stat().st_size
    if isinstance(error, tarfile.FilterError):
        return f"it holds an unsafe member ({type(error).__name__}: {_one_line(error)})"
    if not tarfile.is_tarfile(tar_path):
        return f"it is not a tar archive ({size:,} bytes; an error page?)"
    return f"it is a truncated or damaged tar archive ({size:,} bytes; {_one_line(error)})"


def _unpack_checked(tar_path: Path, out_dir: Path) -> Path:
    """``tar_path`` unpacked into ``out_dir/downstream`` through a temporary folder inside ``out_dir``,
    checked there (every task loaded, its counts and published sha256) before it goes into place, so a
    failed unpack or check leaves nothing behind. A file tarfile cannot unpack,
    or a tar of another layout, raises ContentError saying what the file is (its caller names it)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".unpack-") as tmp:
        unpacked, staged = Path(tmp) / "tar", Path(tmp) / "checked"
        try:
            with tarfile.open(tar_path) as tar:
                tar.extractall(unpacked, filter="data")
        except (tarfile.TarError, EOFError, zlib.error) as error:
            raise ContentError(_archive_problem(tar_path, error)) from None
        downstream = _downstream_in(unpacked)
        if downstream is None:
            raise ContentError(
                "it holds neither SentEval's task folders (STS/, SICK/, MR/ ...) at its top level nor a "
                "downstream/ folder; is it senteval.tar?"
            )
        staged.mkdir()
        os.replace(downstream, staged / "downstream")
        check_senteval(staged, canonical=True)
        replace_dir(staged / "downstream", out_dir / "downstream")
    return out_dir


def replace_dir(source: Path, target: Path) -> None:
    """Put the folder ``source`` in the place of ``target`` (removed first when there)."""
    if target.exists():
        shutil.rmtree(target)
    os.replace(source, target)


def _senteval_check(staged: Path) -> Callable[[Path], None]:
    """:func:`fetch`'s content check of a downloaded ``senteval.tar``: it unpacks safely into
    ``staged/downstream``, in SentEval's layout, and every task passes its row counts and published
    sha256; otherwise ContentError saying what failed."""

    def check(part: Path) -> None:
        try:
            _unpack_checked(part, staged)
        except SentEvalDataError as error:
            raise ContentError(f"its tasks fail their checks ({_one_line(error)})") from None

    return check


def _unpack_pinned(tar: Path, out_dir: Path, lock_file: str | Path) -> Path:
    """Unpack ``tar``, downloaded and pinned by an earlier run that stopped before unpacking it, checked
    as a fresh download is. One that fails was pinned without that check (an older version pinned
    first): it is moved aside, never reused, and the line names the pin to delete."""
    try:
        return _unpack_checked(tar, out_dir)
    except (ContentError, SentEvalDataError) as error:
        digest, aside = sha256_file(tar), tar.with_name(tar.name + ".corrupt")
        tar.replace(aside)
        raise LockMismatch(
            f"{tar} (pinned as sha256 {digest} in {lock_file}) fails its check: {_one_line(error)}; the "
            f'pin names bytes that never passed it: delete the entry "{tar.name}" from "data" in '
            f"{lock_file} and run again to download and pin a checked copy (the file was moved aside "
            f"to {aside})"
        ) from None


#: sha256 and size of the 80 files of ``downstream/`` the evaluation reads (no hash of ``senteval.tar`` is
#: published): of unpacked copies third-party repositories committed, 79 of them with two or more
#: byte-identical witnesses, ``SICK/SICK_test_annotated.txt`` (CRLF) with one.
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
    downloads_dir: str | Path,
    out_dir: str | Path,
    *,
    url: str = SENTEVAL_URL,
    lock_file: str | Path = LOCK_FILE,
    **fetch_kwargs,
) -> Path:
    """Folder holding ``downstream/``: ``senteval.tar`` downloaded to ``downloads_dir`` (the lock's entry
    ``senteval.tar``, whatever the URL's file name) and unpacked into ``out_dir``; every file is checked
    against its published sha256 once. A download is pinned only after it has unpacked and every task
    has passed its counts and published sha256 (:func:`_senteval_check`); its folder goes into place
    after it is pinned."""
    out_dir, dest = Path(out_dir), Path(downloads_dir) / "senteval.tar"
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".download-") as staged:
        # The tar is fetched (or, when present, held to the lock) even when it was unpacked before, so
        # that the lock always names the bytes the unpacked folder came from.
        check = _senteval_check(Path(staged))
        tar = fetch(url, dest, name=dest.name, lock_file=lock_file, check=check, **fetch_kwargs)
        if (Path(staged) / "downstream").is_dir():  # downloaded now: checked and pinned
            replace_dir(Path(staged) / "downstream", out_dir / "downstream")
            return out_dir
    if (out_dir / "downstream").is_dir():  # unpacked by an earlier run: its counts, then its sha256
        check_senteval(out_dir)
        verify_senteval_checksums(out_dir)
        return out_dir
    return _unpack_pinned(tar, out_dir, lock_file)
