"""The run's search points, priced once per run, not once per job.

Every job's process reads the Snakefile again, and the rules need the search points while it is read.
The main process prices every search (:func:`contrastlab.cost.budget.searched_points`) and writes what it
kept when the run starts (:func:`write_points`, ``<results_dir>/state/search_points.json``); a job reads
that file (:func:`run_points`) when it is this config's and prices afresh only when it is not. A dry run
writes nothing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from contrastlab.paths import Results, write_json
from contrastlab.search import SearchPoint

#: The file's format: a file of another format is priced afresh (1 kept a point's grid as a JSON object,
#: whose keys the file sorts, so that a job named a point otherwise than the main process).
FORMAT = 2


def points_file(results: Results) -> str:
    """Where the run's points are kept: ``<results_dir>/state/search_points.json``."""
    return results.state("search_points.json")


def _decoded(rows: Sequence[Mapping[str, Any]]) -> list[SearchPoint]:
    points = []
    for row in rows:
        around = {axis: tuple(move) for axis, move in row["around"]}
        points.append(SearchPoint(**{**row, "grid": dict(row["grid"]), "around": around}))
    return points


def write_points(path: str | Path, digest: str, points: Sequence[SearchPoint]) -> bool:
    """Keep the run's points for its jobs (the main process, when the run starts), priced for the config
    of ``digest`` (:attr:`contrastlab.config.Grid.digest`). Nothing is written
    where JSON would not give the same points back (a grid value JSON cannot keep): the jobs then price
    for themselves. Returns whether the file was written."""
    # a point's grid and moves as lists of pairs, not JSON objects: their order is the order of the
    # point's name (SearchPoint.name), and the file is written with sorted keys
    rows = [
        {**dataclasses.asdict(p), "grid": list(p.grid.items()), "around": list(p.around.items())}
        for p in points
    ]
    back = _decoded(json.loads(json.dumps(rows, sort_keys=True)))
    if back != list(points) or [p.name for p in back] != [p.name for p in points]:
        return False
    write_json(path, {"format": FORMAT, "config": digest, "points": rows})
    return True


def read_points(path: str | Path, digest: str) -> list[SearchPoint] | None:
    """The points :func:`write_points` kept for the config of ``digest``, or None (no file, another
    config, another format, an unreadable file)."""
    try:
        kept = json.loads(Path(path).read_text(encoding="utf-8"))
        if kept.get("format") != FORMAT or kept.get("config") != digest:
            return None
        return _decoded(kept["points"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def run_points(
    path: str | Path, digest: str, price: Callable[[], list[SearchPoint]], *, main: bool
) -> list[SearchPoint]:
    """The search points of this run: ``price()`` in the main process; in a job's process the points the
    main process kept (:func:`read_points`), else ``price()``."""
    kept = None if main else read_points(path, digest)
    return price() if kept is None else kept
