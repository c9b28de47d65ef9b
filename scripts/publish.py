"""``make publish CELL=<experiment>/<backbone>/<method>/seed<seed> REPO=<user>/<name>``: write the card of
one kept sentence checkpoint from its finished files, list the files one Hub commit uploads (the model
folder, its card, its MTEB ModelMeta) and, with ``--push``, make that commit (``HfApi.create_commit``),
after checking the cell (contrastlab.hub.publish, contrastlab.hub.cards). ``--cards`` (``make cards``):
write the card of every finished cell instead."""

import argparse
import sys

from contrastlab.hub.cards import write_card, write_cards
from contrastlab.hub.publish import PublishError, cells_of, find_cell, publish, publish_plan

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--configfile", default="config.yaml", help="the preset that trained the cell")
parser.add_argument("--cell", help="<experiment>/<backbone>/<method>/seed<seed>")
parser.add_argument("--repo", help="the Hugging Face model repository, <user>/<name>")
parser.add_argument("--code", default=None, help="URL of the public training code (MTEB's ModelMeta)")
parser.add_argument("--push", action="store_true", help="make the commit instead of only listing it")
parser.add_argument("--cards", action="store_true", help="write every finished cell's card, upload nothing")
args = parser.parse_args()
try:
    cells = cells_of(args.configfile)
    if args.cards:
        written, refused = write_cards(cells, args.configfile)
        print(*(f"wrote {card}" for card in written), f"# {len(written)} model cards", sep="\n")
        sys.exit("\n".join(f"contrastlab: cards: {line}" for line in refused) or None)
    if not (args.cell and args.repo):
        cell = "<experiment>/<backbone>/<method>/seed<seed>"
        raise PublishError(f"needs CELL and REPO: make publish CELL={cell} REPO=<user>/<name>")
    found = find_cell(cells, args.cell, source=args.configfile)
    write_card(found, args.configfile)
    plan = publish_plan(found, args.repo, code=args.code)
    print(f"# {plan.cell} -> https://huggingface.co/{plan.repo} (MTEB ModelMeta: {plan.meta})")
    publish(plan, push=args.push)
except PublishError as error:
    sys.exit(f"contrastlab: publish: {error}")
