"""Train one cell (protocol.md §2): Snakemake `script:` entry, or a CLI for debugging (`--help`)."""

import argparse
import json
import shutil
from pathlib import Path

from contrastlab.search import find_point, is_point_name, record_diverged, resolve_point, same_as_winner
from contrastlab.training.runtime import NonFiniteLossError
from contrastlab.training.sentence import TrainSettings, train
from contrastlab.workflow.job import events_dir_of, training_job

FLAGS = "--backbone --corpus --dev-data-dir --out --log --state-dir".split()
KEYWORDS = "backbone_dir corpus_path dev_data_dir out_dir log_path state_dir".split()  # of train()


def cli() -> None:
    parser = argparse.ArgumentParser(description="Train one sentence-embedding cell (contrastlab.training).")
    for flag, keyword in zip(FLAGS, KEYWORDS, strict=True):
        parser.add_argument(flag, required=True, dest=keyword, help=f"train(..., {keyword}=...)")
    parser.add_argument("--cache-dir", default=None, help="tokenised corpus cache (default resources/cache)")
    parser.add_argument(
        "--events-dir", default=None, help="TensorBoard run folder (default <state-dir>.tensorboard)"
    )
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda if available)")
    parser.add_argument("--settings", default="{}", help="TrainSettings fields as one JSON object")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="one field, e.g. lr=3e-5"
    )
    args = vars(parser.parse_args())
    values = json.loads(args.pop("settings"))
    for item in args.pop("set"):
        key, _, value = item.partition("=")
        try:
            values[key] = json.loads(value)
        except json.JSONDecodeError:  # a bare string, e.g. precision=fp32
            values[key] = value
    summary = train(TrainSettings.from_dict(values), **args)
    print(
        json.dumps({k: summary[k] for k in ("best_dev_spearman", "best_step", "steps", "timings")}, indent=1)
    )


if "snakemake" in globals():
    sm = globals()["snakemake"]
    with training_job(sm) as (device, where):
        settings = dict(sm.params.settings)
        winner = None
        previous = getattr(sm.input, "search_previous", None)  # the earlier stage's selection, if any
        if previous:  # a later search stage: the earlier winner, moved (contrastlab.search)
            wc = sm.wildcards
            point = find_point(sm.config, wc["experiment"], wc["backbone"], wc["method"])
            settings = resolve_point(settings, previous[0], point)
            winner = same_as_winner(settings, previous[0])
        if winner is not None:  # this point is the earlier winner: its checkpoint, not a second training
            print(f"search: settings equal the earlier winner's; copying {winner}")
            shutil.copytree(winner, sm.output.model)
            shutil.copyfile(Path(winner).with_name("train_log.jsonl"), sm.output.log_jsonl)
        else:
            try:
                train(
                    TrainSettings.from_dict(settings),
                    backbone_dir=sm.input.backbone,
                    corpus_path=where["corpus"],
                    dev_data_dir=where["senteval_dir"],
                    out_dir=sm.output.model,
                    log_path=sm.output.log_jsonl,
                    state_dir=sm.params.state_dir,
                    cache_dir=where["cache"],
                    device=device,
                    events_dir=events_dir_of(sm),
                )
            except NonFiniteLossError as error:
                if not is_point_name(sm.wildcards["method"]):
                    raise  # a paper cell that diverges is a failure
                # a search point that diverges is a point with no dev score: selection passes it over
                message = " ".join(str(error).split())
                print(f"search: training diverged, recorded without a dev score: {message}")
                record_diverged(sm.output.model, sm.output.log_jsonl, settings, message)
                shutil.rmtree(sm.params.state_dir, ignore_errors=True)
elif __name__ == "__main__":
    cli()
