"""The hub stand-in (tests/hub_standin.py) serves what the real ``huggingface_hub`` client asks for.

The client runs against it in this process (the ``hf_hub`` fixture: ``HubStandin.configure_client``) and in
subprocesses (``HubStandin.client_env``), the two ways other tests use it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import huggingface_hub
import pytest
from hub_standin import (
    HubStandin,
    build_tiny_bert,
    folder_files,
    hf_hub_fixture,  # noqa: F401 (the fixture hf_hub)
    sync_client_constants,
)
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError
from huggingface_hub.hf_api import RepoFile

from contrastlab.models.text import HUB_FILES as PATTERNS  # what materialize_backbone asks for

REPO = "contrastlab-test/tiny-bert"


@pytest.fixture(scope="module")
def tiny_bert_files(tmp_path_factory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("tiny-bert-source")
    build_tiny_bert(folder)
    return folder_files(folder)


def read_tree(folder: str | Path) -> dict[str, bytes]:
    """The files of a snapshot folder, leaving out huggingface_hub's own ``.cache`` of a ``local_dir``."""
    return {path: data for path, data in folder_files(folder).items() if not path.startswith(".cache/")}


def test_tiny_bert_is_deterministic_and_complete(tiny_bert_files, tmp_path):
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(
        tiny_bert_files
    )
    build_tiny_bert(tmp_path)
    assert folder_files(tmp_path) == tiny_bert_files


def test_snapshot_at_main_loads_with_transformers_and_is_served_offline(
    hf_hub, tiny_bert_files, monkeypatch, tmp_path
):
    from transformers import AutoModel

    sha = hf_hub.add_repo(REPO, tiny_bert_files)
    cached = snapshot_download(REPO, revision="main", allow_patterns=PATTERNS)
    local = snapshot_download(REPO, revision="main", local_dir=tmp_path / "local", allow_patterns=PATTERNS)

    assert Path(cached).name == sha  # <cache>/models--contrastlab-test--tiny-bert/snapshots/<sha>
    assert read_tree(cached) == read_tree(local) == tiny_bert_files
    # the weights are an lfs file: the cache names their blob by sha256 (X-Linked-Etag), not by git oid
    weights = Path(cached) / "model.safetensors"
    assert weights.resolve().name == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert (Path(cached).parent.parent / "refs" / "main").read_text() == sha
    assert snapshot_download(REPO, revision=sha, allow_patterns=PATTERNS) == cached

    before = len(hf_hub.requests)
    model = AutoModel.from_pretrained(local)
    config = model.config
    assert (config.hidden_size, config.num_hidden_layers, config.intermediate_size) == (32, 2, 37)
    assert model.config.vocab_size == 30522
    assert len(hf_hub.requests) == before  # loading a folder asks the hub nothing

    hf_hub.requests.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    sync_client_constants(monkeypatch)  # huggingface_hub read HF_HUB_OFFLINE when imported
    assert huggingface_hub.constants.HF_HUB_OFFLINE
    # a branch resolves through the cache's refs/main, a commit sha directly
    assert snapshot_download(REPO, revision="main", allow_patterns=PATTERNS) == cached
    assert snapshot_download(REPO, revision=sha, allow_patterns=PATTERNS) == cached
    assert (
        snapshot_download(REPO, revision=sha, local_dir=tmp_path / "local", allow_patterns=PATTERNS) == local
    )
    assert Path(hf_hub_download(REPO, "config.json", revision="main")).parent == Path(cached)
    assert hf_hub.requests == []


def test_old_commit_stays_downloadable_after_main_moves(hf_hub, tiny_bert_files, tmp_path):
    first = hf_hub.add_repo(REPO, tiny_bert_files)
    config = json.loads(tiny_bert_files["config.json"]) | {"hidden_dropout_prob": 0.0}
    changed = tiny_bert_files | {"config.json": json.dumps(config).encode(), "vocab.txt": b"[PAD]\n"}
    second = hf_hub.add_repo(REPO, changed)
    assert first != second and hf_hub.head(REPO) == second

    assert HfApi().model_info(REPO, revision="main").sha == second
    assert HfApi().model_info(REPO, revision=first).sha == first
    assert huggingface_hub.model_info(REPO).sha == second  # the module-level HfApi follows the endpoint too

    old = snapshot_download(REPO, revision=first, local_dir=tmp_path / "old", allow_patterns=PATTERNS)
    new = snapshot_download(REPO, revision="main", local_dir=tmp_path / "new", allow_patterns=PATTERNS)
    assert read_tree(old) == tiny_bert_files
    assert read_tree(new) == changed
    assert Path(snapshot_download(REPO, revision=first)).name == first
    pinned = hf_hub_download(REPO, "config.json", revision=first)
    assert Path(pinned).read_bytes() == tiny_bert_files["config.json"]


def test_configure_client_is_undone_with_its_monkeypatch(tmp_path):
    constants = huggingface_hub.constants
    before = (constants.ENDPOINT, constants.HUGGINGFACE_CO_URL_TEMPLATE, constants.HF_HUB_CACHE)
    with HubStandin() as hub, pytest.MonkeyPatch.context() as patch:
        hub.configure_client(patch, tmp_path / "home")
        assert constants.ENDPOINT == huggingface_hub.hf_api.api.endpoint == hub.endpoint
        assert constants.HUGGINGFACE_CO_URL_TEMPLATE.startswith(hub.endpoint + "/")
        assert constants.HF_HUB_CACHE == str(tmp_path / "home" / "hub")
        assert not constants.HF_HUB_OFFLINE and constants.HF_HUB_DISABLE_XET
    assert (constants.ENDPOINT, constants.HUGGINGFACE_CO_URL_TEMPLATE, constants.HF_HUB_CACHE) == before


def test_subprocess_client_through_client_env(tiny_bert_files, tmp_path):
    """A child process (a Snakemake job) gets the stand-in through its environment, online and offline."""
    script = (
        "import sys; from huggingface_hub import snapshot_download; "
        "print(snapshot_download(sys.argv[1], revision='main', allow_patterns=['*.json']))"
    )
    with HubStandin() as hub:
        sha = hub.add_repo(REPO, tiny_bert_files)

        def download(offline: bool) -> str:
            env = hub.client_env(tmp_path / "home", offline=offline)
            run = subprocess.run(
                [sys.executable, "-c", script, REPO], env=env, capture_output=True, text=True, timeout=120
            )
            assert run.returncode == 0, run.stderr
            return run.stdout.strip().splitlines()[-1]

        online = download(offline=False)
        assert (
            Path(online)
            == tmp_path / "home" / "hub" / "models--contrastlab-test--tiny-bert" / "snapshots" / sha
        )
        assert ("GET", f"/api/models/{REPO}/revision/main") in hub.requests
        hub.requests.clear()
        assert download(offline=True) == online
        assert hub.requests == []


def test_missing_repo_revision_and_file_raise_the_hub_errors(hf_hub, tmp_path):
    for ask in (
        lambda: snapshot_download("nobody/nothing", allow_patterns=PATTERNS),
        lambda: snapshot_download("nobody/nothing", revision="0" * 40, local_dir=tmp_path / "x"),
        lambda: hf_hub_download("nobody/nothing", "config.json"),
        lambda: HfApi().model_info("nobody/nothing"),
    ):
        with pytest.raises(RepositoryNotFoundError):
            ask()

    hf_hub.add_repo(REPO, {"config.json": b"{}"})
    with pytest.raises(RevisionNotFoundError):
        snapshot_download(REPO, revision="no-such-branch")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(REPO, "config.json", revision="f" * 40)
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(REPO, "missing.json")


def test_dataset_file_moves_main_and_keeps_old_commits(hf_hub):
    first = hf_hub.add_dataset_file("org/data", "train.csv", b"a,b\n1,2\n")
    second = hf_hub.add_dataset_file("org/data", "train.csv", b"a,b\n3,4\n")
    third = hf_hub.add_dataset_file("org/data", "test.csv", b"a,b\n5,6\n")
    assert len({first, second, third}) == 3
    assert HfApi().dataset_info("org/data", revision="main").sha == third
    assert {s.rfilename for s in HfApi().dataset_info("org/data").siblings} == {"train.csv", "test.csv"}

    def read(revision: str) -> bytes:
        return Path(
            hf_hub_download("org/data", "train.csv", repo_type="dataset", revision=revision)
        ).read_bytes()

    assert read("main") == read(second) == b"a,b\n3,4\n"
    assert read(first) == b"a,b\n1,2\n"
    assert ("HEAD", f"/datasets/org/data/resolve/{first}/train.csv") in hf_hub.requests


def test_renamed_repo_redirects_to_its_new_name(hf_hub):
    sha = hf_hub.add_repo("google-bert/bert-base-uncased", {"config.json": b'{"model_type": "bert"}'})
    hf_hub.redirect("bert-base-uncased", "google-bert/bert-base-uncased")
    assert HfApi().model_info("bert-base-uncased").id == "google-bert/bert-base-uncased"
    path = Path(snapshot_download("bert-base-uncased", allow_patterns=PATTERNS))
    assert path.name == sha and (path / "config.json").read_bytes() == b'{"model_type": "bert"}'
    assert ("HEAD", f"/google-bert/bert-base-uncased/resolve/{sha}/config.json") in hf_hub.requests


def test_ranges_headers_and_tree_pages(hf_hub):
    payload = bytes(range(256)) * 8
    sha = hf_hub.add_repo("org/blobs", {"data.bin": payload, "a/b/c.txt": b"deep", "a/d.txt": b"d"})

    def get(path: str, **headers: str):
        request = urllib.request.Request(f"{hf_hub.endpoint}{path}", headers=headers)
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read()

    status, headers, body = get("/org/blobs/resolve/main/data.bin", Range="bytes=10-19")
    assert (status, body, headers["Content-Range"]) == (206, payload[10:20], f"bytes 10-19/{len(payload)}")
    assert headers["X-Repo-Commit"] == sha
    assert headers["X-Linked-Size"] == str(len(payload))
    assert headers["X-Linked-Etag"] == headers["ETag"] == f'"{hashlib.sha256(payload).hexdigest()}"'
    assert get("/org/blobs/resolve/main/data.bin", Range="bytes=-6")[2] == payload[-6:]
    assert get("/org/blobs/resolve/main/data.bin", Range=f"bytes={len(payload)}-")[0] == 416
    status, headers, _ = get("/org/blobs/resolve/nope/data.bin")
    assert (status, headers["X-Error-Code"]) == (404, "RevisionNotFound")
    status, headers, _ = get("/nobody/nothing/resolve/main/x")
    assert (status, headers["X-Error-Code"]) == (401, "RepoNotFound")
    assert not any(name.lower().startswith("x-xet") for name in headers)

    hf_hub.tree_page_size = 2
    files = [e.path for e in HfApi().list_repo_tree("org/blobs", recursive=True) if isinstance(e, RepoFile)]
    assert sorted(files) == ["a/b/c.txt", "a/d.txt", "data.bin"]
    assert [e.path for e in HfApi().list_repo_tree("org/blobs", path_in_repo="a")] == ["a/b", "a/d.txt"]
    assert sum(1 for _, path in hf_hub.requests if "/tree/" in path) > 2  # the listing came in pages
