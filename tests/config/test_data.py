"""What the config says about the data (contrastlab.config.data), and the Grid asking it: the data rooms
below take the values read here, never the config."""

from __future__ import annotations

import json

import pytest

from contrastlab import config as cl_config
from contrastlab.artifacts import LockMismatch
from contrastlab.config import data as cl_data
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
    assert grid.data.locations() == cl_data.data_locations(config)
    assert grid.data.identity("senteval") == cl_data.data_identity(config, "senteval")
    assert dict(grid.data) == config["data"] and grid.data.lock_file == cl_data.lock_file(config)
    for dataset in ("digits", "cifar10", "cifar100"):
        assert grid.data.image_identity(dataset) == cl_data.image_data_identity(config, dataset)
        assert grid.data.images_root(dataset) == cl_data.images_root(config, dataset)
    if name == "demo.yaml":
        assert grid.data.identity("senteval") == {"senteval": "fixture"}
        assert grid.data.identity("corpus") == {"corpus": "fixture", "sentences": 2000}
    else:
        assert grid.data.identity("senteval")["senteval"] == "published"


def test_the_report_names_the_lock_as_the_config_does_without_the_key(repo_root):
    """The tables job's config leaves artifacts_lock out (rules/tables.smk: a new pin re-renders
    nothing): the report's Inputs section still names `artifacts.lock.json`, not this checkout's path."""
    config = {k: v for k, v in _load(repo_root, "demo.yaml").items() if k not in ("data", "artifacts_lock")}
    assert cl_config.Grid(config).data.lock_file == "artifacts.lock.json"


def test_the_corpus_source_is_read_from_the_config(repo_root, tmp_path):
    config = _load(repo_root, artifacts_lock=str(tmp_path / "lock.json"))
    assert cl_data.corpus_source(config) == CorpusSource(
        wiki_path=None,
        fixture_sentences=None,
        url=f"{HUB}/main/wiki1m_for_simcse.txt",
        dest="resources/data/wiki1m_for_simcse.txt",
        lines=1_000_000,
        lock_file=str(tmp_path / "lock.json"),
    )
    demo = cl_data.corpus_source(_load(repo_root, "demo.yaml"))
    assert demo.fixture_sentences == 2000 and demo.dest == "resources/data/demo_corpus-2000.txt"
    # a user's file is named whatever data.fixture says
    mine = cl_data.corpus_source(_load(repo_root, "demo.yaml", data={"wiki_path": str(tmp_path / "w.txt")}))
    assert mine.wiki_path == mine.dest == str(tmp_path / "w.txt")


def test_an_unknown_data_kind_is_refused_in_one_line(repo_root):
    with pytest.raises(ValueError, match="^unknown data kind 'images'; expected senteval or corpus$"):
        cl_data.data_identity(_load(repo_root), "images")


def test_a_cifar_source_is_the_configured_entry(repo_root):
    mirror = {"url": "http://mirror/cifar-10-python.tar.gz"}
    config = _load(repo_root, data={"cifar_sources": {"cifar10": mirror}})
    assert cl_data.cifar_source_spec(config, "cifar10") == mirror
    assert cl_data.cifar_source_spec(config, "cifar100") is None
    assert cl_data.image_data_identity(config, "cifar10")["source"] == "published"  # a mirror of the archive


def test_a_data_url_or_revision_the_lock_does_not_pin_stops_in_one_line(repo_root, tmp_path):
    lock = tmp_path / "lock.json"
    entry = {"url": f"{HUB}/main/senteval.tar", "revision": COMMIT, "sha256": "0" * 64, "bytes": 1}
    lock.write_text(json.dumps({"format": 1, "data": {"senteval.tar": entry}}))
    config = _load(repo_root, artifacts_lock=str(lock))
    cl_data.check_lock(config)  # main, and the pinned commit itself, are the pin
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
        cl_data.check_lock(asks)


# --- Issue 63 (D1, D2, D4): a user's corpus that is not UTF-8, blank or empty is refused before any job
# (the workflow's main process hashes data.wiki_path while it reads the Snakefile), in one line naming
# data.wiki_path, the file and the fix.


def _corpus_error(repo_root, corpus) -> str:
    from contrastlab.data.corpus_check import CorpusError

    config = _load(repo_root, "demo.yaml", data={"wiki_path": str(corpus)})
    with pytest.raises(CorpusError) as refused:
        cl_data.data_identity(config, "corpus")
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"data.wiki_path {corpus} "), message
    return message


@pytest.mark.fault(
    "corpus with byte 0xe9 on line 100 (D1)", "refused before any job naming file, line 100, fix"
)
def test_a_corpus_that_is_not_utf8_is_refused_naming_the_line(repo_root, tmp_path, observed):
    corpus = tmp_path / "wiki.txt"
    lines = [f"sentence number {i} ." for i in range(1, 201)]
    corpus.write_bytes(
        "\n".join(lines).encode().replace(b"sentence number 100 ", b"sentence n\xe9 100 ") + b"\n"
    )
    message = _corpus_error(repo_root, corpus)
    assert "is not UTF-8: line 100 " in message and "0xe9" in message, message
    assert "iconv" in message, message
    observed(message[message.index("is not") :][:100])


@pytest.mark.fault("corpus of 2000 empty lines (D2)", "refused before training: no sentence")
def test_a_corpus_of_blank_lines_is_refused(repo_root, tmp_path, observed):
    corpus = tmp_path / "wiki.txt"
    corpus.write_text("\n" * 1990 + "  \n" * 10)
    message = _corpus_error(repo_root, corpus)
    assert "all of its 2000 lines are blank" in message, message
    observed(message[message.index("all of") :][:100])


def test_a_corpus_with_more_than_one_in_a_hundred_blank_lines_is_refused(repo_root, tmp_path):
    corpus = tmp_path / "wiki.txt"
    corpus.write_text("".join(f"sentence {i} .\n" for i in range(98)) + "\n\n")  # 2 of 100: refused
    message = _corpus_error(repo_root, corpus)
    assert "2 of its 100 lines are blank (first: line 99)" in message, message
    corpus.write_text("".join(f"sentence {i} .\n" for i in range(99)) + "\n")  # 1 of 100: accepted
    config = _load(repo_root, "demo.yaml", data={"wiki_path": str(corpus)})
    import hashlib

    expected = hashlib.sha256(corpus.read_bytes()).hexdigest()
    assert cl_data.data_identity(config, "corpus") == {"corpus": "text", "sha256": expected}


@pytest.mark.fault("empty corpus file (D4)", "refused as empty, naming data.wiki_path")
def test_an_empty_corpus_is_refused_as_empty(repo_root, tmp_path, observed):
    corpus = tmp_path / "wiki.txt"
    corpus.write_bytes(b"")
    message = _corpus_error(repo_root, corpus)
    assert message.startswith(f"data.wiki_path {corpus} is empty;"), message
    assert "analysis" not in message
    observed(message[:100])


# --- Review M7: a compressed or UTF-16 corpus is named as such, with its own fix; iconv -f latin1 is
# suggested only for text, and the garbage that advice made of a binary file is refused, not trained on.

_TEXT = "".join(f"sentence number {i} of the corpus .\n" for i in range(1, 2001))


def _zipped(text: str) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("wiki.txt", text)
    return buffer.getvalue()


def _compress(kind: str, text: str) -> bytes:
    import bz2
    import gzip
    import lzma

    data = text.encode()
    return {
        "gzip": lambda: gzip.compress(data),
        "bz2": lambda: bz2.compress(data),
        "xz": lambda: lzma.compress(data),
        "zstd": lambda: b"\x28\xb5\x2f\xfd\x64\x00\x00" + data[:64],  # a zstd frame's magic and header
        "zip": lambda: _zipped(text),
    }[kind]()


@pytest.mark.parametrize(
    ("kind", "suffix", "fix"),
    [
        pytest.param(
            kind,
            suffix,
            fix,
            marks=pytest.mark.fault(f"{kind}-compressed corpus (M7)", "refused in one line: decompress it"),
            id=kind,
        )
        for kind, suffix, fix in [
            ("gzip", ".gz", "gunzip -k"),
            ("bz2", ".bz2", "bunzip2 -k"),
            ("xz", ".xz", "unxz -k"),
            ("zstd", ".zst", "unzstd"),
            ("zip", ".zip", "unzip"),
        ]
    ],
)
def test_a_compressed_corpus_is_named_compressed_with_the_command_to_decompress_it(
    repo_root, tmp_path, observed, kind, suffix, fix
):
    corpus = tmp_path / f"corpus.txt{suffix}"
    corpus.write_bytes(_compress(kind, _TEXT))
    message = _corpus_error(repo_root, corpus)
    assert f"{corpus} is {kind}-compressed" in message, message
    assert f"{fix} " in message and str(corpus) in message[message.index(fix) :], message
    assert "latin1" not in message and "not UTF-8" not in message, message
    observed(message[message.index("is ") :][:110])


@pytest.mark.parametrize(
    ("encoding", "source"),
    [
        pytest.param(
            encoding,
            source,
            marks=pytest.mark.fault(f"{encoding} corpus (M7)", "refused in one line: iconv -f " + source),
            id=encoding,
        )
        for encoding, source in [
            ("utf-16", "utf-16"),  # with its byte-order mark
            ("utf-16-le", "utf-16le"),  # no mark: every other byte NUL
            ("utf-16-be", "utf-16be"),
            ("utf-32", "utf-32"),
        ]
    ],
)
def test_a_utf16_corpus_is_named_with_the_iconv_that_converts_it(
    repo_root, tmp_path, observed, encoding, source
):
    corpus = tmp_path / "wiki.txt"
    corpus.write_bytes(("caf\u00e9 " + _TEXT).encode(encoding))
    message = _corpus_error(repo_root, corpus)
    assert f"{corpus} is {encoding.upper()[:6]} text" in message, message
    assert f"iconv -f {source} -t utf-8 {corpus} > " in message, message
    assert "latin1" not in message, message
    observed(message[message.index("is ") :][:110])


@pytest.mark.parametrize(
    ("original", "expected"),
    [
        pytest.param(
            original,
            expected,
            marks=pytest.mark.fault(f"{original} put through iconv -f latin1 (M7)", "refused in one line"),
            id=name,
        )
        for name, original, expected in [
            (
                "gzip",
                "gzip file",
                "binary garbage, not text: a gzip-compressed file put through iconv -f latin1",
            ),
            (
                "utf-16",
                "UTF-16 file",
                "binary garbage, not text: a UTF-16 text file put through iconv -f latin1",
            ),
            (
                "gzip-headless",
                "gzip file, its first line cut",
                "control characters, NULs or U+FFFD (first: line 1)",
            ),
        ]
    ],
)
def test_a_binary_file_converted_as_latin1_is_refused_as_garbage(
    repo_root, tmp_path, observed, original, expected
):
    import gzip
    import random

    words = random.Random(7).choices(["the", "cat", "sat", "on", "a", "mat", "and", "dog"], k=40000)
    text = "".join(" ".join(words[i : i + 10]) + " .\n" for i in range(0, len(words), 10))
    raw = text.encode("utf-16") if original.startswith("UTF-16") else gzip.compress(text.encode())
    garbage = raw.decode("latin1").encode()  # what iconv -f latin1 -t utf-8 gives
    # ... and the review's next step: the blank lines removed as the blank-line check suggests
    garbage = b"".join(line for line in garbage.splitlines(keepends=True) if line.strip())
    if original.endswith("cut"):  # no magic bytes left to recognise: the control characters refuse it
        garbage = garbage[garbage.index(b"\n") + 1 :]
    corpus = tmp_path / "corpus-utf8.txt"
    corpus.write_bytes(garbage)
    message = _corpus_error(repo_root, corpus)
    assert expected in message, message
    if not original.endswith("cut"):
        assert "<original>" in message and ("gunzip -k" in message or "iconv -f utf-16 " in message), message
    observed(message[message.index("is ") :][:110])


def test_latin1_text_is_still_told_to_convert_with_iconv_latin1(repo_root, tmp_path):
    corpus = tmp_path / "wiki.txt"
    corpus.write_bytes(("caf\u00e9 cr\u00e8me br\u00fbl\u00e9e .\n" + _TEXT).encode("latin1"))
    message = _corpus_error(repo_root, corpus)
    assert "is not UTF-8: line 1 holds byte 0xe9" in message, message
    assert f"iconv -f latin1 -t utf-8 {corpus} > " in message, message


def test_text_with_a_stray_control_character_is_still_accepted(repo_root, tmp_path):
    import hashlib

    corpus = tmp_path / "wiki.txt"
    corpus.write_bytes(("caf\u00e9 a\x01b \u00e0 la cr\u00e8me .\n" + _TEXT).encode())
    config = _load(repo_root, "demo.yaml", data={"wiki_path": str(corpus)})
    expected = hashlib.sha256(corpus.read_bytes()).hexdigest()
    assert cl_data.data_identity(config, "corpus") == {"corpus": "text", "sha256": expected}
