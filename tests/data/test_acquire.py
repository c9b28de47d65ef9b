"""Where the data lie and what they are, kept apart (issue 10 item 2): the workflow's data markers and
cells depend on the identity only."""

from __future__ import annotations

import json
import shutil

import pytest

from contrastlab import config as cl_config
from contrastlab.data.acquire import data_identity, data_locations
from contrastlab.data.download import sha256_file
from contrastlab.senteval.tasks import SentEvalDataError


def _config(repo_root, **data):
    config = cl_config.load(repo_root / "config.yaml")
    config["data"].update(data)
    return config


def test_a_copy_of_the_published_senteval_is_the_download(repo_root, shared):
    downloaded = data_identity(_config(repo_root), "senteval")
    copied = data_identity(_config(repo_root, senteval_dir=str(shared / "data" / "senteval")), "senteval")
    assert copied == downloaded


def test_an_altered_senteval_copy_is_refused_naming_the_file(repo_root, shared, tmp_path):
    shutil.copytree(shared / "data" / "senteval", tmp_path / "senteval")
    sick = tmp_path / "senteval" / "downstream" / "SICK" / "SICK_test_annotated.txt"
    sick.write_bytes(sick.read_bytes()[:-1] + b"X")
    with pytest.raises(SentEvalDataError, match="SICK_test_annotated.txt differs"):
        data_identity(_config(repo_root, senteval_dir=str(tmp_path / "senteval")), "senteval")
    with pytest.raises(FileNotFoundError, match="holds no downstream/ folder"):
        data_identity(_config(repo_root, senteval_dir=str(tmp_path)), "senteval")


def test_a_corpus_is_its_content_wherever_it_lies(repo_root, tmp_path):
    a, b, c = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    a.write_text("one .\ntwo .\n")
    b.write_text("one .\ntwo .\n")
    c.write_text("one .\ntwo !\n")
    identity = {p: data_identity(_config(repo_root, wiki_path=str(p)), "corpus") for p in (a, b, c)}
    assert identity[a] == identity[b] != identity[c]
    # a download is the digest its lock entry pins, whatever its URL: the same as a user's copy of it
    lock = tmp_path / "artifacts.lock.json"
    unpinned = _config(repo_root, wiki_url="https://mirror.example/wiki1m_for_simcse.txt")
    unpinned["artifacts_lock"] = str(lock)
    assert data_identity(unpinned, "corpus") == {"corpus": "text", "sha256": None}
    entry = {
        "url": "https://x/wiki1m_for_simcse.txt",
        "revision": None,
        "sha256": sha256_file(a),
        "bytes": 12,
    }
    lock.write_text(json.dumps({"format": 1, "data": {"wiki1m_for_simcse.txt": entry}}))
    assert data_identity(unpinned, "corpus") == identity[a]
    with pytest.raises(FileNotFoundError, match="data.wiki_path"):
        data_identity(_config(repo_root, wiki_path=str(tmp_path / "missing.txt")), "corpus")


def test_locations_default_under_resources(repo_root):
    where = data_locations(_config(repo_root))
    assert where["senteval_dir"] == "resources/data/senteval"
    assert where["corpus"] == "resources/data/wiki1m_for_simcse.txt"
    demo = data_locations(cl_config.load(repo_root / "config" / "demo.yaml"))
    assert demo["senteval_dir"] == "resources/data/senteval-fixture"
    # presets share resources/: a generated corpus of another size lies in another file (the gpu-check
    # toy's 600 sentences once overwrote the demo's 2,000 under a marker that still said 2,000)
    assert demo["corpus"] == "resources/data/demo_corpus-2000.txt"
    other = cl_config.load(repo_root / "config" / "demo.yaml", {"data": {"fixture_corpus_sentences": 600}})
    assert data_locations(other)["corpus"] == "resources/data/demo_corpus-600.txt"


def test_cifar_identity_is_torchvisions_published_archive():
    # The workflow reads the md5 without importing torch; it must stay torchvision's.
    from torchvision.datasets import CIFAR10, CIFAR100

    from contrastlab.data.acquire import CIFAR_ARCHIVE_MD5, image_data_identity

    assert CIFAR_ARCHIVE_MD5 == {"cifar10": CIFAR10.tgz_md5, "cifar100": CIFAR100.tgz_md5}
    config = {"data": {"cifar_root": None}}
    assert image_data_identity(config, "cifar10")["archive_md5"] == CIFAR10.tgz_md5
    assert image_data_identity(config, "digits") == {"images": "digits", "source": "scikit-learn load_digits"}


def test_cifar_10_and_100_may_lie_in_folders_of_their_own(repo_root, tmp_path):
    """Issue 43: a user's CIFAR-10 and CIFAR-100 in two folders; a dataset left out is downloaded, and each
    job reads its own dataset's folder."""
    from types import SimpleNamespace

    from contrastlab.data.acquire import images_root, user_images_root
    from contrastlab.workflow.job import job_data_locations

    config = cl_config.load(
        repo_root / "config.yaml", {"data": {"cifar_root": {"cifar10": str(tmp_path / "c10")}}}
    )
    assert user_images_root(config, "cifar10") == str(tmp_path / "c10")
    assert user_images_root(config, "cifar100") is None
    assert images_root(config, "cifar100") == "resources/data/cifar"
    job = SimpleNamespace(config=config, wildcards={"experiment": "oar_cifar10"})
    assert job_data_locations(job)["images"] == str(tmp_path / "c10")
    job = SimpleNamespace(config=config, wildcards={"dataset": "cifar100"})
    assert job_data_locations(job)["images"] == "resources/data/cifar"
    shared = cl_config.load(repo_root / "config.yaml", {"data": {"cifar_root": "/data/cifar"}})
    assert images_root(shared, "cifar10") == images_root(shared, "cifar100") == "/data/cifar"


def test_an_image_cells_job_records_what_its_images_are(repo_root, tmp_path):
    """Issue 43: every metrics file names its inputs; an image probe job reads only the features, so its
    provenance takes the images' identity from the run's marker."""
    from types import SimpleNamespace

    from contrastlab.workflow.job import job_inputs

    config = cl_config.load(repo_root / "config" / "demo.yaml", {"results_dir": str(tmp_path)})
    marker = tmp_path / "state" / "data" / "images-digits.ready.json"
    marker.parent.mkdir(parents=True)
    marker.write_text(json.dumps({"images": "digits", "source": "scikit-learn load_digits"}))
    wildcards = {"experiment": "oar_cifar10", "backbone": "resnet18-w8", "method": "oar", "seed": "42"}
    job = SimpleNamespace(config=config, wildcards=wildcards, input={})
    assert job_inputs(job) == {"images": {"images": "digits", "source": "scikit-learn load_digits"}}
