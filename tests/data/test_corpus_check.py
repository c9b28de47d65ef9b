"""A user's corpus checked while it is hashed (contrastlab.data.corpus_check): its sha256, or one line naming
the key, the file and the fix for a corpus not UTF-8 (D1), blank (D2), empty (D4), compressed, UTF-16/32
or put through ``iconv -f latin1`` (M7). Asked before any job: tests/config/test_data.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrastlab.data.corpus_check import CHUNK, CorpusError, check_corpus
from contrastlab.data.download import sha256_file

_TEXT = "".join(f"sentence number {i} of the corpus .\n" for i in range(1, 2001))


@pytest.fixture
def corpus(tmp_path) -> Path:
    """Where a user's corpus lies (data.wiki_path)."""
    return tmp_path / "wiki.txt"


def _refused(corpus: Path) -> str:
    """The one-line refusal of ``corpus``, which names the key and the file first."""
    with pytest.raises(CorpusError) as refused:
        check_corpus(corpus)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"data.wiki_path {corpus} "), message
    return message


def test_the_digest_is_the_files_sha256_whatever_the_reads_and_the_last_newline(corpus):
    """Lines spanning the 1 MiB reads, and a last line without its newline, are hashed as the file is."""
    line = "a sentence of exactly fifty bytes, newline too ..\n"
    corpus.write_text(line * (3 * CHUNK // len(line)) + "the last line, no newline")
    assert CHUNK % len(line) != 0 and corpus.stat().st_size > 3 * CHUNK - len(line)
    assert check_corpus(corpus) == sha256_file(corpus)


def test_a_line_is_counted_where_it_is_past_the_first_read(corpus):
    """Line numbers run on across the 1 MiB reads: 30,000 lines of 50 bytes (1.43 MiB), blank from line
    29,001 (1,000 of them: 3.3%) and one byte that is not UTF-8 on line 25,000."""
    line = b"a sentence of exactly fifty bytes, newline too ..\n"
    corpus.write_bytes(line * 29_000 + b"\n" * 1_000)
    assert corpus.stat().st_size > CHUNK
    assert _refused(corpus) == (
        f"data.wiki_path {corpus} has too many blank lines: 1000 of its 30000 lines are blank (first: line "
        f"29001), more than 1%, each a sentence of no word; the corpus is one sentence per line: remove the "
        f"blank lines (grep -v '^[[:space:]]*$' {corpus} > corpus.txt) and point data.wiki_path at the result"
    )
    corpus.write_bytes(line * 24_999 + b"caf\xe9" + line[4:] + line * 1_000)
    assert _refused(corpus).startswith(
        f"data.wiki_path {corpus} is not UTF-8: line 25000 holds byte 0xe9 (invalid continuation byte); "
    )


def test_one_blank_line_in_a_hundred_is_accepted_and_more_is_not(corpus):
    corpus.write_text("".join(f"sentence {i} .\n" for i in range(198)) + "  \n\n")  # 2 of 200
    assert check_corpus(corpus) == sha256_file(corpus)
    corpus.write_text("".join(f"sentence {i} .\n" for i in range(197)) + "\n\t\n \n")  # 3 of 200
    assert "3 of its 200 lines are blank (first: line 198)" in _refused(corpus)


@pytest.mark.fault(
    "corpus with byte 0xe9 on line 100 (D1)", "refused before any job naming file, line 100, fix"
)
def test_a_corpus_that_is_not_utf8_is_refused_naming_the_line(corpus, observed):
    lines = [f"sentence number {i} ." for i in range(1, 201)]
    corpus.write_bytes(
        "\n".join(lines).encode().replace(b"sentence number 100 ", b"sentence n\xe9 100 ") + b"\n"
    )
    message = _refused(corpus)
    assert "is not UTF-8: line 100 " in message and "0xe9" in message, message
    assert "iconv" in message, message
    observed(message[message.index("is not") :][:100])


@pytest.mark.fault("corpus of 2000 empty lines (D2)", "refused before training: no sentence")
def test_a_corpus_of_blank_lines_is_refused(corpus, observed):
    corpus.write_text("\n" * 1990 + "  \n" * 10)
    message = _refused(corpus)
    assert "all of its 2000 lines are blank" in message, message
    observed(message[message.index("all of") :][:100])


@pytest.mark.fault("empty corpus file (D4)", "refused as empty, naming data.wiki_path")
def test_an_empty_corpus_is_refused_as_empty(corpus, observed):
    corpus.write_bytes(b"")
    message = _refused(corpus)
    assert message == (
        f"data.wiki_path {corpus} is empty; point data.wiki_path at a corpus of one sentence per line, or "
        "unset it to train on the config's download"
    )
    observed(message[:100])


def _compress(kind: str, text: str) -> bytes:
    import bz2
    import gzip
    import io
    import lzma
    import zipfile

    if kind == "zstd":  # a zstd frame's magic and header
        return b"\x28\xb5\x2f\xfd\x64\x00\x00" + text.encode()[:64]
    if kind != "zip":
        return {"gzip": gzip, "bz2": bz2, "xz": lzma}[kind].compress(text.encode())
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("wiki.txt", text)
    return buffer.getvalue()


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
    tmp_path, observed, kind, suffix, fix
):
    corpus = tmp_path / f"corpus.txt{suffix}"
    corpus.write_bytes(_compress(kind, _TEXT))
    message = _refused(corpus)
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
def test_a_utf16_corpus_is_named_with_the_iconv_that_converts_it(corpus, observed, encoding, source):
    corpus.write_bytes(("caf\u00e9 " + _TEXT).encode(encoding))
    message = _refused(corpus)
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
def test_a_binary_file_converted_as_latin1_is_refused_as_garbage(tmp_path, observed, original, expected):
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
    message = _refused(corpus)
    assert expected in message, message
    if not original.endswith("cut"):
        assert "<original>" in message and ("gunzip -k" in message or "iconv -f utf-16 " in message), message
    observed(message[message.index("is ") :][:110])


def test_latin1_text_is_still_told_to_convert_with_iconv_latin1(corpus):
    corpus.write_bytes(("caf\u00e9 cr\u00e8me br\u00fbl\u00e9e .\n" + _TEXT).encode("latin1"))
    message = _refused(corpus)
    assert "is not UTF-8: line 1 holds byte 0xe9" in message, message
    assert f"iconv -f latin1 -t utf-8 {corpus} > " in message, message


def test_text_with_a_stray_control_character_is_still_accepted(corpus):
    corpus.write_bytes(("caf\u00e9 a\x01b \u00e0 la cr\u00e8me .\n" + _TEXT).encode())
    assert check_corpus(corpus) == sha256_file(corpus)
