"""Snakemake entry of rule ``mteb``: MTEB's seven English STS tasks on one checkpoint through the mteb
package (with the tasks or benchmark mteb.tasks / mteb.benchmark choose), results in MTEB's format, and
the bridge from the SentEval protocol
(contrastlab.evaluation.bridge). MTEB writes the checkpoint's full ModelMeta (licence, parameters, release
date, revision: contrastlab.hub.publish.checkpoint_meta) as the results' model_meta.json."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from contrastlab.evaluation.bridge import mteb_checkpoint
from contrastlab.hub.publish import checkpoint_meta
from contrastlab.workflow.job import evaluation_job, job_data_locations

snakemake = globals()["snakemake"]

with evaluation_job(snakemake) as device:
    config, w = snakemake.config, snakemake.wildcards
    cell = dict(experiment=w.experiment, backbone=w.backbone, method=w.method, seed=int(w.seed))
    # read, not params, as the card's rule does: where the corpus was found reruns nothing
    meta = checkpoint_meta(
        snakemake.input.model, **cell, backbones=config["backbones"], data_config=config["data"]
    )
    result = mteb_checkpoint(
        snakemake.input.model,
        job_data_locations(snakemake)["senteval_dir"],
        snakemake.output.folder,
        data=snakemake.params.data,
        stsb_dir=config["mteb"]["stsb_dir"],  # read, not a param: moving the data reruns nothing
        batch_size=snakemake.params.batch_size,
        device=device,
        name=meta["name"],
        lock_file=config["artifacts_lock"],
        meta=meta,
        tasks=config["mteb"].get("tasks"),  # absent unless a config chooses them: the rule's params say so
        benchmark=config["mteb"].get("benchmark"),
    )
    print({task: round(r["mteb"], 2) for task, r in result["tasks"].items()})
