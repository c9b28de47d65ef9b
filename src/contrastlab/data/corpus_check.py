"""A user's training corpus (``data.wiki_path``) checked while it is hashed, before any job: UTF-8, not
empty, and at most one line in a hundred blank (:data:`MAX_BLANK_SHARE`). One pass over the file in
1 MiB blocks of whole lines (a fraction of a second more than the hash alone for wiki1m's 1M lines).

A blank line (empty, or spaces only) is a sentence of no token that trains as one (the corpus is one
sentence per line, :func:`contrastlab.training.corpus.read_sentences`): a corpus of them trained and
was scored without a word. wiki1m has none; the share allowed is for a stray line or two.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

#: More blank lines than this share of a corpus's lines refuse it.
MAX_BLANK_SHARE = 0.01
CHUNK = 1 << 20
_BLANK = re.compile(rb"^[ \t\r\f\v]*\n", re.MULTILINE)
KEY = "data.wiki_path"


class CorpusError(ValueError):
    """A user's corpus that cannot be trained on: the message names the file, the problem and the fix."""


def check_corpus(path: str | Path) -> str:
    """The sha256 of the corpus at ``path``, after checking it is UTF-8 (else the first bad line), not
    empty, and not more than :data:`MAX_BLANK_SHARE` blank lines; raises :class:`CorpusError`."""
    path = Path(path)
    digest = hashlib.sha256()
    lines = blank = 0
    first_blank: int | None = None
    tail = b""
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
            block = tail + block
            cut = block.rfind(b"\n") + 1  # whole lines only: a line may span two reads
            block, tail = block[:cut], block[cut:]
            found = _check_lines(path, block, lines)
            if found and first_blank is None:
                first_blank = lines + block.count(b"\n", 0, found[0]) + 1
            blank += len(found)
            lines += block.count(b"\n")
    if tail:  # a last line without its newline
        found = _check_lines(path, tail + b"\n", lines)
        if found and first_blank is None:
            first_blank = lines + 1
        blank, lines = blank + len(found), lines + 1
    _check_counts(path, lines, blank, first_blank)
    return digest.hexdigest()


def _check_lines(path: Path, block: bytes, before: int) -> list[int]:
    """The offsets of the blank lines in ``block`` (whole lines, ``before`` lines above it); raises
    :class:`CorpusError` at the first byte that is not UTF-8 (a sequence never spans a newline)."""
    try:
        block.decode("utf-8")
    except UnicodeDecodeError as error:
        line = before + block.count(b"\n", 0, error.start) + 1
        byte = block[error.start : error.start + 1].hex()
        raise CorpusError(
            f"{KEY} {path} is not UTF-8: line {line} holds byte 0x{byte} ({error.reason}); convert the file "
            f"(e.g. iconv -f latin1 -t utf-8 {path} > corpus-utf8.txt) and point {KEY} at the result"
        ) from None
    return [match.start() for match in _BLANK.finditer(block)]


def _check_counts(path: Path, lines: int, blank: int, first_blank: int | None) -> None:
    fix = (
        f"the corpus is one sentence per line: remove the blank lines (grep -v '^[[:space:]]*$' {path} > "
        f"corpus.txt) and point {KEY} at the result"
    )
    if lines == 0:
        raise CorpusError(
            f"{KEY} {path} is empty; point {KEY} at a corpus of one sentence per line, or unset it to "
            "train on the config's download"
        )
    if blank == lines:
        raise CorpusError(f"{KEY} {path} holds no sentence: all of its {lines} lines are blank; {fix}")
    if blank > MAX_BLANK_SHARE * lines:
        raise CorpusError(
            f"{KEY} {path} has too many blank lines: {blank} of its {lines} lines are blank (first: line "
            f"{first_blank}), more than {MAX_BLANK_SHARE:.0%}, each a sentence of no word; {fix}"
        )
