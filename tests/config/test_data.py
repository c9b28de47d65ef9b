"""What the config says about the data (contrastlab.config.data), and the Grid asking it: the data rooms
below take the values read here, never the config."""

from __future__ import annotations

import json

import pytest

from contrastlab import config as cl_config
from contrastlab.artifacts import LockMismatch
from contrastlab.config.data import DataConfig
from contrastlab.data.acquire import CorpusSource

COMMIT = "e145e8bb659b2aa2669f32ef79cb4cdef6c58fef"
HUB = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve"


def _load(repo_root, name="config.yaml", **overrides):
    return cl_config.load(
        repo_root / name if name == "config.yaml" else repo_root / "config" / name, overrides
    )


@pytest.mark.parametrize("name", ["config.yaml", "demo.yaml"])
def test_the_grid_answers_what_the_config_says(repo_root, name):
    config = _load(repo_root, name)
    grid = cl_config.Grid(config)
    data = DataConfig(config)  # what a job's script asks, holding the config but no grid
    assert grid.data.locations() == data.locations()
    assert grid.data.locations()["lock"] == grid.data.lock_file == config["artifacts_lock"]
    assert grid.data.identity("senteval") == data.identity("senteval")
    assert dict(grid.data) == dict(data) == config["data"]
    for dataset in ("digits", "cifar10", "cifar100"):
        assert grid.data.image_identity(dataset) == data.image_identity(dataset)
        assert grid.data.images_root(dataset) == data.images_root(dataset)
    if name == "demo.yaml":
        assert grid.data.identity("senteval") == {"senteval": "fixture"}
        assert grid.data.identity("corpus") == {"corpus": "fixture", "sentences": 2000}
    else:
        assert grid.data.identity("senteval")["senteval"] == "published"


def test_the_report_names_the_lock_as_the_config_does_without_the_key(repo_root):
    """Without artifacts_lock in the tables job's config, the report still names `artifacts.lock.json`."""
    config = {k: v for k, v in _load(repo_root, "demo.yaml").items() if k not in ("data", "artifacts_lock")}
    assert cl_config.Grid(config).data.lock_file == "artifacts.lock.json"


def test_the_corpus_source_is_read_from_the_config(repo_root, tmp_path):
    config = _load(repo_root, artifacts_lock=str(tmp_path / "lock.json"))
    assert DataConfig(config).corpus_source() == CorpusSource(
        wiki_path=None,
        fixture_sentences=None,
        url=f"{HUB}/main/wiki1m_for_simcse.txt",
        dest="resources/data/wiki1m_for_simcse.txt",
        lines=1_000_000,
        lock_file=str(tmp_path / "lock.json"),
    )
    demo = DataConfig(_load(repo_root, "demo.yaml")).corpus_source()
    assert demo.fixture_sentences == 2000 and demo.dest == "resources/data/demo_corpus-2000.txt"
    # a user's file is named whatever data.fixture says
    mine = DataConfig(
        _load(repo_root, "demo.yaml", data={"wiki_path": str(tmp_path / "w.txt")})
    ).corpus_source()
    assert mine.wiki_path == mine.dest == str(tmp_path / "w.txt")


def test_an_unknown_data_kind_is_refused_in_one_line(repo_root):
    with pytest.raises(ValueError, match="^unknown data kind 'images'; expected senteval or corpus$"):
        DataConfig(_load(repo_root)).identity("images")


def test_a_cifar_source_is_the_configured_entry(repo_root):
    mirror = {"url": "http://mirror/cifar-10-python.tar.gz"}
    config = _load(repo_root, data={"cifar_sources": {"cifar10": mirror}})
    assert DataConfig(config).cifar_source_spec("cifar10") == mirror
    assert DataConfig(config).cifar_source_spec("cifar100") is None
    assert DataConfig(config).image_identity("cifar10")["source"] == "published"  # a mirror of the archive


def test_a_data_url_or_revision_the_lock_does_not_pin_stops_in_one_line(repo_root, tmp_path):
    lock = tmp_path / "lock.json"
    entry = {"url": f"{HUB}/main/senteval.tar", "revision": COMMIT, "sha256": "0" * 64, "bytes": 1}
    lock.write_text(json.dumps({"format": 1, "data": {"senteval.tar": entry}}))
    config = _load(repo_root, artifacts_lock=str(lock))
    DataConfig(config).check_lock()  # main, and the pinned commit itself, are the pin
    cl_config.Grid(
        _load(repo_root, artifacts_lock=str(lock), data={"senteval_url": f"{HUB}/{COMMIT}/senteval.tar"})
    ).data.check_lock()
    other = _load(
        repo_root, artifacts_lock=str(lock), data={"senteval_url": f"{HUB}/{'1' * 40}/senteval.tar"}
    )
    with pytest.raises(
        LockMismatch, match=f"^senteval.tar: .* names commit {'1' * 40}, the lock pins {COMMIT};"
    ):
        cl_config.Grid(other).data.check_lock()
    backbone = {
        "format": 1,
        "backbones": {"bert-base-uncased": {"revision": COMMIT, "requested": "main", "files": {}}},
    }
    lock.write_text(json.dumps(backbone))
    asks = _load(repo_root, artifacts_lock=str(lock), backbones={"bert-base": {"revision": "2" * 40}})
    with pytest.raises(LockMismatch, match="backbones.bert-base.revision"):
        DataConfig(asks).check_lock()


# --- a user's corpus is checked while the main process hashes data.wiki_path, before any job (each kind
# of refusal: tests/data/test_corpus_check.py)


def test_the_corpus_identity_is_the_checked_corpus_digest_or_its_refusal(repo_root, tmp_path):
    import hashlib

    from contrastlab.data.corpus_check import CorpusError

    corpus = tmp_path / "wiki.txt"
    config = _load(repo_root, "demo.yaml", data={"wiki_path": str(corpus)})
    corpus.write_text("".join(f"sentence {i} .\n" for i in range(98)) + "\n\n")  # 2 of 100: refused
    with pytest.raises(CorpusError) as refused:
        DataConfig(config).identity("corpus")
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"data.wiki_path {corpus} "), message
    assert "2 of its 100 lines are blank (first: line 99)" in message, message
    corpus.write_text("".join(f"sentence {i} .\n" for i in range(99)) + "\n")  # 1 of 100: accepted
    expected = hashlib.sha256(corpus.read_bytes()).hexdigest()
    assert DataConfig(config).identity("corpus") == {"corpus": "text", "sha256": expected}
