"""Text from a config, a file name or a metrics file, shown as it reads in a Markdown document: the
names (:func:`literals_of`) a renderer escapes at the one place it renders them (:func:`escape_markdown`;
report.html: :func:`contrastlab.report.html.inline`), never where a sentence is built."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["escape_markdown", "literals_of"]

#: A name holding any of these can read as Markdown or HTML: a link, code, emphasis, an escape, an
#: entity (an ampersand only where one begins: "Smith & Lee" reads as written), a tag or a table's column
#: break (an underscore only at a word's edge: inside a word it is literal to every Markdown reader).
_MARKUP = re.compile(r"[\\`*\[\]<>|!]|&#?\w+;|(?:^|\W)_|_(?:\W|$)")
#: CommonMark's backslash escapes for the characters above ("|" is escaped by the table's renderer,
#: :func:`contrastlab.report.document.to_markdown`).
_ESCAPES = {ch: "\\" + ch for ch in "\\`*_[]<>!&"}
#: An inline code span: its text is shown as it reads, so a name inside it is left alone.
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


def literals_of(*sources: object) -> frozenset[str]:
    """The strings (keys and values, nested) of ``sources`` (a config, paths) that would read as Markdown
    or HTML: the names the renderers show as they read, wherever a sentence of the report holds them
    (:func:`contrastlab.report.document.to_markdown`, :func:`contrastlab.report.html.render_html`).
    The report's own sentences are Markdown; a name from the config, a file name or a metrics file is
    text."""
    found: set[str] = set()
    stack = list(sources)
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list | tuple | set | frozenset):
            stack += list(item)
        elif item is not None and not isinstance(item, bool | int | float):
            text = str(item)
            # a name of markup alone ("*") would escape the report's own bold wherever it stands
            if _MARKUP.search(text) and any(ch.isalnum() for ch in text):
                found.add(text)
    return frozenset(found)


def escape_markdown(text: str, literals: Iterable[str]) -> str:
    """``text`` (Markdown) with every occurrence of each of ``literals`` outside a code span
    backslash-escaped, so that a Markdown reader shows the name as it reads (longest names first)."""
    names = sorted((n for n in literals if n in text), key=len, reverse=True)
    if not names:
        return text
    pattern = re.compile("|".join(re.escape(n) for n in names))

    def escape(match: re.Match) -> str:
        return "".join(_ESCAPES.get(ch, ch) for ch in match.group(0))

    pieces, last = [], 0
    for span in _CODE_SPAN.finditer(text):
        pieces += [pattern.sub(escape, text[last : span.start()]), span.group(0)]
        last = span.end()
    return "".join([*pieces, pattern.sub(escape, text[last:])])
