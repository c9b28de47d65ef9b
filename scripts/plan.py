"""`make plan`: projected GPU-hours and peak GPU memory of a config's cells before anything runs.

Prints the plan (contrastlab.cost.plan) and writes it to ``<results_dir>/plan/plan.{md,csv}``. Reads
the config through contrastlab.config (no Snakemake DAG): a few seconds for config.yaml. Its last
section is the claims' power (contrastlab.report.power): which claims a perfect reproduction would
decide at the configured seeds, and the GPU-hours of the seeds that would decide more.
"""

import argparse
import sys

from contrastlab import config as cl_config
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import flops as cl_flops
from contrastlab.cost import plan
from contrastlab.report import power

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--configfile", default="config.yaml", help="the config to plan (default config.yaml)")
parser.add_argument(
    "--precision",
    default=cl_flops.AS_CONFIGURED,
    help="the choice whose memory and per-cell times are shown (config: each cell's own; fp32, tf32, bf16, "
    "fp16); fp32, tf32 and bf16 are always shown side by side",
)
calibration_help = f"calibration JSON (default {cl_calibration.measured_calibration()} if present)"
parser.add_argument("--calibration", default=None, help=calibration_help)
cards = ", ".join(cl_calibration.GPU_PEAKS)
gpu_help = f"the card ({cards}; default: resources.gpu_model, else the {cl_calibration.DEFAULT_GPU_MODEL})"
parser.add_argument("--gpu-model", default=None, help=gpu_help)
parser.add_argument("--out", default=None, help="folder of plan.md, plan.csv (default <results_dir>/plan)")
gpus_help = "also simulate the run on this many GPUs (the makespan section always shows 1, 8 and 64)"
parser.add_argument("--gpus", default=None, help=gpus_help)
cpus_help = "CPU slots per GPU for the SentEval probe jobs in the simulation (default %(default)s)"
parser.add_argument("--cpus-per-gpu", type=int, default=plan.DEFAULT_CPUS_PER_GPU, help=cpus_help)
parser.add_argument("--no-claims", action="store_true", help="leave out the claims' power section")
args = parser.parse_args()
if args.gpus is not None and not (args.gpus.isdigit() and int(args.gpus) >= 1):
    sys.exit(f"contrastlab: plan: GPUS={args.gpus} (--gpus) must be a whole number, 1 or more")
if args.gpu_model and cl_calibration.model_of(args.gpu_model) is None:
    sys.exit(f"contrastlab: plan: GPU_MODEL={args.gpu_model} (--gpu-model): unknown card; use one of {cards}")
try:
    written = plan.plan_report(
        cl_config.load(args.configfile),
        args.precision,
        args.calibration,
        args.out,
        title=args.configfile,
        gpus=(*plan.DEFAULT_GPU_COUNTS, *([int(args.gpus)] if args.gpus else [])),
        cpus_per_gpu=args.cpus_per_gpu,
        sections=() if args.no_claims else (power.power_blocks,),
        gpu_model=args.gpu_model,
    )
except ValueError as error:  # a ConfigError too
    sys.exit(f"contrastlab: plan: {error}")
print(f"\nwrote {', '.join(map(str, written))}")
