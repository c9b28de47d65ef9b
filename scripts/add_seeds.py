"""``make add-seeds CONFIG=<preset>``: print (or, with ``--run``, run) the Snakemake commands that add
seeds to the cells of the undecided claims only, and render the tables and report again
(contrastlab.report.claims.seed_plan and add_seeds_commands)."""

import argparse
import shlex
import subprocess
import sys

from contrastlab.report.claims import add_seeds_commands, plan_for_configfile

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--configfile", default="config.yaml", help="the preset that ran (default: config.yaml)")
parser.add_argument("--max-seeds", type=int, default=10, help="at most this many seeds per cell (default 10)")
parser.add_argument("--run", action="store_true", help="run the commands instead of printing them")
args = parser.parse_args()
results, plan = plan_for_configfile(args.configfile, args.max_seeds)
undecided = sum(r.verdict == "undecided" for r in results)
commands = add_seeds_commands(plan, args.configfile)
if not commands:
    sys.exit(
        print(f"contrastlab: add-seeds: {undecided} undecided claims with run cells; nothing to add") or 0
    )
for step in plan:
    print(f"# {step['experiment']} / {step['backbone']}: {', '.join(step['methods'])} + seeds {step['new']}")
for command in commands:
    print(command)
    if args.run:
        subprocess.run(shlex.split(command), check=True)
