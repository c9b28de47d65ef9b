"""``make freeze CONFIG=<preset>``: version a finished run of the preset with DVC and push it
(contrastlab.versioning.freeze: ``dvc repro`` of its stage, ``dvc add`` of the shared resources, ``dvc
push``). Run it after the workflow has finished, never from a Snakemake job."""

import argparse
import sys

from contrastlab.versioning import VersioningError, freeze

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--configfile", default="config.yaml", help="the preset that ran (default: config.yaml)")
parser.add_argument("--no-push", action="store_true", help="version only; push later with dvc push")
args = parser.parse_args()
try:
    files = freeze(args.configfile, push=not args.no_push)
except VersioningError as error:
    sys.exit(f"contrastlab: freeze: {error}")
print(f"contrastlab: froze {args.configfile}; commit what points at it:")
print(f"  git add {' '.join(map(str, files))} && git commit -m 'freeze {args.configfile}'")
