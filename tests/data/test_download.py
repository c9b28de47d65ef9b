"""Offline tests of the download rules against a local HTTP server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hub_standin import hf_hub_fixture, sync_client_constants  # noqa: F401 (fixture hf_hub)
from publisher_formats import senteval_tar

from contrastlab.data import download
from contrastlab.data.acquire import prepare_corpus, prepare_senteval
from contrastlab.data.fixtures import write_senteval_fixture
from contrastlab.data.images import prepare_images

PAYLOAD = bytes(range(256)) * 4000  # ~1 MB
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    """Serves ``files`` whole (the clients under test never ask for a range; the Range header a request
    carries is logged)."""

    files: dict[str, bytes] = {}
    # path -> a fault served once: "500", "drop" (headers, no body), "cut" (half the body), "stall"
    faults: dict[str, str] = {}
    log: list[tuple[str, str | None]] = []

    def log_message(self, *args):  # keep test output quiet
        pass

    def do_GET(self):
        body = self.files.get(self.path)
        self.log.append((self.path, self.headers.get("Range")))
        if body is None:
            self.send_error(404)
            return
        fault = self.faults.pop(self.path, None)
        if fault == "500":
            self.send_error(500)
            return
        if fault == "stall":
            time.sleep(3)  # longer than the client's timeout
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if fault in ("drop", "cut"):
            self.wfile.write(body[: len(body) // 2] if fault == "cut" else b"")
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


@pytest.fixture
def server():
    _Handler.files, _Handler.log, _Handler.faults = {}, [], {}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", _Handler
    httpd.shutdown()
    httpd.server_close()


def _fetch(url, dest, lock, **kw):
    return download.fetch(url, dest, lock_file=lock, retries=kw.pop("retries", 3), progress=False, **kw)


def test_first_download_records_digest_in_lock(server, tmp_path):
    base, handler = server
    handler.files["/a.bin"] = PAYLOAD
    lock = tmp_path / "artifacts.lock.json"
    out = _fetch(f"{base}/a.bin", tmp_path / "a.bin", lock)
    assert out.read_bytes() == PAYLOAD
    entry = json.loads(lock.read_text())["data"]["a.bin"]
    assert entry == {"url": f"{base}/a.bin", "revision": None, "sha256": DIGEST, "bytes": len(PAYLOAD)}
    assert not (tmp_path / "a.bin.part").exists()
    # an existing file held to its entry is used without a request
    handler.log.clear()
    assert _fetch(f"{base}/a.bin", tmp_path / "a.bin", lock).read_bytes() == PAYLOAD
    assert handler.log == []


def test_a_hub_file_is_pinned_to_its_commit_and_fetched_at_it(hf_hub, tmp_path, monkeypatch):
    """A hub file is pinned to its commit, fetched at it after the branch moves, offline from the cache."""
    commit = hf_hub.add_dataset_file("org/x", "w.txt", PAYLOAD)
    lock = tmp_path / "lock.json"
    url = f"{hf_hub.endpoint}/datasets/org/x/resolve/main/w.txt"
    _fetch(url, tmp_path / "w.txt", lock)
    assert json.loads(lock.read_text())["data"]["w.txt"]["revision"] == commit
    assert ("GET", "/datasets/org/x/resolve/main/w.txt") in hf_hub.requests  # through the library's client
    (tmp_path / "w.txt").unlink()
    hf_hub.add_dataset_file("org/x", "w.txt", b"main moved on")
    hf_hub.requests.clear()
    assert _fetch(url, tmp_path / "w.txt", lock).read_bytes() == PAYLOAD
    assert not [path for _, path in hf_hub.requests if "/resolve/main/" in path], hf_hub.requests
    # pinning the URL to the same commit is the same file: fetched (another URL) and found identical
    pinned = f"{hf_hub.endpoint}/datasets/org/x/resolve/{commit}/w.txt"
    assert _fetch(pinned, tmp_path / "w.txt", lock, name="w.txt").read_bytes() == PAYLOAD
    # offline, the pinned commit comes from the Hugging Face cache, with no request
    (tmp_path / "w.txt").unlink()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    sync_client_constants(monkeypatch)
    hf_hub.requests.clear()
    assert _fetch(url, tmp_path / "w.txt", lock).read_bytes() == PAYLOAD and hf_hub.requests == []
    # a URL naming another commit than the pin stops with one line saying what to do
    other = "0" * 40
    with pytest.raises(download.LockMismatch, match=f"names commit {other}.*delete the entry"):
        _fetch(f"{hf_hub.endpoint}/datasets/org/x/resolve/{other}/w.txt", tmp_path / "w.txt", lock)


def test_a_hub_file_that_is_not_there_stops_in_one_line(hf_hub, tmp_path):
    hf_hub.add_dataset_file("org/x", "w.txt", PAYLOAD)
    with pytest.raises(download.DownloadError, match=r"could not download nope.txt of org/x@main: ") as error:
        _fetch(f"{hf_hub.endpoint}/datasets/org/x/resolve/main/nope.txt", tmp_path / "n", tmp_path / "l.json")
    assert "\n" not in str(error.value)
    assert not (tmp_path / "n").exists() and not (tmp_path / "l.json").exists()


def test_hub_urls_are_read_as_the_library_names_them():
    read = download.HubFile.of
    assert read(
        "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar"
    ) == ("https://huggingface.co", "dataset", "princeton-nlp/datasets-for-simcse", "main", "senteval.tar")
    assert read("http://127.0.0.1:8/bert-base-uncased/resolve/refs%2Fpr%2F1/sub/config.json") == (
        "http://127.0.0.1:8",
        "model",
        "bert-base-uncased",
        "refs/pr/1",
        "sub/config.json",
    )
    assert read("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz") is None


@pytest.mark.fault(
    "download: a corpus of the wrong length", "one line naming both counts; kept aside, never locked"
)
def test_a_short_corpus_is_kept_aside_and_never_locked(server, tmp_path, observed):
    base, handler = server
    handler.files["/wiki1m_for_simcse.txt"] = b"one .\ntwo .\nthree .\n"
    lock, corpus = tmp_path / "lock.json", tmp_path / "wiki1m_for_simcse.txt"
    source = {"url": f"{base}/wiki1m_for_simcse.txt", "user_copy": False, "fixture": False, "lock_file": lock}
    with pytest.raises(download.ContentError) as error:
        prepare_corpus(corpus, **source)
    message = str(error.value)
    assert "has 3 lines where the published file has 1,000,000" in message and "\n" not in message
    assert not corpus.exists()
    assert (tmp_path / "wiki1m_for_simcse.txt.corrupt").exists() and not lock.exists()
    # with the expected count it is taken, and a last line without its newline counts
    handler.files["/wiki1m_for_simcse.txt"] = b"one .\ntwo .\nthree ."
    assert prepare_corpus(corpus, **source, expected_lines=3)["lines"] == 3
    assert corpus.read_bytes().endswith(b"three .")
    assert "wiki1m_for_simcse.txt" in json.loads(lock.read_text())["data"]
    observed(message)


def test_a_leftover_part_file_is_never_taken_for_the_download(server, tmp_path):
    """A half .part file left by an older version is replaced by the whole download (pooch would take it)."""
    base, handler = server
    handler.files["/p.bin"] = PAYLOAD
    (tmp_path / "p.bin.part").write_bytes(PAYLOAD[:1000])
    out = _fetch(f"{base}/p.bin", tmp_path / "p.bin", tmp_path / "lock.json", sha256=DIGEST)
    assert out.read_bytes() == PAYLOAD and not (tmp_path / "p.bin.part").exists()
    assert handler.log == [("/p.bin", None)]


@pytest.mark.fault(
    "download: server fault served once", "retried by pooch (the whole file again), sha256-verified"
)
@pytest.mark.parametrize(
    "fault",
    ["cut", "500", "drop", "stall"],
    ids=["truncated mid-file", "HTTP 500", "connection dropped", "stalled"],
)
def test_transient_download_faults_are_retried_and_verified(server, tmp_path, fault, observed):
    base, handler = server
    handler.files["/f.bin"] = PAYLOAD
    handler.faults["/f.bin"] = fault
    out = _fetch(f"{base}/f.bin", tmp_path / "f.bin", tmp_path / "lock.json", sha256=DIGEST, timeout=1)
    assert out.read_bytes() == PAYLOAD and not (tmp_path / "f.bin.part").exists()
    requests = [r for p, r in handler.log if p == "/f.bin"]
    assert len(requests) == 2, requests
    observed(f"{len(requests)} requests ({requests[1] or 'full'} on retry), sha256 ok")


@pytest.mark.fault("download: persistent checksum mismatch", "stops with one error; bad file kept aside")
def test_corrupt_file_is_moved_aside_and_never_used(server, tmp_path):
    base, handler = server
    url = f"{base}/c.bin"
    lock = tmp_path / "lock.json"
    entry = {"url": url, "revision": None, "sha256": DIGEST, "bytes": len(PAYLOAD)}
    lock.write_text(json.dumps({"format": 1, "data": {"c.bin": entry}}))
    handler.files["/c.bin"] = PAYLOAD[:-1] + b"x"
    with pytest.raises(download.LockMismatch, match=r"c.bin: sha256 \w+ .* differs from .*delete the entry"):
        _fetch(url, tmp_path / "c.bin", lock)
    assert not (tmp_path / "c.bin").exists()
    assert (tmp_path / "c.bin.corrupt").exists()
    # an existing final file that no longer matches is also moved aside
    (tmp_path / "c.bin").write_bytes(b"tampered")
    with pytest.raises(download.ChecksumError):
        _fetch(url, tmp_path / "c.bin", lock)
    assert not (tmp_path / "c.bin").exists()


def test_gives_up_after_retries_and_404_is_not_retried(server, tmp_path):
    base, handler = server
    with pytest.raises(download.DownloadError, match="HTTP 404"):
        _fetch(f"{base}/missing", tmp_path / "m", tmp_path / "lock.json")
    assert len(handler.log) == 1
    with pytest.raises(download.DownloadError, match="after 2 attempts"):
        _fetch("http://127.0.0.1:9/nothing", tmp_path / "n", tmp_path / "lock.json", retries=1, timeout=2)


def test_an_offline_download_says_so_in_a_sentence_and_names_the_copy_to_set(tmp_path):
    """No connection: the reason in a few words (not the libraries' dump of chained errors, nor the hub
    client's own advice), then the config key that gives a copy instead."""
    with pytest.raises(download.DownloadError) as error:
        _fetch(
            "http://127.0.0.1:9/c.tgz", tmp_path / "c", tmp_path / "l.json", retries=0, local_copy="data.x"
        )
    assert str(error.value) == (
        "could not download http://127.0.0.1:9/c.tgz after 1 attempts: could not connect (Connection "
        "refused); to use a copy you have instead, set data.x"
    )
    hub_url = "https://huggingface.co/datasets/org/absent/resolve/main/w.txt"  # HF_HUB_OFFLINE=1 (conftest)
    with pytest.raises(download.DownloadError) as error:
        _fetch(hub_url, tmp_path / "w", tmp_path / "l.json", local_copy="data.x")
    assert "Please check" not in str(error.value) and str(error.value).endswith(
        "; to use a copy you have instead, set data.x"
    )


@pytest.mark.parametrize(
    "prepare, key",
    [
        (
            lambda d: prepare_senteval(
                d / "se", downloads=d, user_copy=False, fixture=False, lock_file=d / "l"
            ),
            "data.senteval_dir (the folder holding downstream/)",
        ),
        (
            lambda d: prepare_corpus(d / "w.txt", user_copy=False, fixture=False, lock_file=d / "l"),
            "data.wiki_path (your wiki1m_for_simcse.txt)",
        ),
        (
            lambda d: prepare_images("cifar10", d / "i", download=True, lock_file=d / "l", progress=False),
            "data.cifar_root (a folder holding cifar-10-batches-py/)",
        ),
    ],
    ids=["senteval", "corpus", "cifar"],
)
def test_a_failed_data_download_names_the_key_of_a_local_copy(monkeypatch, tmp_path, prepare, key):
    def offline(url, *args):
        raise download.DownloadError(
            f"could not download {url}: could not connect (Name or service not known)"
        )

    monkeypatch.setattr(download, "_download", offline)
    with pytest.raises(
        download.DownloadError, match=r"could not connect \(Name or service not known\)"
    ) as error:
        prepare(tmp_path)
    assert str(error.value).endswith(f"; to use a copy you have instead, set {key}")


@pytest.mark.parametrize("published", [True, False], ids=["task folders at the top", "downstream folder"])
def test_senteval_download_and_unpack(server, tmp_path, published):
    base, handler = server
    write_senteval_fixture(tmp_path / "src")
    handler.files["/senteval.tar"] = senteval_tar(tmp_path / "src" / "downstream", published=published)
    with tarfile.open(fileobj=io.BytesIO(handler.files["/senteval.tar"])) as tar:
        top = {name.split("/")[0] for name in tar.getnames()}
    assert ("STS" in top) == published and ("downstream" in top) != published
    folder = _senteval(f"{base}/senteval.tar", tmp_path, tmp_path / "lock.json")
    assert (folder / "downstream" / "MR" / "rt-polarity.pos").exists()
    assert (folder / "downstream" / "STS").is_dir() and not (folder / "downstream" / "downstream").exists()
    assert "senteval.tar" in json.loads((tmp_path / "lock.json").read_text())["data"]


def _other_layout(src):
    (src / "other").mkdir(parents=True)
    (src / "other" / "x.txt").write_text("x")
    return senteval_tar(src / "other")


def _truncated_task(src):
    write_senteval_fixture(src)
    pos = src / "downstream" / "MR" / "rt-polarity.pos"
    pos.write_text("".join(pos.read_text().splitlines(keepends=True)[:-3]))
    return senteval_tar(src / "downstream")


@pytest.mark.parametrize(
    ("tar_of", "problem"),
    [
        (_other_layout, r"neither SentEval's task folders .* is it senteval.tar\?"),
        (_truncated_task, "rt-polarity.pos"),
    ],
)
def test_a_tar_of_something_else_or_truncated_data_is_refused_in_one_line(server, tmp_path, tar_of, problem):
    base, handler = server
    handler.files["/senteval.tar"] = tar_of(tmp_path / "src")
    with pytest.raises(download.ContentError, match=problem):
        _senteval(f"{base}/senteval.tar", tmp_path, tmp_path / "lock.json")


# --- Issue 63 item 2 (reliability A6, A8, A9): the lock pins only bytes that passed their checks ----------
ERROR_PAGE = b"<html><body>503 Service Unavailable</body></html>\n"


def _senteval_tars(tmp_path) -> tuple[bytes, bytes]:
    """The published-layout replica of senteval.tar, and its first half (cut inside a member)."""
    write_senteval_fixture(tmp_path / "src")
    good = senteval_tar(tmp_path / "src" / "downstream")
    return good, good[: len(good) // 2]


def _senteval(url, tmp_path, lock):
    return download.senteval_data(
        tmp_path / "dl", tmp_path / "senteval", url=url, lock_file=lock, progress=False
    )


def _lock_entry(lock, name="senteval.tar"):
    return json.loads(lock.read_text())["data"].get(name) if lock.exists() else None


@pytest.mark.fault(
    "download: senteval.tar that is not a tar (truncated, or an HTML error page served with 200)",
    "one line naming the file, its URL and the fix; the file set aside; nothing pinned or unpacked",
)
@pytest.mark.parametrize("served", ["truncated tar", "HTML error page"])
def test_a_download_that_does_not_unpack_is_set_aside_and_never_pinned(server, tmp_path, served, observed):
    base, handler = server
    good, truncated = _senteval_tars(tmp_path)
    handler.files["/senteval.tar"] = truncated if served == "truncated tar" else ERROR_PAGE
    url, lock = f"{base}/senteval.tar", tmp_path / "lock.json"
    with pytest.raises(download.ContentError) as error:
        _senteval(url, tmp_path, lock)
    message = str(error.value)
    dest = tmp_path / "dl" / "senteval.tar"
    assert "\n" not in message and f"{dest} downloaded from {url}" in message, message
    if served == "HTML error page":
        assert f"is not a tar archive ({len(ERROR_PAGE)} bytes; an error page?)" in message, message
    else:
        assert f"is a truncated or damaged tar archive ({len(truncated):,} bytes" in message, message
    assert f"moved aside to {dest}.corrupt" in message and "run again" in message, message
    assert _lock_entry(lock) is None and not dest.exists()
    assert not (tmp_path / "dl" / "senteval.tar.part").exists()
    assert (tmp_path / "dl" / "senteval.tar.corrupt").read_bytes() == handler.files["/senteval.tar"]
    assert not (tmp_path / "senteval" / "downstream").exists()
    observed(message)


@pytest.mark.fault(
    "download: same URL serves a truncated senteval.tar, then the good one",
    "the bad one set aside, never pinned; the next run downloads again, accepts and pins the good bytes",
)
def test_a_bad_first_download_never_blocks_the_good_one(server, tmp_path, observed):
    base, handler = server
    good, truncated = _senteval_tars(tmp_path)
    url, lock = f"{base}/flaky.tar", tmp_path / "lock.json"
    handler.files["/flaky.tar"] = truncated
    with pytest.raises(download.ContentError):
        _senteval(url, tmp_path, lock)
    assert _lock_entry(lock) is None
    handler.files["/flaky.tar"] = good
    handler.log.clear()
    folder = _senteval(url, tmp_path, lock)
    assert handler.log == [("/flaky.tar", None)]  # downloaded again, not the set-aside bytes reused
    assert (folder / "downstream" / "MR" / "rt-polarity.pos").is_file()
    assert _lock_entry(lock)["sha256"] == hashlib.sha256(good).hexdigest()
    assert (tmp_path / "dl" / "senteval.tar").read_bytes() == good
    observed(f"second run pinned sha256 {_lock_entry(lock)['sha256'][:12]}… (the good bytes)")


@pytest.mark.fault(
    "artifacts lock pins a truncated senteval.tar (written before the checks existed); then the good bytes",
    "the pinned file is set aside as failing its check; the good re-download is not called corrupt: one "
    "line says which digest passed the checks and which entry to delete",
)
def test_a_bad_pin_never_calls_a_good_download_corrupt(server, tmp_path, observed):
    base, handler = server
    good, truncated = _senteval_tars(tmp_path)
    url, lock = f"{base}/flaky.tar", tmp_path / "lock.json"
    bad_digest, good_digest = hashlib.sha256(truncated).hexdigest(), hashlib.sha256(good).hexdigest()
    entry = {"url": url, "revision": None, "sha256": bad_digest, "bytes": len(truncated)}
    lock.write_text(json.dumps({"format": 1, "data": {"senteval.tar": entry}}))
    dest = tmp_path / "dl" / "senteval.tar"
    dest.parent.mkdir()
    dest.write_bytes(truncated)
    handler.files["/flaky.tar"] = good
    # the pinned local file fails its check: said so, set aside, never unpacked
    with pytest.raises(download.LockMismatch) as error:
        _senteval(url, tmp_path, lock)
    first = str(error.value)
    assert "\n" not in first and f"{dest} (pinned as sha256 {bad_digest}" in first, first
    assert f'delete the entry "senteval.tar" from "data" in {lock}' in first, first
    assert not dest.exists() and (tmp_path / "dl" / "senteval.tar.corrupt").read_bytes() == truncated
    # the good bytes downloaded next pass every check: not called corrupt, and the line says which is which
    with pytest.raises(download.LockMismatch) as error:
        _senteval(url, tmp_path, lock)
    second = str(error.value)
    assert "\n" not in second and "corrupt" not in second, second
    assert f"the download from {url} (sha256 {good_digest}" in second
    assert "passed its content checks" in second and f"sha256 {bad_digest}" in second
    assert f'delete the entry "senteval.tar" from "data" in {lock}' in second
    assert (tmp_path / "dl" / "senteval.tar.unpinned").read_bytes() == good and not dest.exists()
    assert _lock_entry(lock)["sha256"] == bad_digest  # the lock is the user's to change
    assert not (tmp_path / "senteval" / "downstream").exists()
    # deleting the entry, as the line says, pins the good bytes
    lock.write_text(json.dumps({"format": 1, "data": {}}))
    assert (_senteval(url, tmp_path, lock) / "downstream" / "STS").is_dir()
    assert _lock_entry(lock)["sha256"] == good_digest
    observed(f"{first[:90]}… | {second[:90]}…")


@pytest.mark.fault(
    "senteval.tar with a member escaping its folder (../)", "refused, set aside, nothing pinned"
)
def test_an_unsafe_archive_is_set_aside_and_never_pinned(server, tmp_path, observed):
    base, handler = server
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    handler.files["/senteval.tar"] = buffer.getvalue()
    lock = tmp_path / "lock.json"
    with pytest.raises(download.ContentError, match=r"holds an unsafe member .*escaped\.txt") as error:
        _senteval(f"{base}/senteval.tar", tmp_path, lock)
    assert _lock_entry(lock) is None and (tmp_path / "dl" / "senteval.tar.corrupt").exists()
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "dl" / "escaped.txt").exists()
    observed(str(error.value))
