"""The house style of every figure the pipeline draws, and how a figure is written to disk.

One look for all four papers: the Okabe-Ito colour-blind-safe palette, axis labels in the papers'
names and units, sizes that stay readable at page width (a page is 6.75 in wide, a column 3.25 in),
no chart junk. Every figure is written three ways (:func:`save`): a PNG for the report, a PDF for
papers, and a CSV of exactly the plotted numbers, so a reader can check a curve without the image.

Matplotlib runs on the ``Agg`` backend (no display on cluster nodes); importing this module changes no
global state: :func:`house_style` is a context manager.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import matplotlib
from matplotlib.text import Text

from contrastlab.paths import atomic_write

matplotlib.use("Agg", force=False)  # headless nodes; a no-op where a backend was chosen already

import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["PALETTE", "LINESTYLES", "PAGE_WIDTH_IN", "COLUMN_WIDTH_IN", "house_style", "figure", "save"]

#: Okabe & Ito (2008) colour-blind-safe palette, black last (used for references and "ours").
PALETTE: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#D55E00",  # vermillion
    "#F0E442",  # yellow
    "#000000",  # black
)
#: Distinguishes curves in greyscale print too (solid = a loss, dotted = the loss with OAR, ...).
LINESTYLES: tuple[str, ...] = ("-", ":", "--", "-.")

PAGE_WIDTH_IN = 6.75
COLUMN_WIDTH_IN = 3.25

_RC = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.3,
    "lines.markersize": 3.5,
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "pdf.fonttype": 42,  # TrueType in PDFs: editable text, accepted by publishers
    "image.cmap": "viridis",  # perceptually uniform and colour-blind safe
}


@contextlib.contextmanager
def house_style() -> Iterator[None]:
    """Matplotlib's settings for the house style, restored on exit."""
    with plt.rc_context(_RC), plt.style.context({"axes.prop_cycle": plt.cycler(color=PALETTE)}):
        yield


def figure(
    nrows: int = 1,
    ncols: int = 1,
    *,
    width: str | float = "page",
    aspect: float = 0.75,
    **subplots_kw,
):
    """A new ``(fig, axes)`` in the house style: ``width`` "page", "column" or inches; the height is
    ``aspect`` x the width of one panel x ``nrows``. Call inside :func:`house_style`."""
    inches = {"page": PAGE_WIDTH_IN, "column": COLUMN_WIDTH_IN}.get(width, width)
    if not isinstance(inches, int | float) or inches <= 0:
        raise ValueError(f"width must be 'page', 'column' or a positive number of inches, got {width!r}")
    height = inches / ncols * aspect * nrows
    subplots_kw.setdefault("layout", "constrained")  # titles, labels and colour bars never overlap
    return plt.subplots(nrows, ncols, figsize=(inches, height), squeeze=False, **subplots_kw)


def heatmap(ax, rows, value: str, *, index: str, columns: str, **mesh_kw):
    """Draw column ``value`` of the tidy frame ``rows`` on ``ax`` as a grid, ``columns`` horizontal and
    ``index`` vertical, one cell per point; returns the mesh (for a colour bar)."""
    grid = rows.pivot(index=index, columns=columns, values=value)
    x, y = grid.columns.to_numpy(), grid.index.to_numpy()
    return ax.pcolormesh(x, y, grid.to_numpy(), shading="nearest", rasterized=True, **mesh_kw)


def pi_ticks(axis, values: Sequence[tuple[float, str]]) -> None:
    """Ticks of ``axis`` at the angles of ``values``, labelled with their texts (``(math.pi, r"$\\pi$")``)."""
    axis.set_ticks([v for v, _ in values])
    axis.set_ticklabels([label for _, label in values])


def line(ax, curve, x: str, y: str, i: int, label: str, **plot_kw) -> None:
    """``curve[y]`` against ``curve[x]`` on ``ax`` in the palette's ``i``-th colour (cycling) and, unless
    ``linestyle`` is given, the ``i // len(PALETTE)``-th line style: no two of 32 lines look alike."""
    plot_kw.setdefault("linestyle", LINESTYLES[i // len(PALETTE) % len(LINESTYLES)])
    ax.plot(curve[x], curve[y], color=PALETTE[i % len(PALETTE)], label=label, **plot_kw)


def note(ax, text: str) -> None:
    """``text`` in the middle of the panel ``ax``: what it would show is not there (yet)."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)


def legend_or_note(ax, empty: bool, text: str, **legend) -> None:
    """The legend of ``ax``, or :func:`note` ``text`` where ``empty`` (the panel has no data)."""
    if empty:
        note(ax, text)
    else:
        ax.legend(loc="best", **legend)


def _laid_out(fig):
    """Solve ``fig``'s layout once and return its tight bounding box, padded as ``savefig.bbox: tight``
    pads it; the layout is then fixed. Left to ``savefig``, every format solves the constrained layout
    and draws a dry run for the tight box again: seconds per format for the many-panel heatmaps of Nie
    Fig. 2 and 4, in every run of the workflow."""
    fig.draw_without_rendering()
    bbox = fig.get_tightbbox(fig.canvas.get_renderer()).padded(plt.rcParams["savefig.pad_inches"])
    fig.set_layout_engine("none")
    return bbox


#: The columns of a figure's data that hold names from a config or a metrics file.
NAME_COLUMNS = frozenset({"experiment", "backbone", "method", "loss", "task", "dataset"})


def _names_as_text(fig, data) -> None:
    """Escape mathtext's ``$`` where a name of the plotted ``data`` (its column names and the cells of
    its :data:`NAME_COLUMNS`: a backbone, a method, a task from a config or a metrics file) stands in a
    label of ``fig``, so that the name is drawn as it reads; the figures' own labels keep their
    mathtext (``$\\tau$``)."""
    names = {str(c) for c in data.columns}
    for column in NAME_COLUMNS.intersection(data.columns):  # not "series": a figure's own labels
        names |= {v for v in data[column].unique() if isinstance(v, str)}
    names = sorted((n for n in names if "$" in n), key=len, reverse=True)
    if not names:
        return
    for text in fig.findobj(Text):
        label = text.get_text()
        for name in names:
            label = label.replace(name, name.replace("$", "\\$"))
        if label != text.get_text():
            text.set_text(label)


def save(fig, stem: str | Path, data=None) -> list[Path]:
    """Write ``fig`` to ``stem.png`` and ``stem.pdf`` (and ``data``, a DataFrame of the plotted numbers,
    to ``stem.csv``) atomically, close it, and return the paths written."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    if data is not None:
        _names_as_text(fig, data)
    bbox = _laid_out(fig)
    written = []
    for fmt in ("png", "pdf"):
        path = stem.with_name(f"{stem.name}.{fmt}")
        with atomic_write(path) as tmp:
            metadata = {"Creator": "contrastlab"} if fmt == "png" else None
            fig.savefig(tmp, format=fmt, bbox_inches=bbox, metadata=metadata)
        written.append(path)
    plt.close(fig)
    if data is not None:
        path = stem.with_name(f"{stem.name}.csv")
        with atomic_write(path) as tmp:
            data.to_csv(tmp, index=False, float_format="%.10g")
        written.append(path)
    return written
