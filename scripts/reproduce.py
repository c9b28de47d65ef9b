"""The command of dvc.yaml's stage ``reproduce@<preset>`` (``dvc repro``, ``dvc exp run``): Snakemake on the
preset with params.yaml's overlay, then the run's record, its headline summary and its figures' PNGs
(contrastlab.versioning.reproduce). Snakemake's output goes to the terminal."""

import argparse
import sys

from contrastlab.versioning import VersioningError, reproduce

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--configfile", required=True, help="the preset (config.yaml, config/demo.yaml, ...)")
args = parser.parse_args()
try:
    reproduce(args.configfile)
except VersioningError as error:
    sys.exit(f"contrastlab: reproduce: {error}")
print(f"contrastlab: {args.configfile} ran; DVC versions its results and summary")
