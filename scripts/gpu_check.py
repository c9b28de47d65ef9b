"""make gpu-check: the GPU path in about eight minutes on one GPU through Snakemake and the real rules.

Runs config/gpu-check.yaml's cells (one sentence cell per precision, the fp16 one killed after its first
snapshot and resumed; one MACL and one OAR image cell), checks that each sentence cell's SentEval
encoding job ran on the GPU (its probes run in a CPU job), evaluates one checkpoint's STS on the GPU and
on the CPU, times 1, 2 and 4 sentence cells at once on the GPU (contrastlab.cost.packing), and writes
<results_dir>/report.md and calibration.json (contrastlab.cost.gpu_check.run).
Without a GPU it stops with one line. ``--toy`` runs the same preset at a toy size on the CPU (tiny
BERT, narrow ResNets, a dozen steps; the packing copies fork from one server process that imported
torch, where the GPU run spawns each): what the test suite does so that the preset cannot rot.

    python scripts/gpu_check.py                      # make gpu-check
    python scripts/gpu_check.py --toy --results-dir /tmp/gpu-check-toy
    python scripts/gpu_check.py --toy --results-dir /tmp/t --resources-dir /tmp/r  # models, data elsewhere
"""

from __future__ import annotations

import argparse
import os

from contrastlab.cost.gpu_check import run
from contrastlab.paths import REPO_ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toy", action="store_true", help="the preset at a toy size on the CPU (tests)")
    parser.add_argument("--results-dir", default=None, help="default: the preset's results/gpu-check")
    parser.add_argument(
        "--resources-dir", default=None, help="models and data (default: the preset's, resources/)"
    )
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--workdir", default=str(REPO_ROOT), help="Snakemake's working directory (default: the repository)"
    )
    print(run(parser.parse_args()).read_text())


if __name__ == "__main__":
    main()
