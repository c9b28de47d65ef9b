"""``make publish CELL=<experiment>/<backbone>/<method>/seed<seed> REPO=<user>/<name>``: list the files
one Hub commit uploads for one kept sentence checkpoint (the model folder, its card, its MTEB ModelMeta)
and, with ``--push``, make that commit (``HfApi.create_commit``), after checking the cell
(contrastlab.hub.publish)."""

import argparse
import sys

from contrastlab.hub.publish import PublishError, publish, publish_plan

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--configfile", default="config.yaml", help="the preset that trained the cell")
parser.add_argument("--cell", required=True, help="<experiment>/<backbone>/<method>/seed<seed>")
parser.add_argument("--repo", required=True, help="the Hugging Face model repository, <user>/<name>")
parser.add_argument("--code", default=None, help="URL of the public training code (MTEB's ModelMeta)")
parser.add_argument("--push", action="store_true", help="make the commit instead of only listing it")
args = parser.parse_args()
try:
    plan = publish_plan(args.configfile, args.cell, args.repo, code=args.code)
    print(f"# {plan.cell} -> https://huggingface.co/{plan.repo} (MTEB ModelMeta: {plan.meta})")
    publish(plan, push=args.push)
except PublishError as error:
    sys.exit(f"contrastlab: publish: {error}")
