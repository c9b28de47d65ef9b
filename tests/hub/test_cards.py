"""Model cards (hub.cards): Hugging Face front matter, published numbers beside ours, provenance."""

from __future__ import annotations

import json

import yaml

from contrastlab.hub.cards import model_card, published_scores, write_model_card

SUMMARY = {
    "settings": {"loss": "infonce", "loss_hp": {"tau": 0.05}, "lr": 3e-5, "batch_size": 64, "seed": 42},
    "precision": "fp32",
    "device_name": "NVIDIA H100",
    "steps": 15625,
    "best_step": 1250,
    "best_dev_spearman": 82.5,
    "meta": {"git_sha": "abc123", "git_dirty": False, "versions": {"torch": "2.14.1"}},
}
METRICS = {
    "scores": {"STS12": 68.1, "MR": 81.0},
    "sts_avg": 75.5,
    "tr_avg": 85.0,
    "tr_devacc_avg": 86.0,
    "mode": "test",
    "probe": "senteval",
    "pooling": "cls",
}
DATA = {"corpus": {"corpus": "file", "sha256": "f00d"}, "senteval": {"senteval": "published"}}
FIXTURE = {**DATA, "senteval": {"senteval": "fixture"}}


def card(**overrides):
    args = dict(experiment="nie2023", backbone="bert-base", method="cl", seed=42, summary=SUMMARY)
    return model_card(
        **{**args, "metrics": METRICS, "data": DATA, "base_model": "bert-base-uncased", **overrides}
    )


IMAGE_CELL = dict(experiment="macl_cifar10", backbone="resnet18-cifar", method="macl-bs256", seed=42)


def written_card(tmp_path, name, metrics, summary=None, markers=None, folder="encoder", **cell):
    """The card ``<name>.md`` of an image encoder (``encoder/``, its ``settings.json`` where given), or of
    a sentence checkpoint (``model/``, its ``train_summary.json``), with ``metrics`` as its metrics file,
    written by :func:`write_model_card`."""
    model = tmp_path / folder
    model.mkdir(exist_ok=True)
    if summary is not None:
        written = "settings.json" if folder == "encoder" else "train_summary.json"
        (model / written).write_text(json.dumps(summary))
    (tmp_path / f"{name}.json").write_text(json.dumps(metrics))
    return write_model_card(
        tmp_path / f"{name}.md",
        **{**IMAGE_CELL, **cell},
        model_dir=model,
        metrics_path=tmp_path / f"{name}.json",
        markers=markers or {},
    )


def test_published_number_beside_ours_front_matter_settings_and_provenance():
    assert {"task": "sts_avg", "value": 76.04} in [
        {k: r[k] for k in ("task", "value")} for r in published_scores("nie2023", "bert-base", "cl")
    ]
    text = card()
    assert "| sts_avg | 75.50 | 76.04 | -0.54 |" in text
    assert "| STS12 | 68.10 | – | – |" in text  # Table 1 prints only the averages
    assert "Nie, Zhang, Mao (2023)" in text and "Table 1" in text
    # the front matter, the training settings, precision, commit and data digests
    assert text.startswith("---\n")
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["library_name"] == "sentence-transformers" and front["base_model"] == "bert-base-uncased"
    assert {"sentence-transformers", "contrastive-learning", "infonce"} <= set(front["tags"])
    assert "`infonce`" in text and '{"tau": 0.05}' in text and "Precision: `fp32`" in text
    assert "`lr`: `3e-05`" in text and "Commit: `abc123`" in text and "torch 2.14.1" in text
    assert '"sha256": "f00d"' in text and "`make publish CELL=<cell> REPO=<user>/<repo>`" in text
    # the transfer rows and tr_avg are test accuracies; only tr_devacc_avg is the dev mean Nie print
    assert "transfer test accuracy per task and `tr_avg` (their mean; `tr_devacc_avg`: the mean dev" in text


def test_every_card_ends_with_the_bibtex_of_the_papers_it_reproduces():
    """The card's last section cites its paper (contrastlab.papers); an experiment of Li's cites Li's only."""
    from contrastlab.papers import bibtex_block, papers_of

    for experiment in ("nie2023", "li2024_fig6_tau"):
        text = card(experiment=experiment)
        tail = text[text.index("\n## Citation\n") :]
        assert tail == f"\n## Citation\n\n```bibtex\n{bibtex_block(papers_of(experiment))}\n```\n"
    li = card(experiment="li2024")
    assert "@misc{li2024unified," in li and "nie2023inadequacy" not in li
    # an experiment no score table reads: its paper's figures that read it, in the heading and the provenance
    assert card(experiment="li2024_fig6_tau").count("A Unified Paradigm for Gradient, Fig. 6") == 2
    # its two tables: the paper named once, then both (in the heading and the provenance; then its BibTeX)
    assert li.count("Towards Better Understanding") == 3 and "arXiv full version, Table 3 and Table 4." in li


def test_a_backbone_the_paper_lacks_says_so(tmp_path):
    (tmp_path / "corpus.json").write_text(json.dumps(DATA["corpus"]))
    cell = dict(experiment="nie2023", backbone="tiny-bert", method="cl", folder="model")
    out = written_card(tmp_path, "README", METRICS, SUMMARY, {"corpus": tmp_path / "corpus.json"}, **cell)
    text = out.read_text()
    assert "| sts_avg | 75.50 | – | – |" in text and "base_model" not in text
    assert "generated SentEval fixture" not in text and "generated SentEval fixture" in card(data=FIXTURE)
    assert out.read_text() == card(backbone="tiny-bert", base_model=None, data={"corpus": DATA["corpus"]})


def test_an_image_encoders_card_has_its_scores_beside_the_published_ones(tmp_path):
    """An image card: scores beside the published ones (or diverged), our licence, a model-index of probes."""
    import tomllib

    from huggingface_hub import ModelCard, metadata_load
    from huggingface_hub.repocard_data import model_index_to_eval_results

    from contrastlab.paths import REPO_ROOT

    settings = {"loss": "macl_vision", "loss_hp": {"tau0": 0.1}, "dataset": "cifar10", "arch": "resnet18"}
    (tmp_path / "encoder").mkdir()
    (tmp_path / "encoder" / "torchvision.json").write_text(
        json.dumps({"torchvision": True, "arch": "resnet18", "stem": "cifar", "width": 64, "weights": "e"})
    )
    metrics = {"scores": {"linear_top1": 80.0, "knn_top1": 75.5}, "probes": ["linear", "knn"], "n_test": 9}
    out = written_card(tmp_path, "card", metrics, {"settings": settings, "precision": "bf16", "steps": 9})
    text = out.read_text()
    assert yaml.safe_load(text.split("---\n")[1])["library_name"] == "pytorch"
    assert "@inproceedings{huang2023macl," in text.split("## Citation")[1]
    rows = published_scores("macl_cifar10", "resnet18-cifar", "macl-bs256")
    published = {row["task"]: row["value"] for row in rows}
    assert f"| linear_top1 | 80.00 | {published['linear_top1']:.2f} |" in text
    assert "`macl_vision`" in text and "Precision: `bf16`" in text and "torchvision `resnet18`" in text
    assert "- Licence: `mit`, contrastlab's, as the encoder is trained from random initialisation" in text
    # a sweep point whose training diverged: a card saying so, no scores
    diverged = {"scores": {}, "encoder_diverged": "loss is not finite at step 3", "probes": ["ffn"]}
    (tmp_path / "d").mkdir()
    cell = dict(experiment="oar_cifar10", backbone="resnet18-oar", method="infonce-lr1.0")
    path = written_card(tmp_path / "d", "d", diverged, **cell)
    text = path.read_text()
    assert "Training diverged" in text and "loss is not finite at step 3" in text
    assert "model-index" not in text and "@unpublished{oar2024stable," in text  # no score, still cited
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    for card_path in (out, path):
        assert ModelCard.load(card_path).data.license == "mit" == project["license"]["text"].lower()
        assert metadata_load(card_path)["license"] == "mit"
    # the model-index: the linear-probe, kNN (and OAR's FFN) accuracies, read back by huggingface_hub's
    # parser, on CIFAR-10's hub id or on the demo's local data named as such
    scores = {"linear_top1": 80.12344, "knn_top1": 75.5, "embedding_variance": 3.0, "effective_rank_95": 9.0}
    metrics = {"scores": scores, "probes": ["linear", "knn"], "dataset": "cifar10"}
    card_path = written_card(tmp_path, "README", metrics, {"settings": {"loss": "macl_vision"}})
    loaded = ModelCard.load(card_path)
    name, results = model_index_to_eval_results(loaded.data.to_dict()["model-index"])
    assert name == "contrastlab-macl_cifar10-resnet18-cifar-macl-bs256-seed42"
    got = {r.metric_name: (r.metric_type, r.metric_value, r.dataset_type, r.dataset_split) for r in results}
    assert got == {
        "Top-1 accuracy, linear probe (linear_top1)": ("accuracy", 80.1234, "uoft-cs/cifar10", "test"),
        "Top-1 accuracy, weighted kNN (knn_top1)": ("accuracy", 75.5, "uoft-cs/cifar10", "test"),
    }  # the geometry statistics are no accuracy: not in the model-index
    assert {r.task_type for r in results} == {"image-classification"}
    assert "| embedding_variance | 3.00 |" in card_path.read_text()  # in the card's table, as no accuracy
    assert "`embedding_variance` and `effective_rank_95` are the features' geometry" in card_path.read_text()
    assert loaded.data.library_name == "pytorch" and "macl_vision" in loaded.data.tags
    # OAR's FFN fine-tuning at 10% of the labels, on the demo's digits: named as local data, no hub id
    metrics = {"scores": {"ffn10_top1": 57.5, "ffn10_top5": 96.0}, "probes": ["ffn"], "dataset": "digits"}
    _, results = model_index_to_eval_results(
        ModelCard.load(written_card(tmp_path, "oar", metrics)).data.to_dict()["model-index"]
    )
    assert [(r.metric_name, r.metric_value, r.dataset_type) for r in results] == [
        ("Top-1 accuracy, FFN fine-tuned on 10% of the labels (ffn10_top1)", 57.5, "digits"),
        ("Top-5 accuracy, FFN fine-tuned on 10% of the labels (ffn10_top5)", 96.0, "digits"),
    ]
    assert all("not a hub dataset" in r.dataset_name for r in results)


def test_an_oar_encoders_card_names_the_anchor_regression_term_and_loads_as_it_says(tmp_path):
    """An OAR cell trains InfoNCE plus OAR's term: its card names it, tag ``oar``; its usage line runs."""
    from huggingface_hub import ModelCard

    for method, fraction in (("oar_infonce-lr0.5", 0.1), ("infonce-lr0.5", 0.0)):
        (tmp_path / method).mkdir()
        summary = {"settings": {"loss": "ntxent", "oar_fraction": fraction}}
        out = written_card(
            tmp_path / method, "R", {"scores": {}}, summary, experiment="oar_cifar10", method=method
        )
        text, tags = out.read_text(), ModelCard.load(out).data.tags  # load_encoder: the encoder, its settings
        assert 'import load_encoder\n\nencoder, summary = load_encoder("<this folder>")\n```' in text
        assert ("Orthonormal Anchor Regression" in text) == ("oar" in tags) == bool(fraction), method


def test_a_user_loss_is_named_by_its_callable_not_by_the_users_file_path(tmp_path):
    """A card is public: a user loss configured as ``/home/me/losses/my.py:my_loss`` is ``my_loss`` on it."""
    settings = {**SUMMARY["settings"], "loss": "/home/me/losses/my.py:my_loss"}
    image = written_card(tmp_path, "README", {"scores": {}}, {"settings": settings})
    for text in (card(method="mine", summary={**SUMMARY, "settings": settings}), image.read_text()):
        assert "my_loss" in yaml.safe_load(text.split("---\n")[1])["tags"] and "/home/me" not in text


def test_a_cards_tags_link_it_to_its_papers_arxiv_page(tmp_path, monkeypatch):
    """A card is tagged ``arxiv:<id>`` after the loss for its paper's arXiv id (today's papers name none)."""
    from dataclasses import replace

    from huggingface_hub import ModelCard

    from contrastlab import papers
    from contrastlab.hub import publish

    plain = ["sentence-transformers", "feature-extraction", "sentence-similarity", "contrastive-learning"]
    assert ModelCard(card()).data.tags == [*plain, "infonce"]
    nie = papers.paper_for("nie2023")
    monkeypatch.setattr(publish, "papers_of", lambda experiment: [replace(nie, arxiv="2001.01234")])
    assert ModelCard(card()).data.tags == [*plain, "infonce", "arxiv:2001.01234"]
    path = written_card(tmp_path, "README", {"scores": {"knn_top1": 75.5}, "dataset": "cifar10"})
    image = ["image-feature-extraction", "contrastive-learning", "torchvision"]
    assert ModelCard.load(path).data.tags == [*image, "macl-bs256", "arxiv:2001.01234"]


def test_a_sweep_points_card_has_its_methods_published_number_as_the_table_does(tmp_path):
    """OAR Table 3 prints a method's best over its lr sweep, beside each point (a paper's rate, our own)."""
    from contrastlab.tables.published import load_published

    paper = load_published("oar_table3").set_index(["method", "key"])["value"]["oar_infonce", "ffn10_top1"]
    for lr in (0.001, 0.3):
        cell = dict(experiment="oar_cifar10", backbone="resnet18-oar", method=f"oar_infonce-lr{lr}")
        text = written_card(
            tmp_path, f"{lr}", {"scores": {"ffn10_top1": 60.0}}, {"settings": {"lr": lr}}, **cell
        )
        assert f"| ffn10_top1 | 60.00 | {paper:.2f} | {60 - paper:+.2f} |" in text.read_text(), lr
        assert "Table 3 (oar_table3): the best over the paper's lr sweep" in text.read_text()


def test_a_card_names_the_equation_its_loss_implements_from_the_losses_docstrings(tmp_path):
    """The Training section quotes the loss function's docstring line, its references by title."""
    assert "- Code: `contrastlab.losses.nie2023.info_nce`: Implements Eq. (1) of “On the Inadequacy" in card()
    image = written_card(tmp_path, "R", {"scores": {}}, {"settings": {"loss": "ntxent"}}).read_text()
    assert "(Eq. 1 of “A Simple Framework for Contrastive Learning of Visual Representations”)" in image
    assert "- Code:" not in card(summary={**SUMMARY, "settings": {"loss": "my.py:my_loss"}})
