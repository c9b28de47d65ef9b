"""``make add-seeds CONFIG=<preset>``: print (or, with ``--run``, run) the Snakemake commands that add
seeds to the cells of the undecided claims only (contrastlab.report.claims.seed_plan), or with
``TARGET=power`` (``--target power``) the seeds ``make plan``'s claims section says a perfect
reproduction needs (contrastlab.report.power.power_seed_plan), and render the tables and report again."""

import argparse
import os
import shlex
import subprocess
import sys

from contrastlab import config as cl_config
from contrastlab.config.invocation import yaml_problem
from contrastlab.report import power
from contrastlab.report.claims import add_seeds_commands, plan_for_configfile
from contrastlab.tables.metrics import collect_metrics

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--configfile", default="config.yaml", help="the preset that ran (default: config.yaml)")
parser.add_argument("--max-seeds", type=int, default=10, help="at most this many seeds per cell (default 10)")
parser.add_argument(
    "--target", choices=["undecided", "power"], default="undecided", help="whose seeds to add"
)
parser.add_argument("--run", action="store_true", help="run the commands instead of printing them")
args = parser.parse_args()
if os.path.isfile(args.configfile) and (problem := yaml_problem(args.configfile)) is not None:
    sys.exit(f"contrastlab: add-seeds: {problem}")
try:  # a config that does not load (a missing file, a bad key) is its one line, not a traceback
    if args.target == "power":  # the plan's power: claims not decidable at the configured seeds, within 10
        grid = cl_config.Grid(cl_config.load(args.configfile))
        measured = power.measured_noise(collect_metrics(grid.results.metrics()), grid)
        plan = power.power_seed_plan(power.claims_power(grid, measured=measured), grid)
        what = "claims a perfect reproduction would decide with more seeds"
    else:
        results, plan = plan_for_configfile(args.configfile, args.max_seeds)
        what = f"{sum(r.verdict == 'undecided' for r in results)} undecided claims with run cells"
except cl_config.ConfigError as error:
    sys.exit(f"contrastlab: add-seeds: {error}")
# shell-quoted: a path with spaces or quotes is one word, printed and under --run alike
commands = add_seeds_commands(plan, shlex.quote(args.configfile))
if not commands:
    sys.exit(print(f"contrastlab: add-seeds: {what}; nothing to add") or 0)
for step in plan:
    print(f"# {step['experiment']} / {step['backbone']}: {', '.join(step['methods'])} + seeds {step['new']}")
for command in commands:
    print(command)
    if args.run:
        subprocess.run(shlex.split(command), check=True)
