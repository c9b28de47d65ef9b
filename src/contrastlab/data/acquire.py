"""Workflow entry points for the data rules: a user's copy, the generated fixture, or the download.

Where the data lie (:func:`data_locations`) and what they are are kept apart on purpose: the cells
depend on what the data are, so moving a copy, re-downloading it, pinning its URL to a revision or
switching from the download to an identical copy retrains nothing, while a corpus whose content changed
retrains every cell that reads it. SentEval is held to its pinned per-file sha256, so its identity is
known before anything runs (:func:`data_identity`). The corpus is its content digest: a user's file
hashed, a download's lock entry, or, before the first download, the digest the hub gives for the file
(one HEAD request) or the download itself, resolved before the workflow builds its jobs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from contrastlab import artifacts as artifacts_lock
from contrastlab.data.download import (
    CANONICAL_SENTEVAL,
    CORPUS_NAME,
    LOCK_FILE,
    SENTEVAL_URL,
    WIKI1M_LINES,
    WIKI1M_URL,
    check_senteval,
    expect_lines,
    fetch,
    line_count,
    pin_revision,
    senteval_data,
    sha256_file,
    verify_senteval_checksums,
)
from contrastlab.data.fixtures import write_demo_corpus, write_senteval_fixture
from contrastlab.paths import Results
from contrastlab.senteval.protocol import COUNTS_MANIFEST


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
    expected_lines: int | None = WIKI1M_LINES,
    expected_sha256: str | None = None,
) -> dict[str, Any]:
    """Make the training corpus ``corpus`` exist (user copy, generated demo corpus, or download) and
    return what it is: ``{"corpus": "text", "sha256": ..., "lines": ...}``, the same for the same bytes
    wherever they came from. A download is held to the artifacts lock and to ``expected_lines`` (the
    published wiki1m's 1,000,000; a short or long file is moved aside and nothing is marked ready) and to
    ``expected_sha256`` (the digest the workflow resolved before any job, :func:`data_identity`)."""
    del downloads  # the corpus is fetched straight to its final path (resumable via its .part file)
    corpus = Path(corpus)
    if user_copy:
        if not corpus.is_file():
            raise FileNotFoundError(f"data.wiki_path {corpus} is not a file")
    elif fixture:
        write_demo_corpus(corpus, fixture_sentences)
    else:
        check = expect_lines(expected_lines, corpus.name) if expected_lines else None
        fetch(url, corpus, name=CORPUS_NAME, sha256=expected_sha256, check=check, lock_file=lock_file)
    return {"corpus": "text", "sha256": sha256_file(corpus), "lines": line_count(corpus)}


def data_marker_path(results_dir: str | Path, what: str) -> str:
    """A run's marker of the data ``what`` (``senteval``, ``corpus``, ``images-<dataset>``): the file its
    data rule writes what the data are into, and the jobs that read them depend on."""
    return Results(results_dir).state("data", f"{what}.ready.json")


def data_locations(config: Mapping[str, Any]) -> dict[str, str]:
    """Where the validated ``config``'s data lie: ``senteval_dir`` (the folder holding ``downstream/``)
    and ``corpus`` (the training text): the user's copies if set, else the generated fixture (demo) or
    the download under ``resources_dir``; ``downloads`` is where archives are fetched to, ``cache`` where
    tokenised corpora are kept."""
    data, resources = config["data"], config["resources_dir"]
    if data["senteval_dir"]:
        senteval_dir = data["senteval_dir"]
    else:
        senteval_dir = (
            f"{resources}/data/senteval-fixture" if data["fixture"] else f"{resources}/data/senteval"
        )
    if data["wiki_path"]:
        corpus = data["wiki_path"]
    else:
        # The generated corpus's file names its size: presets share resources/, and one preset's
        # corpus must never overwrite another's under a data marker that still names the old size.
        corpus = (
            f"{resources}/data/demo_corpus-{data['fixture_corpus_sentences']}.txt"
            if data["fixture"]
            else f"{resources}/data/wiki1m_for_simcse.txt"
        )
    return {
        "senteval_dir": str(senteval_dir),
        "corpus": str(corpus),
        "downloads": f"{resources}/downloads",
        "cache": f"{resources}/cache",  # tokenised corpora, keyed by content
        # Vision track: the folder holding cifar-10-batches-py/ or cifar-100-python/ (a job of one dataset
        # gets that dataset's own, contrastlab.workflow.job.job_data_locations).
        "images": images_root(config, None),
        "lock": str(config.get("artifacts_lock") or LOCK_FILE),
    }


def check_lock(config: Mapping[str, Any]) -> None:
    """Raise LockMismatch (one line) where ``config`` asks for another revision than the artifacts lock
    pins: a backbone's ``revision``, or a data URL naming another commit. Read from the lock alone (no
    network), so the workflow stops before any job, and no finished folder is replaced by a failing one."""
    lock_file = config.get("artifacts_lock") or LOCK_FILE
    lock = artifacts_lock.read_lock(lock_file)
    for alias, spec in config["backbones"].items():
        if "hf_id" in spec and "path" not in spec:
            artifacts_lock.pinned_backbone(
                lock_file, spec["hf_id"], spec.get("revision"), where=f"backbones.{alias}.revision"
            )
    data = config["data"]
    for name, url in (("senteval.tar", data["senteval_url"]), (CORPUS_NAME, data["wiki_url"])):
        pinned = lock["data"].get(name)
        if pinned is not None:
            pin_revision(url, pinned.get("revision"), name=name, lock_file=lock_file)


def user_images_root(config: Mapping[str, Any], dataset: str | None) -> str | None:
    """The user's copy of ``dataset`` (``data.cifar_root``: one folder for both, or one per dataset), or
    None where it is to be downloaded."""
    root = config["data"].get("cifar_root")
    if isinstance(root, Mapping):
        return root.get(dataset) if dataset else None
    return root or None


def images_root(config: Mapping[str, Any], dataset: str | None) -> str:
    """The folder ``dataset``'s images are read from: the user's copy, else the download's folder."""
    return str(user_images_root(config, dataset) or f"{config['resources_dir']}/data/cifar")


def data_identity(config: Mapping[str, Any], what: str, *, resolve: bool = False) -> dict[str, Any]:
    """What the ``what`` data of ``config`` are, independent of where they lie: the params of its data rule
    and of every cell that reads them.

    ``senteval``: the published SentEval files (a user's copy is held to their sha256, the download
    too), one identity whatever their folder. ``corpus``: its content digest, so the same bytes from a
    download, a user's file, a mirror or a URL pinned to a commit are one identity: a user's file is its
    sha256 (hashed here, a fraction of a second for wiki1m), a download the digest its lock entry pins;
    a download not pinned yet is, with ``resolve`` (the workflow's main process), resolved before any job
    (:func:`resolve_download_digest`), else ``None``; the fixture is its generator settings. A user's
    SentEval copy is verified here, so a wrong ``data.senteval_dir`` stops the workflow before any job
    instead of failing inside one.
    """
    data = config["data"]
    if what == "senteval":
        if data["fixture"] and not data["senteval_dir"]:
            return {"senteval": "fixture"}
        if data["senteval_dir"]:
            if not (Path(data["senteval_dir"]) / "downstream").is_dir():
                raise FileNotFoundError(
                    f"data.senteval_dir {data['senteval_dir']} holds no downstream/ folder; point it at the "
                    "folder that holds downstream/, or unset it to download the data"
                )

            if (Path(data["senteval_dir"]) / "downstream" / COUNTS_MANIFEST).is_file():
                return {"senteval": "fixture"}  # a generated fixture is the fixture, wherever it lies
            verify_senteval_checksums(data["senteval_dir"])
        return {"senteval": "published", "files_sha256": sha256_file(CANONICAL_SENTEVAL)}
    if what == "corpus":
        if data["wiki_path"]:
            corpus = Path(data["wiki_path"])
            if not corpus.is_file():
                raise FileNotFoundError(f"data.wiki_path {corpus} is not a file; fix the path or unset it")
            return {"corpus": "text", "sha256": sha256_file(corpus)}
        if data["fixture"]:
            return {"corpus": "fixture", "sentences": data["fixture_corpus_sentences"]}
        lock_file = config.get("artifacts_lock") or LOCK_FILE
        pinned = artifacts_lock.entry(lock_file, "data", CORPUS_NAME)
        if pinned is not None:
            return {"corpus": "text", "sha256": pinned["sha256"]}
        digest = resolve_download_digest(config) if resolve else None
        return {"corpus": "text", "sha256": digest}
    raise ValueError(f"unknown data kind {what!r}; expected senteval or corpus")


def resolve_download_digest(config: Mapping[str, Any], *, timeout: float = 30.0) -> str | None:
    """The sha256 of the corpus a download will get, before any job: the hub's ``X-Linked-Etag`` (the
    sha256 of a file it keeps in git-lfs, as wiki1m) from one HEAD request; from another server, the
    download itself (into its place, checked and pinned as the corpus job would). The corpus job then
    holds the bytes to this digest. Where neither works (offline, a dry run without network), one line
    says so and None is returned: the corpus job fetches (or fails) in the run itself."""
    import urllib.error
    import urllib.request

    data = config["data"]
    url = data["wiki_url"]
    try:
        request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "contrastlab"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            linked = (response.headers.get("X-Linked-Etag") or "").strip('"').lower()
        if len(linked) == 64 and all(c in "0123456789abcdef" for c in linked):
            return linked
        check = expect_lines(data["wiki_lines"], CORPUS_NAME) if data["wiki_lines"] else None
        lock_file = config.get("artifacts_lock") or LOCK_FILE
        corpus = data_locations(config)["corpus"]
        return sha256_file(fetch(url, corpus, name=CORPUS_NAME, check=check, lock_file=lock_file, retries=0))
    except (OSError, ValueError, RuntimeError) as error:
        message = " ".join(str(error).split())
        print(
            f"contrastlab note: the corpus's digest is not pinned yet and {url} could not tell it ({message})"
        )
        return None


def image_data_identity(config: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    """What the images of ``dataset`` are, independent of where they lie (see :func:`data_identity`).

    CIFAR is held to the published archive's files (torchvision's md5 of every batch file), so a user's
    copy (``data.cifar_root``, checked here so that a wrong path stops the workflow before any job) and
    the download are one identity; digits are the copy bundled with scikit-learn.
    """
    if dataset == "digits":
        return {"images": "digits", "source": "scikit-learn load_digits"}
    if dataset not in CIFAR_ARCHIVE_MD5:
        raise ValueError(
            f"unknown image dataset {dataset!r}; expected digits, {', '.join(CIFAR_ARCHIVE_MD5)}"
        )
    root = user_images_root(config, dataset)
    custom = config["data"].get("cifar_sources", {}).get(dataset, {})
    if root:
        from contrastlab.data import images  # imports torch: only when there is a copy to check

        images.check_local_copy(dataset, root, source=images.configured_source(config, dataset))
    if custom.get("archive_md5"):  # a re-packed archive: another dataset to the workflow
        return {"images": dataset, "source": "repacked", "archive_md5": custom["archive_md5"]}
    return {"images": dataset, "source": "published", "archive_md5": CIFAR_ARCHIVE_MD5[dataset]}


#: md5 of the published CIFAR archives (torchvision's CIFAR10/CIFAR100 ``tgz_md5``; a test keeps them equal),
#: here so that the workflow computes the data identity without importing torch.
CIFAR_ARCHIVE_MD5 = {
    "cifar10": "c58f30108f718f92721af3b95e74349a",
    "cifar100": "eb9058c3a382ffc7106e4002c42a8d85",
}
