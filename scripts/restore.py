"""``make restore CONFIG=<preset>``, after ``dvc pull``: Snakemake takes the pulled outputs as finished,
and the tables and report are rendered again from the pulled metrics (contrastlab.versioning.restore)."""

import argparse
import sys

from contrastlab.versioning import VersioningError, restore

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument(
    "--configfile", default="config.yaml", help="the preset that was frozen (default: config.yaml)"
)
args = parser.parse_args()
try:
    tables = restore(args.configfile)
except VersioningError as error:
    sys.exit(f"contrastlab: restore: {error}")
print(f"contrastlab: restored {args.configfile}: nothing left to run; rendered {len(tables)} table files")
