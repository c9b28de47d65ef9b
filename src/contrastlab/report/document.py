"""The report's own use of its blocks (:mod:`contrastlab.blocks`): the ids that report.html gives its
headings and figures (:func:`assign_ids`), the contents label of a long heading (:func:`short_label`)
and the walk through folds (:func:`walk`). :mod:`.sections` and :mod:`.answer` build the blocks;
:func:`contrastlab.blocks.to_markdown` writes ``report.md`` and :mod:`.html` report.html from them.

Example::

    >>> from contrastlab.blocks import Fold, Heading
    >>> page = [Heading(2, "Nie 2023", id="nie2023"), Fold("more", [Heading(3, "Claims")])]
    >>> sorted(assign_ids(page).values())
    ['nie2023', 'nie2023-claims']
"""

from __future__ import annotations

from collections.abc import Iterator

from markdown.extensions.toc import slugify

from contrastlab.blocks import Figure, Fold, Heading

__all__ = ["assign_ids", "short_label", "walk"]


def short_label(text: str) -> str:
    """A long heading's contents label: its words up to a colon ("Search of nie2023")."""
    return text.split(":", 1)[0] if len(text) > 40 and ":" in text else text


def assign_ids(blocks: list) -> dict[int, str]:
    """``id(heading) -> its id`` for every :class:`Heading` and :class:`Figure` of ``blocks`` (folds
    included), in document order: its own ``id`` where it has one, else the slug of its label, after the id of
    the heading above it for a heading below level 2 (``nie2023-claims``); a repeat gets ``-2``, ``-3``."""
    ids: dict[int, str] = {}
    used: set[str] = set()
    parents: dict[int, str] = {}  # level -> id of the last heading at that level
    for block in walk(blocks):
        if isinstance(block, Figure):
            level, anchor = 4, block.id
        elif isinstance(block, Heading):
            level, anchor = block.level, block.id
            if not anchor:
                above = next((parents[k] for k in range(level - 1, 1, -1) if k in parents), None)
                anchor = slugify(block.label or short_label(block.text), "-") or "section"
                anchor = f"{above}-{anchor}" if above and level > 2 else anchor
        else:
            continue
        candidate, n = anchor, 1
        while candidate in used:
            n += 1
            candidate = f"{anchor}-{n}"
        used.add(candidate)
        ids[id(block)] = candidate
        parents = {k: v for k, v in parents.items() if k < level}
        parents[level] = candidate
    return ids


def walk(blocks: list) -> Iterator:
    """Every block of ``blocks``, a fold's own blocks after it."""
    for block in blocks:
        yield block
        if isinstance(block, Fold):
            yield from walk(block.blocks)
