"""Where the data lie and what they are, kept apart: markers and cells depend on the identity only, which
takes explicit values here (where the config puts them: tests/config/test_data.py)."""

from __future__ import annotations

import json
import shutil

import pytest

from contrastlab import config as cl_config
from contrastlab.config.data import DataConfig
from contrastlab.data.acquire import CorpusSource, corpus_identity, senteval_identity
from contrastlab.data.download import sha256_file
from contrastlab.senteval.tasks import SentEvalDataError


def _config(repo_root, **data):
    config = cl_config.load(repo_root / "config.yaml")
    config["data"].update(data)
    return config


def _corpus(tmp_path, **where) -> CorpusSource:
    """The download of config.yaml's corpus into ``tmp_path``, or ``where``'s user file or fixture."""
    return CorpusSource(
        **{
            "wiki_path": None,
            "fixture_sentences": None,
            "url": "https://mirror.example/wiki1m_for_simcse.txt",
            "dest": str(tmp_path / "wiki1m_for_simcse.txt"),
            "lines": 1_000_000,
            "lock_file": str(tmp_path / "artifacts.lock.json"),
            **where,
        }
    )


def test_a_copy_of_the_published_senteval_is_the_download(shared):
    downloaded = senteval_identity(None, fixture=False)
    copied = senteval_identity(str(shared / "data" / "senteval"), fixture=False)
    assert copied == downloaded
    assert senteval_identity(None, fixture=True) == {"senteval": "fixture"}


def test_an_altered_senteval_copy_is_refused_naming_the_file(shared, tmp_path):
    shutil.copytree(shared / "data" / "senteval", tmp_path / "senteval")
    sick = tmp_path / "senteval" / "downstream" / "SICK" / "SICK_test_annotated.txt"
    sick.write_bytes(sick.read_bytes()[:-1] + b"X")
    with pytest.raises(SentEvalDataError, match="SICK_test_annotated.txt differs"):
        senteval_identity(str(tmp_path / "senteval"), fixture=False)
    with pytest.raises(FileNotFoundError, match="holds no downstream/ folder"):
        senteval_identity(str(tmp_path), fixture=True)  # a user's copy is checked, fixture or not


def test_a_corpus_is_its_content_wherever_it_lies(tmp_path):
    a, b, c = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    a.write_text("one .\ntwo .\n")
    b.write_text("one .\ntwo .\n")
    c.write_text("one .\ntwo !\n")
    identity = {p: corpus_identity(_corpus(tmp_path, wiki_path=str(p))) for p in (a, b, c)}
    assert identity[a] == identity[b] != identity[c]
    # the fixture is its generator's settings; a user's file wins over it
    assert corpus_identity(_corpus(tmp_path, fixture_sentences=600)) == {
        "corpus": "fixture",
        "sentences": 600,
    }
    assert corpus_identity(_corpus(tmp_path, wiki_path=str(a), fixture_sentences=600)) == identity[a]
    # a download is the digest its lock entry pins, whatever its URL: the same as a user's copy of it
    lock = tmp_path / "artifacts.lock.json"
    unpinned = _corpus(tmp_path)
    assert corpus_identity(unpinned) == {"corpus": "text", "sha256": None}
    entry = {
        "url": "https://x/wiki1m_for_simcse.txt",
        "revision": None,
        "sha256": sha256_file(a),
        "bytes": 12,
    }
    lock.write_text(json.dumps({"format": 1, "data": {"wiki1m_for_simcse.txt": entry}}))
    assert corpus_identity(unpinned) == identity[a]
    with pytest.raises(FileNotFoundError, match="data.wiki_path"):
        corpus_identity(_corpus(tmp_path, wiki_path=str(tmp_path / "missing.txt")))


def test_locations_default_under_resources(repo_root):
    where = DataConfig(_config(repo_root)).locations()
    assert where["senteval_dir"] == "resources/data/senteval"
    assert where["corpus"] == "resources/data/wiki1m_for_simcse.txt"
    demo = DataConfig(cl_config.load(repo_root / "config" / "demo.yaml")).locations()
    assert demo["senteval_dir"] == "resources/data/senteval-fixture"
    # presets share resources/: a generated corpus of another size lies in another file (the gpu-check
    # toy's 600 sentences once overwrote the demo's 2,000 under a marker that still said 2,000)
    assert demo["corpus"] == "resources/data/demo_corpus-2000.txt"
    other = cl_config.load(repo_root / "config" / "demo.yaml", {"data": {"fixture_corpus_sentences": 600}})
    assert DataConfig(other).locations()["corpus"] == "resources/data/demo_corpus-600.txt"


def test_cifar_identity_is_torchvisions_published_archive():
    # The workflow reads the md5 without importing torch; it must stay torchvision's.
    from torchvision.datasets import CIFAR10, CIFAR100

    from contrastlab.data.acquire import CIFAR_ARCHIVE_MD5, image_identity

    assert CIFAR_ARCHIVE_MD5 == {"cifar10": CIFAR10.tgz_md5, "cifar100": CIFAR100.tgz_md5}
    assert image_identity("cifar10", user_copy=None, custom=None)["archive_md5"] == CIFAR10.tgz_md5
    digits = image_identity("digits", user_copy=None, custom=None)
    assert digits == {"images": "digits", "source": "scikit-learn load_digits"}
    # a re-packed archive is another dataset to the workflow; a mirror of the published one is not
    repacked = image_identity(
        "cifar100", user_copy=None, custom={"url": "http://m/x.tgz", "archive_md5": "ab"}
    )
    assert repacked == {"images": "cifar100", "source": "repacked", "archive_md5": "ab"}
    mirror = image_identity("cifar100", user_copy=None, custom={"url": "http://m/x.tgz"})
    assert mirror == image_identity("cifar100", user_copy=None, custom=None)
    with pytest.raises(ValueError, match="unknown image dataset 'mnist'; expected digits, cifar10, cifar100"):
        image_identity("mnist", user_copy=None, custom=None)


def test_cifar_10_and_100_may_lie_in_folders_of_their_own(repo_root, tmp_path):
    """A user's CIFAR-10 and CIFAR-100 in two folders: one left out is downloaded; each job reads its own."""
    from types import SimpleNamespace

    from contrastlab.workflow.job import job_data_locations

    config = cl_config.load(
        repo_root / "config.yaml", {"data": {"cifar_root": {"cifar10": str(tmp_path / "c10")}}}
    )
    assert DataConfig(config).user_images_root("cifar10") == str(tmp_path / "c10")
    assert DataConfig(config).user_images_root("cifar100") is None
    assert DataConfig(config).images_root("cifar100") == "resources/data/cifar"
    job = SimpleNamespace(config=config, wildcards={"experiment": "oar_cifar10"})
    assert job_data_locations(job)["images"] == str(tmp_path / "c10")
    job = SimpleNamespace(config=config, wildcards={"dataset": "cifar100"})
    assert job_data_locations(job)["images"] == "resources/data/cifar"
    shared = DataConfig(cl_config.load(repo_root / "config.yaml", {"data": {"cifar_root": "/data/cifar"}}))
    assert shared.images_root("cifar10") == shared.images_root("cifar100") == "/data/cifar"


def test_an_image_cells_job_records_what_its_images_are(repo_root, tmp_path):
    """An image probe job's provenance takes the images' identity from the run's data marker."""
    from types import SimpleNamespace

    from contrastlab.workflow.job import job_inputs

    config = cl_config.load(repo_root / "config" / "demo.yaml", {"results_dir": str(tmp_path)})
    marker = tmp_path / "state" / "data" / "images-digits.ready.json"
    marker.parent.mkdir(parents=True)
    marker.write_text(json.dumps({"images": "digits", "source": "scikit-learn load_digits"}))
    wildcards = {"experiment": "oar_cifar10", "backbone": "resnet18-w8", "method": "oar", "seed": "42"}
    job = SimpleNamespace(config=config, wildcards=wildcards, input={})
    assert job_inputs(job) == {"images": {"images": "digits", "source": "scikit-learn load_digits"}}


@pytest.mark.fault(
    "artifacts lock truncated (unreadable JSON)",
    "the workflow's lock reads stop in one line naming the lock file and the fix",
)
def test_an_unreadable_lock_is_named_with_its_fix(tmp_path, observed):
    from contrastlab.artifacts import LockMismatch, read_lock
    from contrastlab.data.acquire import check_data_pins

    lock = tmp_path / "artifacts.lock.json"
    lock.write_text('{"format": 1, "data": {"senteval.tar": {"url": "http://x/sen')
    source = _corpus(tmp_path, lock_file=str(lock))
    for read in (
        lambda: read_lock(lock),
        lambda: check_data_pins(lock, {"senteval.tar": "http://x/senteval.tar"}),  # GRID.check_lock
        lambda: corpus_identity(source),  # the corpus's identity, before any job
    ):
        with pytest.raises(LockMismatch) as error:
            read()
        message = str(error.value)
        assert "\n" not in message and message.startswith(f"{lock} is not readable JSON (Unterminated string")
        assert f"git checkout -- {lock}" in message and "move it aside and run again" in message, message
    observed(message)
