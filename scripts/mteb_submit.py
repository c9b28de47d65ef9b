"""``make mteb-submit CELL=<experiment>/<backbone>/<method>/seed<seed>`` (``REPO=<user>/<name>``,
``REVISION=<commit>``: the Hub repository and commit ``make publish`` made): stage MTEB's results of one
kept sentence checkpoint as MTEB's results repository expects them and print the pull request's steps
(contrastlab.hub.publish.mteb_submission); with ``PR=1``, open that pull request through mteb's own
``ResultCache.submit_results(create_pr=True)`` once the cell has passed the same checks."""

import argparse
import sys

from contrastlab.hub.publish import PublishError, cells_of, find_cell, mteb_submission

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--configfile", default="config.yaml", help="the preset that trained the cell")
parser.add_argument("--cell", required=True, help="<experiment>/<backbone>/<method>/seed<seed>")
parser.add_argument("--repo", default=None, help="the model's Hub repository (make publish's REPO)")
parser.add_argument(
    "--revision", default=None, help="that repository's commit (default: the weights' sha256)"
)
parser.add_argument("--code", default=None, help="URL of the public training code (MTEB's ModelMeta)")
parser.add_argument(
    "--pull-request",
    action="store_true",
    help="open the pull request: mteb's ResultCache.submit_results(create_pr=True) (PyGithub, a token)",
)
args = parser.parse_args()
try:
    staged = mteb_submission(
        find_cell(cells_of(args.configfile), args.cell, "make mteb-submit", args.configfile),
        args.configfile,
        repo=args.repo,
        revision=args.revision,
        code=args.code,
        pull_request=args.pull_request,
    )
except PublishError as error:
    sys.exit(f"contrastlab: mteb-submit: {error}")
print(f"# staged {len(staged.tasks)} MTEB results of {staged.model} at revision {staged.revision}:")
folder = staged.root / "results" / staged.model / staged.revision
print(f"#   {folder}/ ({', '.join(staged.tasks)}, model_meta.json)")
if staged.pull_request is not None:
    answer = staged.pull_request
    print(f"# mteb's submit_results: {answer.get('status')}, {answer.get('result_count')} result files")
    if answer.get("pr_url"):
        print(f"# the pull request: {answer['pr_url']}")
else:
    print("# the pull request (yours to push, or rerun with PR=1 to have mteb open it):")
    for step in staged.steps:
        print(step)
