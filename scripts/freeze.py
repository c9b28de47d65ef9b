"""``make freeze CONFIG=<preset>``: version what the preset produced with DVC and push it
(contrastlab.versioning.freeze). Run it after the workflow has finished, never from a Snakemake job."""

import argparse
import sys

from contrastlab.versioning import VersioningError, freeze

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--configfile", default="config.yaml", help="the preset that ran (default: config.yaml)")
parser.add_argument("--no-push", action="store_true", help="dvc add only; push later with dvc push")
args = parser.parse_args()
try:
    pointers = freeze(args.configfile, push=not args.no_push)
except VersioningError as error:
    sys.exit(f"contrastlab: freeze: {error}")
print(f"contrastlab: froze {len(pointers)} outputs of {args.configfile}; commit their pointers:")
print(f"  git add {' '.join(map(str, pointers))} && git commit -m 'freeze {args.configfile}'")
