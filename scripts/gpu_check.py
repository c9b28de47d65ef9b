"""make gpu-check: the GPU path on one GPU through Snakemake and the real rules, writing the report and the
calibration make plan reads after each part (config/gpu-check.yaml's header: its time on an H200).

Three parts (contrastlab.cost.gpu_check.run), after each of which <results_dir>/report.md and
calibration.json hold everything measured so far and name the parts not done, so that a check cut short
leaves figures make plan reads:
- cells: config/gpu-check.yaml's cells through Snakemake (one sentence cell per precision, the fp16 one
  killed after its first snapshot and resumed; one MACL and one OAR image cell; the fp32 and MACL cells
  evaluated): steps/s, achieved TFLOP/s, MFU, the jobs' start-up, dev-evaluation and snapshot times, and
  each job's wall time against the plan's with its start (warm or cold) and phases;
- checks: the fp16 cell's resume, the evaluated sentence cell's encoding job on the GPU (its probes in a
  CPU job), one checkpoint's STS on the GPU and on the CPU;
- packing: 1, 2 and 4 copies at once of the fp32 and bf16 sentence steps and the MACL step, each in the
  mode its cells run, without and with a private MPS daemon (where nvidia-cuda-mps-control is on PATH).
Without a GPU it stops with one line. ``--toy`` runs the same preset at a toy size on the CPU (tiny BERT,
narrow ResNets, a dozen steps; the packing copies fork from one server process that imported torch, where
the GPU run spawns each): what the test suite does so that the preset cannot rot. With
CONTRASTLAB_GPU_CHECK_WAIT_AFTER=<part> it waits after writing that part (a test kills it there).

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
