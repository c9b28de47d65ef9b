"""The papers' figures by name: each drawing function registers itself in its own module with
:func:`figure` (``@figure("li2024/li2024_fig5")``), and a figure job calls ``drawing(name).draw(...)``.

What a figure reads comes from its paper's record (``figures`` in ``report/claims/<prefix>.yaml``,
:data:`contrastlab.figures.catalog.RECORD_FIGURES`), which the Snakefile reads before any drawing code is
imported. The drawing module of ``<prefix>/<name>`` is ``contrastlab.figures.<prefix>``: :func:`drawing`
imports it, which fills :data:`FIGURES`. Import-light (no matplotlib), as the catalogue.

``draw`` is called by the figure's reading kind: ``logs`` or ``metrics`` as ``draw(results, stem,
experiments=..., points=...)`` (the run's :class:`~contrastlab.paths.Results`, the record's configured
experiments and their sweep points); ``analytic`` (no training) as ``draw(stem, size)`` with the config's
``analytic_figures`` (``points``, ``batches``). Each returns the paths it wrote.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from contrastlab.figures.catalog import RECORD_FIGURES
from contrastlab.papers import paper_of

__all__ = ["FIGURES", "Figure", "drawing", "figure"]


@dataclass(frozen=True)
class Figure:
    """A registered figure: what it reads (its record's ``reads``) and the function that draws it."""

    reads: str
    draw: Callable[..., list[Path]]


#: Figure name -> its drawing; filled as the drawing modules are imported (:func:`drawing`).
FIGURES: dict[str, Figure] = {}


def figure(name: str) -> Callable[[Callable[..., list[Path]]], Callable[..., list[Path]]]:
    """Register the decorated function as the drawing of figure ``name``, which a paper's record must
    list (its ``reads`` comes from there); raises ``ValueError`` (one line) otherwise or for a second
    function under one name."""

    def register(draw: Callable[..., list[Path]]) -> Callable[..., list[Path]]:
        if name not in RECORD_FIGURES:
            raise ValueError(
                f"contrastlab: @figure({name!r}) names no figure of a paper's record: add it under `figures` "
                f"in src/contrastlab/report/claims/{paper_of(name)}.yaml (docs/adding-a-paper.md)"
            )
        if name in FIGURES and FIGURES[name].draw is not draw:
            raise ValueError(f"contrastlab: two functions draw figure {name!r}: keep one @figure({name!r})")
        FIGURES[name] = Figure(RECORD_FIGURES[name].reads, draw)
        return draw

    return register


def drawing(name: str) -> Figure:
    """The registered drawing of figure ``name``, after importing its paper's drawing module
    (``contrastlab.figures.<prefix>``); raises ``ValueError`` (one line) where no function draws it."""
    module = f"contrastlab.figures.{paper_of(name)}"
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name != module:
            raise
    if name not in FIGURES:
        raise ValueError(
            f"contrastlab: no function draws figure {name!r}: register one with @figure({name!r}) in "
            f"src/contrastlab/figures/{paper_of(name)}.py (docs/adding-a-paper.md)"
        )
    return FIGURES[name]
