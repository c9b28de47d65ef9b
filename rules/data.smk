# Data and backbones. Downloads are local rules: compute nodes may have no internet.


localrules:
    senteval_data,
    corpus,
    fetch_backbone,


# Each marker holds what its data are (contrastlab.config.data.DataConfig.identity), never where they lie:
# the scripts read the locations from the config, so pointing data.* at an identical copy reruns nothing.
rule senteval_data:
    output:
        data_marker("senteval"),
    params:
        identity=lambda wildcards: data_marker_identity("senteval"),
    log:
        RESULTS.log("data", "senteval"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/prepare_senteval.py"


# Its param is the corpus's content digest (data_identity: a user's file hashed, a download's lock entry,
# or on the first run the hub's digest of the file, resolved before the DAG is built), which the cells
# take as a param too: the same bytes from anywhere retrain nothing, other bytes retrain the cells that
# read the corpus. (Not a checkpoint: re-planning after one regroups Snakemake's job groups wrongly.)
rule corpus:
    output:
        data_marker("corpus"),
    params:
        identity=lambda wildcards: data_marker_identity("corpus"),
    log:
        RESULTS.log("data", "corpus"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/prepare_corpus.py"


rule fetch_backbone:
    input:
        get_backbone_inputs,
    output:
        directory(backbone_dir("{backbone}")),
    params:
        spec=lambda wildcards: GRID.backbone(wildcards.backbone),
        models_dir=lambda wildcards, output: os.path.dirname(output[0]),
    log:
        RESULTS.log("backbones", "{backbone}"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/fetch_backbone.py"
