"""Two runs side by side (``make compare A=<results> B=<results>``): per table cell the two means, their
difference and whether the seeds' noise explains it, per claim the two verdicts
(contrastlab.report.compare). Writes ``<B>/compare.md`` (or ``--out``) and the per-cell CSV beside it."""

from __future__ import annotations

import argparse
import sys

from contrastlab.report.compare import compare_runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="the first run's results folder (e.g. results/demo)")
    parser.add_argument("b", help="the second run's results folder")
    parser.add_argument("--out", help="the report's path (default: <b>/compare.md)")
    args = parser.parse_args(argv)
    try:
        path = compare_runs(args.a, args.b, args.out)
    except (FileNotFoundError, ValueError) as err:
        print(f"contrastlab: {err}", file=sys.stderr)
        return 1
    print(path.read_text(encoding="utf-8").split("\n## ", 1)[0].rstrip())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
