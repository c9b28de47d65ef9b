"""``make mteb-submit CELL=<experiment>/<backbone>/<method>/seed<seed>`` (``REPO=<user>/<name>``,
``REVISION=<commit>``: the Hub repository and commit ``make publish`` made): stage MTEB's results of one
kept sentence checkpoint as MTEB's results repository expects them and print the pull request's steps
(contrastlab.hub.publish.mteb_submission). Pushing stays the user's."""

import argparse
import sys

from contrastlab.hub.publish import PublishError, mteb_submission

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--configfile", default="config.yaml", help="the preset that trained the cell")
parser.add_argument("--cell", required=True, help="<experiment>/<backbone>/<method>/seed<seed>")
parser.add_argument("--repo", default=None, help="the model's Hub repository (make publish's REPO)")
parser.add_argument(
    "--revision", default=None, help="that repository's commit (default: the weights' sha256)"
)
parser.add_argument("--code", default=None, help="URL of the public training code (MTEB's ModelMeta)")
args = parser.parse_args()
try:
    staged = mteb_submission(
        args.configfile, args.cell, repo=args.repo, revision=args.revision, code=args.code
    )
except PublishError as error:
    sys.exit(f"contrastlab: mteb-submit: {error}")
print(f"# staged {len(staged.tasks)} MTEB results of {staged.model} at revision {staged.revision}:")
folder = staged.root / "results" / staged.model / staged.revision
print(f"#   {folder}/ ({', '.join(staged.tasks)}, model_meta.json)")
print("# the pull request (yours to push):")
for step in staged.steps:
    print(step)
