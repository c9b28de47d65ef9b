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

from contrastlab.data import download
from contrastlab.data.fixtures import write_senteval_fixture
from contrastlab.senteval.tasks import SentEvalDataError

PAYLOAD = bytes(range(256)) * 4000  # ~1 MB


class _Handler(BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    cut_first: set[str] = set()  # paths whose first response stops half-way
    faults: dict[str, str] = {}  # path -> a fault served once: "500", "drop" (headers, no body), "stall"
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
        if fault == "drop":
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            self.close_connection = True
            return
        start = 0
        rng = self.headers.get("Range")
        if rng:
            start = int(rng.removeprefix("bytes=").split("-")[0])
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        chunk = body[start:]
        if self.path in self.cut_first:
            self.cut_first.discard(self.path)
            chunk = chunk[: len(chunk) // 2]
            self.wfile.write(chunk)
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(chunk)


@pytest.fixture
def server():
    _Handler.files, _Handler.cut_first, _Handler.log, _Handler.faults = {}, set(), [], {}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", _Handler
    httpd.shutdown()
    httpd.server_close()


def _fetch(url, dest, lock, **kw):
    return download.fetch(
        url, dest, lock_file=lock, retries=kw.pop("retries", 3), backoff=0.0, progress=False, **kw
    )


def test_first_download_records_digest_in_lock(server, tmp_path):
    base, handler = server
    handler.files["/a.bin"] = PAYLOAD
    lock = tmp_path / "data.lock.json"
    out = _fetch(f"{base}/a.bin", tmp_path / "a.bin", lock)
    assert out.read_bytes() == PAYLOAD
    entry = json.loads(lock.read_text())[f"{base}/a.bin"]
    assert entry == {"sha256": hashlib.sha256(PAYLOAD).hexdigest(), "bytes": len(PAYLOAD)}
    assert not (tmp_path / "a.bin.part").exists()


def test_interrupted_transfer_resumes_with_range(server, tmp_path):
    base, handler = server
    handler.files["/big.bin"] = PAYLOAD
    handler.cut_first.add("/big.bin")
    out = _fetch(f"{base}/big.bin", tmp_path / "big.bin", tmp_path / "lock.json")
    assert out.read_bytes() == PAYLOAD
    ranges = [r for p, r in handler.log if p == "/big.bin"]
    assert ranges[0] is None and ranges[1] == f"bytes={len(PAYLOAD) // 2}-"


def test_existing_part_file_is_resumed(server, tmp_path):
    base, handler = server
    handler.files["/p.bin"] = PAYLOAD
    (tmp_path / "p.bin.part").write_bytes(PAYLOAD[:1000])
    out = _fetch(
        f"{base}/p.bin",
        tmp_path / "p.bin",
        tmp_path / "lock.json",
        sha256=hashlib.sha256(PAYLOAD).hexdigest(),
    )
    assert out.read_bytes() == PAYLOAD
    assert handler.log == [("/p.bin", "bytes=1000-")]


@pytest.mark.fault(
    "download: server fault served once", "retried (resumed where the data stopped), sha256-verified"
)
@pytest.mark.parametrize("fault", ["truncated mid-file", "HTTP 500", "connection dropped", "stalled"])
def test_transient_download_faults_are_retried_and_verified(server, tmp_path, fault, observed):
    base, handler = server
    handler.files["/f.bin"] = PAYLOAD
    if fault == "truncated mid-file":
        handler.cut_first.add("/f.bin")
    else:
        handler.faults["/f.bin"] = {"HTTP 500": "500", "connection dropped": "drop", "stalled": "stall"}[
            fault
        ]
    digest = hashlib.sha256(PAYLOAD).hexdigest()
    out = _fetch(f"{base}/f.bin", tmp_path / "f.bin", tmp_path / "lock.json", sha256=digest, timeout=1)
    assert out.read_bytes() == PAYLOAD and not (tmp_path / "f.bin.part").exists()
    requests = [r for p, r in handler.log if p == "/f.bin"]
    assert len(requests) == 2, requests
    observed(f"{len(requests)} requests ({requests[1] or 'full'} on retry), sha256 ok")


@pytest.mark.fault("download: persistent checksum mismatch", "stops with one error; bad file kept aside")
def test_corrupt_file_is_moved_aside_and_never_used(server, tmp_path):
    base, handler = server
    url = f"{base}/c.bin"
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps({url: {"sha256": hashlib.sha256(PAYLOAD).hexdigest(), "bytes": len(PAYLOAD)}}))
    handler.files["/c.bin"] = PAYLOAD[:-1] + b"x"
    with pytest.raises(download.ChecksumError, match="sha256 mismatch.*moved aside"):
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


def _tar_of(folder) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(folder / "downstream", arcname="downstream")
    return buf.getvalue()


def test_senteval_download_and_unpack(server, tmp_path):
    base, handler = server
    write_senteval_fixture(tmp_path / "src")
    handler.files["/senteval.tar"] = _tar_of(tmp_path / "src")
    lock = tmp_path / "lock.json"
    folder = download.senteval_data(
        None,
        tmp_path / "dl",
        tmp_path / "senteval",
        url=f"{base}/senteval.tar",
        lock_file=lock,
        progress=False,
    )
    assert (folder / "downstream" / "MR" / "rt-polarity.pos").exists()
    assert f"{base}/senteval.tar" in json.loads(lock.read_text())
    # a local copy is used as is, without any request
    handler.log.clear()
    assert download.senteval_data(tmp_path / "src", tmp_path / "dl2", tmp_path / "x") == tmp_path / "src"
    assert handler.log == []


def test_unpack_rejects_truncated_data(tmp_path):
    write_senteval_fixture(tmp_path / "src")
    pos = tmp_path / "src" / "downstream" / "MR" / "rt-polarity.pos"
    pos.write_text("".join(pos.read_text().splitlines(keepends=True)[:-3]))
    tar = tmp_path / "s.tar"
    tar.write_bytes(_tar_of(tmp_path / "src"))
    with pytest.raises(SentEvalDataError, match="rt-polarity.pos"):
        download.unpack_senteval(tar, tmp_path / "out")


def test_wiki_corpus_local_copy(tmp_path):
    local = tmp_path / "wiki.txt"
    local.write_text("a sentence .\n")
    assert download.wiki_corpus(local, tmp_path / "dl") == local
    with pytest.raises(FileNotFoundError, match="data.wiki_path"):
        download.wiki_corpus(tmp_path / "nope.txt", tmp_path / "dl")
