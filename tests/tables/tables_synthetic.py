"""Synthetic metrics files and a config shaped like config.yaml (docs/contracts.md) for the table tests."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pandas as pd

STS = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]
TR = ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]
SEEDS = [42, 43, 44]


def scores_frame(rows) -> pd.DataFrame:
    """Rows (experiment, backbone, method, seed, task, score) as collect_metrics' frame, seeds nullable."""
    out = pd.DataFrame(rows, columns=["experiment", "backbone", "method", "seed", "task", "score"])
    out["seed"] = out["seed"].astype("Int64")
    return out


def synthetic_score(*key: object) -> float:
    """A stable, unrounded score in [60, 90) for one (experiment, backbone, method, seed, task)."""
    return 60.0 + zlib.crc32("/".join(map(str, key)).encode()) % 300_000 / 10_000


def metrics_dict(*key: object, tasks: list[str] = STS + TR) -> dict:
    scores = {t: synthetic_score(*key, t) for t in tasks}
    sts = [scores[t] for t in STS if t in scores]
    tr = [scores[t] for t in TR if t in scores]
    devacc = {t: synthetic_score(*key, t, "devacc") for t in TR if t in scores}
    return {
        "scores": scores,
        "sts_avg": sum(sts) / 7 if len(sts) == 7 else None,
        "tr_avg": sum(tr) / 7 if len(tr) == 7 else None,
        "devacc": devacc,
        "tr_devacc_avg": sum(devacc.values()) / 7 if len(devacc) == 7 else None,
        "alignment": 0.2,
        "uniformity": -2.3,
        "mode": "test",
        "pooling": "cls",
        "model_dir": "synthetic",
        "timings": {},
        "meta": {},
    }


def write_cell(root: Path, experiment: str, backbone: str, method: str, seeds=SEEDS, **kw) -> None:
    for seed in seeds:
        path = root / experiment / backbone / method / f"seed{seed}" / "senteval.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(metrics_dict(experiment, backbone, method, seed, **kw)))


def write_scores(root: Path, metrics) -> None:
    """Each row of a metrics frame (experiment, backbone, method, seed, task, score) into its cell's
    ``senteval.json`` under ``root``: ``sts_avg`` at the top, any other task under ``scores``."""
    for rec in metrics.itertuples():
        path = root / rec.experiment / rec.backbone / rec.method / f"seed{rec.seed}" / "senteval.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.loads(path.read_text()) if path.exists() else {"scores": {}}
        if rec.task == "sts_avg":
            data["sts_avg"] = rec.score
        else:
            data["scores"][rec.task] = rec.score
        path.write_text(json.dumps(data))


OAR_TASKS = tuple(f"ffn{p}_top{k}" for p in (10, 50, 100) for k in (1, 5)) + ("embedding_variance",)


def write_vision_cell(
    root: Path, experiment: str, backbone: str, method: str, seeds=SEEDS, tasks=("linear_top1", "knn_top1")
) -> None:
    """A vision cell's ``vision.json`` per seed (linear and kNN top-1, or OAR's FFN scores, as
    evaluation.vision writes)."""
    for seed in seeds:
        path = root / experiment / backbone / method / f"seed{seed}" / "vision.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        key = (experiment, backbone, method, seed)
        scores = {task: synthetic_score(*key, task) for task in tasks}
        path.write_text(json.dumps({"scores": scores, "n_train": 50000, "n_test": 10000}))


def write_pretrained(root: Path, backbone: str) -> None:
    path = root / "pretrained" / backbone / "senteval.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(metrics_dict("pretrained", backbone)))


def make_config() -> dict:
    """A partial config: paper backbones plus the demo's toy backbones, some hyperparameters off-paper."""
    li_mod = {"lr": 1.0e-5, "batch_size": 128, "per_backbone": {"roberta-base": {"batch_size": 512}}}
    return {
        "seeds": list(SEEDS),
        "backbones": {
            "bert-base": {"hf_id": "bert-base-uncased"},
            "tiny-bert": {"random": {}},
            "minilm": {},
            "resnet18-cifar": {"vision": {"arch": "resnet18"}},
            "resnet18-w8": {"vision": {"arch": "resnet18", "width": 8}},
            "resnet18-oar": {"vision": {"arch": "resnet18", "stem": "imagenet"}},
            "resnet50-oar": {"vision": {"arch": "resnet50", "stem": "imagenet", "out_dim": 512}},
        },
        "training": {
            "max_length": 32,
            "eval_every": 125,
            "precision": "auto",
            "lr": 3.0e-5,
            "batch_size": 64,
        },
        "evaluation": {"mode": "test", "batch_size": 128},
        "experiments": {
            "nie2023": {
                "backbones": ["bert-base", "roberta-base", "tiny-bert"],
                "pretrained_pooling": "avg",
                "training": {},
                "methods": {
                    "cl": {
                        "loss": "infonce",
                        "hp": {"tau": 0.05},
                        "lr": 1.0e-5,
                        "batch_size": 64,
                        "per_backbone": {"roberta-base": {"batch_size": 128}},
                    },
                    "au": {"loss": "align_uniform", "hp": {"alpha": 2, "t": 6, "lam": 0.1}, "lr": 1.0e-5},
                    "dcl": {"loss": "dcl", "hp": {"tau": 0.03}, "lr": 1.0e-5},
                    "mat": {
                        "loss": "mat",
                        "hp": {"m": 0.15},
                        "lr": 1.0e-5,
                        "batch_size": 128,
                        "per_backbone": {"roberta-base": {"hp": {"m": 0.14}, "lr": 7.0e-6}},
                    },
                    "mpt": {"loss": "mpt", "hp": {"m": 0.25}, "lr": 1.0e-5},
                },
            },
            "li2024": {
                "backbones": ["bert-base", "minilm"],
                "training": {"protocol": "li2024", "precision": "fp32"},
                "methods": {
                    "infonce": {"loss": "infonce", "hp": {"tau": 0.05}, "lr": 3.0e-5},
                    "mhe": {"loss": "mhe", "hp": {"lam": 10}},
                    "mhe_gd": {"loss": "mmhe", "hp": {"weight": "uniform", "r": 1.0}},
                    "mhe_gd_w": {"loss": "mmhe", "hp": {"r": 1.0}},
                    "mmhe": {
                        "loss": "mmhe",
                        "hp": {"m": 0.30, "tau": 0.05, "r": 1.75},
                        **li_mod,
                        "per_backbone": {"roberta-base": {"batch_size": 512, "hp": {"r": 1.25}}},
                    },
                    "mmhs": {"loss": "mmhs", "hp": {"m": 0.30, "r": 1.75}, **li_mod},
                },
            },
            "macl_cifar10": {
                "track": "vision",
                "dataset": "cifar10",
                "backbones": ["resnet18-cifar", "resnet18-w8"],
                "training": {"epochs": 200},
                "sweep": {"batch_size": [64, 128, 256, 512, 1024]},
                "methods": {
                    "ntxent": {"loss": "ntxent", "hp": {"tau": 0.1}},
                    "dcl": {"loss": "dcl_vision", "hp": {"tau": 0.1}},
                    "macl": {"loss": "macl_vision", "hp": {"tau0": 0.1, "alpha": 0.5, "a0": 0.0}},
                },
            },
            "oar_cifar10": {
                "track": "vision",
                "dataset": "cifar10",
                "backbones": ["resnet18-oar", "resnet18-w8"],
                "seeds": [42],
                "sweep": {"lr": [0.01, 1.0]},
                "methods": {
                    "infonce": {"loss": "ntxent", "hp": {"tau": 1.0}},
                    "oar_infonce": {"loss": "ntxent", "hp": {"tau": 1.0}, "training": {"oar_fraction": 0.1}},
                },
            },
            "oar_cifar100": {
                "track": "vision",
                "dataset": "cifar100",
                "backbones": ["resnet50-oar"],
                "seeds": [42],
                "methods": {
                    "bt": {"loss": "barlow_twins", "lr": 0.01},
                    "oar_bt": {"loss": "barlow_twins", "lr": 1.0, "training": {"oar_fraction": 0.1}},
                },
            },
            "macl": {
                "backbones": ["roberta-base", "bert-base"],
                "training": {"dropout": 0.2},
                "methods": {
                    "simcse": {"loss": "infonce", "hp": {"tau": 0.05}, "lr": 1.0e-5},
                    "macl": {"loss": "macl", "hp": {"tau0": 0.05, "alpha": 2, "a0": 0.8}, "lr": 1.0e-5},
                },
            },
        },
    }


def write_synthetic_metrics(root: Path) -> None:
    """A partial grid: some cells complete, some with 2 of 3 seeds, some only STS, toy backbones too."""
    for method in ("cl", "au", "dcl", "mat"):
        write_cell(root, "nie2023", "bert-base", method)
    write_cell(root, "nie2023", "roberta-base", "cl", seeds=[42, 43])  # partial: 2 of 3 seeds
    write_cell(root, "nie2023", "tiny-bert", "cl")  # toy backbone
    write_cell(root, "nie2023", "bert-base", "mpt", seeds=[42, 43, 44, 45])  # seed 45 not configured
    for backbone in ("bert-base", "tiny-bert"):
        write_pretrained(root, backbone)
    for method in ("infonce", "mhe", "mhe_gd", "mhe_gd_w", "mmhe"):
        write_cell(root, "li2024", "bert-base", method)
    write_cell(root, "li2024", "bert-base", "mmhs", tasks=STS)  # STS only: TR cells not run
    write_cell(root, "li2024", "minilm", "mmhe")
    write_cell(root, "macl", "roberta-base", "simcse")
    write_cell(root, "macl", "roberta-base", "macl", seeds=[42])
    write_cell(root, "macl", "bert-base", "simcse")
    for batch in (64, 128, 256, 512, 1024):
        write_vision_cell(root, "macl_cifar10", "resnet18-cifar", f"ntxent-bs{batch}")
    write_vision_cell(root, "macl_cifar10", "resnet18-cifar", "macl-bs64", seeds=[42])  # partial
    write_vision_cell(root, "macl_cifar10", "resnet18-w8", "ntxent-bs64")  # toy encoder
    for method in ("infonce-lr0.01", "infonce-lr1.0", "oar_infonce-lr1.0"):  # OAR Table 3: best rate
        write_vision_cell(root, "oar_cifar10", "resnet18-oar", method, seeds=[42], tasks=OAR_TASKS)
    write_vision_cell(root, "oar_cifar100", "resnet50-oar", "oar_bt", seeds=[42], tasks=OAR_TASKS)
