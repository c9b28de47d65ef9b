# Data and backbones. Downloads are local rules: compute nodes may have no internet.


localrules:
    senteval_data,
    corpus,
    fetch_backbone,


rule senteval_data:
    output:
        f"{S}/data/senteval.ready.json",
    params:
        senteval_dir=lambda wildcards: senteval_dir(),
        user_copy=bool(config["data"]["senteval_dir"]),
        fixture=config["data"]["fixture"],
        url=config["data"]["senteval_url"],
        downloads=lambda wildcards: f"{S}/downloads",
    log:
        f"{R}/logs/data/senteval.log",
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/prepare_senteval.py"


rule corpus:
    output:
        f"{S}/data/corpus.ready.json",
    params:
        corpus=lambda wildcards: corpus_path(),
        user_copy=bool(config["data"]["wiki_path"]),
        fixture=config["data"]["fixture"],
        fixture_sentences=config["data"]["fixture_corpus_sentences"],
        url=config["data"]["wiki_url"],
        downloads=lambda wildcards: f"{S}/downloads",
    log:
        f"{R}/logs/data/corpus.log",
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/prepare_corpus.py"


rule fetch_backbone:
    input:
        backbone_inputs,
    output:
        directory(f"{S}/models/{{backbone}}"),
    params:
        spec=lambda wildcards: config["backbones"][wildcards.backbone],
        models_dir=lambda wildcards, output: os.path.dirname(output[0]),
    log:
        f"{R}/logs/backbones/{{backbone}}.log",
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/fetch_backbone.py"
