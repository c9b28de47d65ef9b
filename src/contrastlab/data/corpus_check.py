"""A user's training corpus (``data.wiki_path``) checked while it is hashed, before any job: UTF-8, not
empty, at most one line in a hundred blank (:data:`MAX_BLANK_SHARE`) or binary (:data:`MAX_BINARY_SHARE`).
One pass in 1 MiB blocks of whole lines (a fraction of a second more than the hash for wiki1m).

A blank line is a sentence of no token that trains as one: a corpus of them trained and was scored
without a word. wiki1m has none; the share allowed is for a stray line or two.

A compressed file (gzip, bz2, xz, zstd, zip) or UTF-16/32 text is named from its first bytes, with the
command that makes it text; ``iconv -f latin1`` is suggested only for text that is neither, since a
binary file put through it is valid UTF-8 garbage, which (a line with one byte in ten or more a control
character, NUL or U+FFFD) is refused too.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

#: More blank lines than this share of a corpus's lines refuse it.
MAX_BLANK_SHARE = 0.01
#: More binary lines (at least one byte in ten a control character) than this share refuse a corpus.
MAX_BINARY_SHARE = 0.01
CHUNK = 1 << 20
_BLANK = re.compile(rb"^[ \t\r\f\v]*\n", re.MULTILINE)
#: C0 controls but the whitespace ones, DEL, C1 controls (UTF-8), and U+FFFD, the replacement character.
_CONTROL = re.compile(rb"[\x00-\x08\x0e-\x1f\x7f]|\xc2[\x80-\x9f]|\xef\xbf\xbd")
_C1 = re.compile(rb"\xc2[\x80-\x9f]")
#: Every byte but those that begin a control character (C0, DEL), a C1 one (0xc2) or U+FFFD (0xef).
_NOT_CONTROL = bytes(b for b in range(256) if not (b <= 8 or 14 <= b <= 31 or b in (0x7F, 0xC2, 0xEF)))
#: (first bytes, kind, the command that decompresses it keeping the file)
_COMPRESSED = (
    (re.compile(rb"\x1f\x8b"), "gzip", "gunzip -k"),
    (re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)"), "bz2", "bunzip2 -k"),
    (re.compile(rb"\xfd7zXZ\x00"), "xz", "unxz -k"),
    (re.compile(rb"\x28\xb5\x2f\xfd"), "zstd", "unzstd"),
    (re.compile(rb"PK\x03\x04"), "zip", "unzip"),
)
#: (byte-order mark, encoding, iconv's name for it); UTF-32's marks first: they begin as UTF-16's do.
_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32", "utf-32"),
    (b"\x00\x00\xfe\xff", "UTF-32", "utf-32"),
    (b"\xff\xfe", "UTF-16", "utf-16"),
    (b"\xfe\xff", "UTF-16", "utf-16"),
)
KEY = "data.wiki_path"
_RESULT = f"and point {KEY} at the result"


class CorpusError(ValueError):
    """A user's corpus that cannot be trained on: the message names the file, the problem and the fix."""


@dataclass
class _Tally:
    """Lines, blank lines and binary lines counted so far, with the first of each kind."""

    lines: int = 0
    blank: int = 0
    binary: int = 0
    first_blank: int | None = None
    first_binary: int | None = None

    def add(self, path: Path, block: bytes) -> None:
        """Counts ``block`` (whole lines, each ending in a newline); raises at a byte that is not UTF-8."""
        found = _check_lines(path, block, self.lines)
        if found and self.first_blank is None:
            self.first_blank = self.lines + block.count(b"\n", 0, found[0]) + 1
        self.blank += len(found)
        binary = _binary_lines(block)
        if binary and self.first_binary is None:
            self.first_binary = self.lines + binary[0]
        self.binary += len(binary)
        self.lines += block.count(b"\n")


def check_corpus(path: str | Path) -> str:
    """The sha256 of the corpus at ``path``, after checking it is not compressed or UTF-16/32, is UTF-8
    (else the first bad line), not empty, and not more than :data:`MAX_BLANK_SHARE` blank lines nor
    :data:`MAX_BINARY_SHARE` binary ones; raises :class:`CorpusError`."""
    path = Path(path)
    digest = hashlib.sha256()
    tally = _Tally()
    tail = b""
    with open(path, "rb") as handle:
        head = handle.read(CHUNK)
        _check_head(path, head)
        for block in itertools.chain([head], iter(lambda: handle.read(CHUNK), b"")):
            digest.update(block)
            block = tail + block
            cut = block.rfind(b"\n") + 1  # whole lines only: a line may span two reads
            block, tail = block[:cut], block[cut:]
            tally.add(path, block)
    if tail:  # a last line without its newline
        tally.add(path, tail + b"\n")
    _check_counts(path, tally)
    return digest.hexdigest()


def _check_head(path: Path, head: bytes) -> None:
    """Raises :class:`CorpusError` where the file's first bytes say it is compressed or UTF-16/32 text
    (a byte-order mark, or every other byte NUL in the first KiB), or say so once read back from latin1:
    such a file already put through ``iconv -f latin1``."""
    try:  # the first bytes as they were before iconv -f latin1 -t utf-8
        before = head[:64].decode("utf-8", "ignore").encode("latin1")
    except UnicodeEncodeError:
        before = head[:64]
    found = _identify(head)
    mangled = _identify(before) if found is None and before != head[:64] else None
    if mangled is not None:
        what, fix = mangled
        raise CorpusError(
            f"{KEY} {path} is binary garbage, not text: a {what.split(',')[0]} file put through iconv -f "
            f"latin1; start again from the original: {fix.replace('FILE', '<original>')} {_RESULT}"
        )
    if found is None:
        found = _utf16_without_bom(head[:1024])
    if found is not None:
        what, fix = found
        raise CorpusError(f"{KEY} {path} is {what}: {fix.replace('FILE', shlex.quote(str(path)))} {_RESULT}")


def _identify(head: bytes) -> tuple[str, str] | None:
    """What the first bytes say the file is (compressed, or UTF-16/32 text by its byte-order mark) and the
    command that makes it UTF-8 text, naming it FILE."""
    for magic, kind, tool in _COMPRESSED:
        if magic.match(head):
            return f"{kind}-compressed, not text", f"{tool.split()[0]} it ({tool} FILE)"
    for bom, name, source in _BOMS:
        if head.startswith(bom):
            return _to_utf8(name, source)
    return None


def _to_utf8(name: str, source: str) -> tuple[str, str]:
    return f"{name} text, not UTF-8", f"convert it (iconv -f {source} -t utf-8 FILE > FILE.utf8.txt)"


def _utf16_without_bom(head: bytes) -> tuple[str, str] | None:
    """UTF-16 text without a byte-order mark: nine in ten of its odd bytes NUL (little-endian) or of its
    even ones (big-endian), and few of the others, as ASCII or Latin text gives."""
    even, odd = head[0::2], head[1::2][: len(head) // 2]
    if len(odd) < 4:
        return None
    for nuls, others, source in ((odd, even, "utf-16le"), (even, odd, "utf-16be")):
        if nuls.count(0) >= 0.9 * len(nuls) and others.count(0) < 0.1 * len(others):
            return _to_utf8("UTF-16", source)
    return None


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
            f"(e.g. iconv -f latin1 -t utf-8 {shlex.quote(str(path))} > corpus-utf8.txt) and point {KEY} at "
            "the result"
        ) from None
    return [match.start() for match in _BLANK.finditer(block)]


def _binary_lines(block: bytes) -> list[int]:
    """The numbers (from 1) of the lines of ``block`` (whole lines) of binary data: at least one byte in
    ten a control character, NUL or U+FFFD. A block of text without one costs one byte-table pass."""
    if not _has_control(block):
        return []
    lines = block.split(b"\n")[:-1]
    return [
        number for number, line in enumerate(lines, 1) if 10 * len(_CONTROL.findall(line)) >= len(line) > 0
    ]


def _has_control(block: bytes) -> bool:
    """Whether ``block`` holds a control character, NUL or U+FFFD: a byte-table pass (a regex over the
    whole block costs as much as the hash), then a search only for a block holding 0xc2 or 0xef."""
    rest = block.translate(None, _NOT_CONTROL)
    return bool(
        rest.translate(None, b"\xc2\xef")
        or (b"\xc2" in rest and _C1.search(block))
        or (b"\xef" in rest and b"\xef\xbf\xbd" in block)
    )


def _check_counts(path: Path, tally: _Tally) -> None:
    lines, blank = tally.lines, tally.blank
    fix = (
        f"the corpus is one sentence per line: remove the blank lines (grep -v '^[[:space:]]*$' {path} > "
        f"corpus.txt) and point {KEY} at the result"
    )
    if lines == 0:
        raise CorpusError(
            f"{KEY} {path} is empty; point {KEY} at a corpus of one sentence per line, or unset it to "
            "train on the config's download"
        )
    if tally.binary > MAX_BINARY_SHARE * lines:
        raise CorpusError(
            f"{KEY} {path} is binary data, not text: {tally.binary} of its {lines} lines are largely control "
            f"characters, NULs or U+FFFD (first: line {tally.first_binary}), as iconv -f latin1 makes of a "
            f"compressed or UTF-16 file; point {KEY} at the original file to be told how to convert it"
        )
    if blank == lines:
        raise CorpusError(f"{KEY} {path} holds no sentence: all of its {lines} lines are blank; {fix}")
    if blank > MAX_BLANK_SHARE * lines:
        raise CorpusError(
            f"{KEY} {path} has too many blank lines: {blank} of its {lines} lines are blank (first: line "
            f"{tally.first_blank}), more than {MAX_BLANK_SHARE:.0%}, each a sentence of no word; {fix}"
        )
