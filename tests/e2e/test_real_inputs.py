"""The first real run's inputs, in their publishers' layouts, through Snakemake.

A stand-in of the Hugging Face hub on 127.0.0.1 (tests/hub_standin.py) serves what config.yaml downloads,
each in the form its publisher ships it: ``senteval.tar`` with the task folders at its top level (built
from ``../shared/data``), a wiki1m-format corpus of 1,000,000 lines, CIFAR-10/100 archives of pickled
batches in torchvision's folders (built from scikit-learn's digits), and a tiny random BERT under each of
the four backbone ids. The data and backbone steps of config.yaml run through Snakemake (``--until``, as
``make lock`` runs them) with only the URLs and folders overridden; the artifacts lock is written, a second
run on empty folders fetches exactly the pinned revisions (offline, from the Hugging Face cache: the
backbones and, through huggingface_hub, the data) although every branch has moved on, and a corrupted
byte, a short corpus and a changed revision each stop with one line, losing nothing that finished.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hub_standin import HubStandin, build_tiny_bert, folder_files
from publisher_formats import cifar_archive, md5, senteval_tar
from torchvision.datasets import CIFAR10, CIFAR100

from .conftest import write

pytestmark = pytest.mark.slow
SCHEDULE_FIRST = 6  # a long module: tests/conftest.py starts the highest numbers first

DATA_REPO = "princeton-nlp/datasets-for-simcse"
STEPS = ("senteval_data", "corpus", "image_data", "fetch_backbone")
WIKI_LINES = 1_000_000
BACKBONE_REPOS = ("bert-base-uncased", "bert-large-uncased", "roberta-base", "roberta-large")


def wiki1m_like(lines: int) -> bytes:
    """One sentence per line, as ``wiki1m_for_simcse.txt``."""
    return "".join(f"sentence number {i} of the corpus .\n" for i in range(lines)).encode()


def cifar_from_digits(cls: type, per_file: int = 20) -> dict:
    """A CIFAR archive in the published python format of ``cls`` (tests/publisher_formats.py), its images
    scikit-learn's 8x8 digits scaled up to 32x32, the three planes alike."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    pixels = (np.kron(digits.images, np.ones((4, 4))) * 15).astype(np.uint8)  # 1797 x 32 x 32
    rows = np.concatenate([pixels.reshape(len(pixels), -1)] * 3, axis=1)
    return cifar_archive(cls, rows, digits.target, per_file)


@pytest.fixture(scope="module")
def hub(shared, tmp_path_factory):
    """The stand-in hub with config.yaml's four backbone ids and the published files."""
    made = tmp_path_factory.mktemp("published")
    build_tiny_bert(made / "bert")
    with HubStandin() as running:
        for repo in BACKBONE_REPOS:
            running.add_repo(repo, folder_files(made / "bert"))
        running.add_dataset_file(
            DATA_REPO, "senteval.tar", senteval_tar(shared / "data" / "senteval" / "downstream")
        )
        running.add_dataset_file(DATA_REPO, "wiki1m_for_simcse.txt", wiki1m_like(WIKI_LINES))
        running.cifar = {}
        for name, cls in (("cifar10", CIFAR10), ("cifar100", CIFAR100)):
            made = cifar_from_digits(cls)
            archive_name = cls.url.rsplit("/", 1)[-1]
            running.add_dataset_file("cifar/mirror", archive_name, made["archive"])
            running.cifar[name] = {
                "url": f"{running.endpoint}/datasets/cifar/mirror/resolve/main/{archive_name}",
                "archive_md5": md5(made["archive"]),
                "file_md5": made["file_md5"],
            }
        yield running


def overlay(hub: HubStandin, workdir: Path, name: str, **extra) -> str:
    """config.yaml's overrides: this run's folders and lock, the stand-in's URLs (a configfile read after
    config.yaml, as a user would pass one)."""
    resolve = f"{hub.endpoint}/datasets/{DATA_REPO}/resolve/main"
    config = {
        "results_dir": str(workdir / "results"),
        "resources_dir": str(workdir / "resources"),
        "artifacts_lock": str(workdir.parent / "artifacts.lock.json"),
        "data": {
            "senteval_url": f"{resolve}/senteval.tar",
            "wiki_url": f"{resolve}/wiki1m_for_simcse.txt",
            "cifar_sources": hub.cifar,
        },
        **extra,
    }
    workdir.mkdir(parents=True, exist_ok=True)
    return write(config, workdir / f"{name}.yaml")


def run_steps(
    repo_root: Path, hub: HubStandin, configfile: str, hf_home: Path, *args: str, offline: bool = False
):
    """The data and backbone steps of config.yaml (``make lock``'s command) against the stand-in."""
    env = hub.client_env(hf_home, offline=offline)
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env.pop(proxy, None)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(repo_root / "Snakefile"), "--cores", "2",
         "--configfile", str(repo_root / "config.yaml"), configfile, *args, "--until", *STEPS],
        cwd=repo_root, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def source_record(workdir: Path, alias: str) -> dict:
    """The record of where backbone ``alias`` of a run's resources came from."""
    return json.loads((workdir / "resources" / "models" / alias / "contrastlab_source.json").read_text())


def error_lines(done: subprocess.CompletedProcess, *needles: str) -> list[str]:
    output = done.stdout + done.stderr
    return [line for line in output.splitlines() if all(needle in line for needle in needles)]


@pytest.fixture(scope="module")
def first_run(repo_root, hub, tmp_path_factory):
    base = tmp_path_factory.mktemp("first")
    workdir, hf_home = base / "run", base / "hf-home"
    done = run_steps(repo_root, hub, overlay(hub, workdir, "first"), hf_home)
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    return workdir, hf_home, json.loads((base / "artifacts.lock.json").read_text())


def test_the_published_layouts_pass_every_step_and_the_lock_names_every_input(first_run, hub):
    workdir, _, lock = first_run
    state = workdir / "results" / "state" / "data"
    for marker in ("senteval", "corpus", "images-cifar10", "images-cifar100"):
        assert (state / f"{marker}.ready.json").is_file(), marker
    assert json.loads((state / "corpus.ready.json").read_text())["lines"] == WIKI_LINES
    assert (workdir / "resources" / "data" / "senteval" / "downstream" / "STS" / "STS12-en-test").is_dir()
    data_commit = hub.head(DATA_REPO, repo_type="dataset")
    pinned = {"senteval.tar": "downloads/senteval.tar", "wiki1m_for_simcse.txt": "data/wiki1m_for_simcse.txt"}
    assert set(lock["data"]) == {*pinned, "cifar-10-python.tar.gz", "cifar-100-python.tar.gz"}
    for name, path in pinned.items():
        assert lock["data"][name]["revision"] == data_commit
        on_disk = (workdir / "resources" / path).read_bytes()
        assert lock["data"][name]["sha256"] == hashlib.sha256(on_disk).hexdigest()
    assert set(lock["backbones"]) == set(BACKBONE_REPOS)
    for repo, entry in lock["backbones"].items():
        assert entry["revision"] == hub.head(repo) and entry["requested"] == "main"
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(entry["files"])
    record = source_record(workdir, "bert-base")
    assert record["revision"] == lock["backbones"]["bert-base-uncased"]["revision"]
    assert record["files"] == lock["backbones"]["bert-base-uncased"]["files"]
    from contrastlab.artifacts import summary  # what make lock prints after the steps

    printed = summary(workdir.parent / "artifacts.lock.json").splitlines()
    assert printed[0].endswith("pins 8 inputs; commit it to share them byte for byte:") and len(printed) == 9
    assert f"bert-base-uncased: commit {hub.head('bert-base-uncased')} (4 files)" in printed


def test_a_second_lab_with_the_lock_gets_the_pinned_bytes_although_every_branch_moved(
    repo_root, hub, first_run, tmp_path_factory
):
    """Empty folders, the lock, and the hub's branches moved on: the pinned commits are fetched (offline,
    from the Hugging Face cache the first run filled: backbones and data) and verified."""
    first_workdir, hf_home, lock = first_run
    moved = {repo: hub.add_repo(repo, {"config.json": b"{}"}) for repo in lock["backbones"]}
    hub.add_dataset_file(DATA_REPO, "wiki1m_for_simcse.txt", wiki1m_like(WIKI_LINES - 1))
    hub.requests.clear()
    workdir = first_workdir.parent / "second"
    done = run_steps(repo_root, hub, overlay(hub, workdir, "second"), hf_home, offline=True)
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    assert json.loads((first_workdir.parent / "artifacts.lock.json").read_text()) == lock  # nothing re-pinned
    assert not [path for _, path in hub.requests if "/api/models" in path or "/resolve/main/" in path], (
        hub.requests
    )
    # the data too: huggingface_hub serves the pinned commits from the cache the first run filled
    assert not [path for _, path in hub.requests if f"/datasets/{DATA_REPO}/" in path], hub.requests
    for alias, repo in (("bert-base", "bert-base-uncased"), ("roberta-large", "roberta-large")):
        assert source_record(workdir, alias)["revision"] == lock["backbones"][repo]["revision"] != moved[repo]
    first_corpus = (first_workdir / "results" / "state" / "data" / "corpus.ready.json").read_text()
    assert (workdir / "results" / "state" / "data" / "corpus.ready.json").read_text() == first_corpus


@pytest.mark.fault(
    "inputs: a downloaded byte changed after the lock", "one line naming both digests; nothing else lost"
)
def test_a_corrupted_byte_stops_in_one_line_and_loses_nothing(repo_root, hub, first_run, observed):
    workdir, hf_home, lock = first_run
    tar = workdir / "resources" / "downloads" / "senteval.tar"
    data = bytearray(tar.read_bytes())
    data[len(data) // 2] ^= 0xFF
    tar.write_bytes(bytes(data))
    kept = {p: p.stat().st_mtime_ns for p in (workdir / "resources" / "models").iterdir()}
    done = run_steps(repo_root, hub, overlay(hub, workdir, "corrupt"), hf_home, "--forcerun", "senteval_data")
    assert done.returncode != 0
    found = error_lines(
        done, "senteval.tar: sha256", lock["data"]["senteval.tar"]["sha256"], "delete the entry"
    )
    assert found, (done.stdout + done.stderr)[-4000:]
    assert (tar.parent / "senteval.tar.corrupt").is_file() and not tar.exists()
    assert {p: p.stat().st_mtime_ns for p in (workdir / "resources" / "models").iterdir()} == kept
    assert (workdir / "results" / "state" / "data" / "corpus.ready.json").is_file()
    observed(found[0].split("senteval.tar: ", 1)[1][:90] + "...")


@pytest.mark.fault(
    "inputs: a corpus of the wrong length", "one line naming both counts; kept aside, never locked"
)
def test_a_short_corpus_stops_in_one_line_and_is_never_locked(repo_root, hub, first_run, tmp_path, observed):
    """A user accepts new corpus bytes (deletes the lock entry) and the hub now serves a short file."""
    workdir, hf_home, lock = first_run
    hub.add_dataset_file(DATA_REPO, "wiki1m_for_simcse.txt", wiki1m_like(11_914))
    edited = dict(lock, data={k: v for k, v in lock["data"].items() if k != "wiki1m_for_simcse.txt"})
    (tmp_path / "artifacts.lock.json").write_text(json.dumps(edited))  # the first run's lock, entry deleted
    configfile = overlay(hub, workdir, "short", artifacts_lock=str(tmp_path / "artifacts.lock.json"))
    done = run_steps(repo_root, hub, configfile, hf_home)  # online: offline, main is the cache's main
    assert done.returncode != 0
    found = error_lines(done, "has 11,914 lines where the published file has 1,000,000")
    assert found, (done.stdout + done.stderr)[-4000:]
    assert "wiki1m_for_simcse.txt" not in json.loads((tmp_path / "artifacts.lock.json").read_text())["data"]
    assert (workdir / "resources" / "data" / "wiki1m_for_simcse.txt.corrupt").is_file()
    state = workdir / "results" / "state" / "data"
    assert not (state / "corpus.ready.json").exists()  # never marked ready; finished steps stay
    assert (state / "images-cifar10.ready.json").is_file()
    assert (workdir / "resources" / "models" / "bert-base" / "model.safetensors").is_file()
    observed(found[0][found[0].index("wiki1m") :][:100])


@pytest.mark.fault("inputs: a backbone revision other than the lock's", "stops before any job, in one line")
def test_a_changed_revision_stops_before_any_job(repo_root, hub, first_run, observed):
    workdir, hf_home, lock = first_run
    other = "1" * 40
    backbones = {"bert-base": {"hf_id": "bert-base-uncased", "revision": other, "params_millions": 110}}
    before = (workdir / "resources" / "models" / "bert-base").stat().st_mtime_ns
    done = run_steps(repo_root, hub, overlay(hub, workdir, "revision", backbones=backbones), hf_home)
    lines = error_lines(done, "contrastlab:")
    assert done.returncode == 1 and len(lines) == 1, (done.stdout + done.stderr)[-4000:]
    assert other in lines[0] and lock["backbones"]["bert-base-uncased"]["revision"] in lines[0]
    assert "delete the entry" in lines[0]
    assert (workdir / "resources" / "models" / "bert-base").stat().st_mtime_ns == before
    observed(lines[0][:110] + "...")


def test_a_repository_without_safetensors_is_refused_at_the_fetch(hub, tmp_path, monkeypatch):
    """Not discovered in the GPU job: the fetch step names the repository and what to do."""
    from contrastlab.models.text import BackboneError, materialize_backbone

    hub.add_repo(
        "old/pickled-bert", {"config.json": b'{"model_type": "bert"}', "pytorch_model.bin": b"x" * 64}
    )
    hub.configure_client(monkeypatch, tmp_path / "hf-home")
    with pytest.raises(BackboneError, match=r"old/pickled-bert@\w+ has no \*.safetensors weights"):
        materialize_backbone({"hf_id": "old/pickled-bert"}, tmp_path / "m", lock_file=tmp_path / "lock.json")
    assert not (tmp_path / "m").exists() and not (tmp_path / "lock.json").exists()


def test_a_path_backbone_is_settable_from_the_command_line(repo_root, first_run):
    """A local copy (shared model store) named on the command line merges with config.yaml's hf_id: the
    folder is used, the hub id names what it is a copy of."""
    from contrastlab import config as cl_config
    from contrastlab.models.text import backbone_source

    from .workflow_start import snakemake_config

    folder = first_run[0] / "resources" / "models" / "bert-base"
    config = snakemake_config(repo_root / "config.yaml", f"backbones={{bert-base: {{path: {folder}}}}}")
    spec = cl_config.validate(config)["backbones"]["bert-base"]
    assert backbone_source(spec) == "path" and spec["hf_id"] == "bert-base-uncased"
    assert os.fspath(folder) == spec["path"]
