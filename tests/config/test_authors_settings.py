"""config.yaml resolves every cell to its authors' setup (paper, else released run script).

Sources: Nie et al.'s run_unsup_example.sh (fp32, no --mlp_only_train, eval every 125); Li et al.'s
scripts/application/{bert,roberta}/*.sh (lr, batch, eval interval; no --fp16); SimCSE's
run_unsup_example.sh (--fp16, --mlp_only_train) for the losses quoted from SimCSE and for MACL,
whose App. B.4 follows SimCSE's setup.
"""

from __future__ import annotations

import pytest
from test_papers import FOUR_PAPERS

from contrastlab import config as cl_config
from contrastlab.papers import paper_of


def sentence_cells(config):
    """The sentence cells (the vision cells' settings are tested in test_grid.py)."""
    grid = cl_config.Grid(config)
    return [c for c in grid.cells if grid.experiment(c.experiment).track == "sentence"]


@pytest.fixture(scope="module")
def full(repo_root):
    return cl_config.load(repo_root / "config.yaml")


def resolved(config, experiment, method, backbone):
    return cl_config.Grid(config).settings(cl_config.MethodOn(experiment, backbone, method))


# (method, lr, batch) per Li et al.'s scripts/application/<backbone>/<script>.sh: on BERT-base 1e-5 and 128
# but MHS's 5e-6; on RoBERTa-base 512, the originals at 1e-6 and the modified losses at 1e-5
ORIGINALS, MODIFIED = ("mhe", "mhs", "barlow_twins", "vicreg"), ("mmhe", "mmhs", "mbarlow_twins", "mvicreg")
LI_SCRIPTS = {
    "bert-base": {**dict.fromkeys(ORIGINALS + MODIFIED, (1e-5, 128)), "mhs": (5e-6, 128)},
    "roberta-base": {**dict.fromkeys(ORIGINALS, (1e-6, 512)), **dict.fromkeys(MODIFIED, (1e-5, 512))},
}
LI_EVAL_EVERY = {"bert-base": 125, "roberta-base": 50}


@pytest.mark.parametrize("backbone", sorted(LI_SCRIPTS))
def test_li_losses_use_the_released_scripts_settings(full, backbone):
    for method, (lr, batch) in LI_SCRIPTS[backbone].items():
        s = resolved(full, "li2024", method, backbone)
        assert (s["lr"], s["batch_size"]) == (lr, batch), method
        assert s["eval_every"] == LI_EVAL_EVERY[backbone], method
        assert s["precision"] == "fp32" and s["protocol"] == "li2024" and s["dev_pooling"] == "cls", method
        assert "scripts/application" in full["experiments"]["li2024"]["methods"][method]["note"], method


def test_li_table5_steps_start_from_their_originals_settings(full):
    methods = full["experiments"]["li2024"]["methods"]
    for method in ("mhe_gd", "mhe_gd_w", "barlow_twins_gd", "barlow_twins_gd_w", "vicreg_gd", "vicreg_gd_w"):
        s = resolved(full, "li2024", method, "bert-base")
        assert (s["lr"], s["batch_size"], s["eval_every"], s["precision"]) == (1e-5, 128, 125, "fp32")
        assert methods[method]["backbones"] == ["bert-base"]
    mhs_gd = resolved(full, "li2024", "mhs_gd", "bert-base")
    assert mhs_gd["lr"] == resolved(full, "li2024", "mhs", "bert-base")["lr"] == 5e-6
    assert "our choice" in methods["mhs_gd"]["note"]


def test_eval_interval_50_only_for_li_scripts_on_roberta(full):
    """Li's RoBERTa scripts select every 50 steps; the quoted losses keep their papers' 125."""
    for cell in sentence_cells(full):
        s = resolved(full, cell.experiment, cell.method, cell.backbone)
        expected = 50 if (cell.experiment, cell.backbone) == ("li2024", "roberta-base") else 125
        if cell.experiment == "li2024" and cell.method in ("infonce", "arccon", "mpt", "met"):
            expected = 125
        assert s["eval_every"] == expected, cell


def test_each_paper_trains_in_its_own_precision(full):
    expected = {
        ("nie2023", None): "fp32",  # Nie's script: no --fp16
        ("li2024", None): "fp32",  # Li's scripts: no --fp16
        ("li2024", "infonce"): "fp16",  # quoted from SimCSE, whose script uses --fp16
        ("li2024", "arccon"): "fp16",
        ("li2024", "mpt"): "fp32",  # quoted from Nie et al.
        ("li2024", "met"): "fp32",
        ("macl", None): "fp16",  # App. B.4 follows SimCSE's setup
        ("nie2023_fig3", None): "fp32",  # the figure sweeps keep their paper's scripts' precision
        ("li2024_fig6_m", None): "fp32",  # scripts/empirical/*.sh: no --fp16
        ("li2024_fig6_tau", None): "fp32",
        ("li2024_fig6_r", None): "fp32",
        ("li2024_conjectures", None): "fp32",  # the §3.2 baseline as in scripts/empirical/*.sh
    }
    for cell in (c for c in sentence_cells(full) if paper_of(c.experiment) in FOUR_PAPERS):
        want = expected.get((cell.experiment, cell.method), expected[(cell.experiment, None)])
        assert resolved(full, cell.experiment, cell.method, cell.backbone)["precision"] == want, cell


def test_precision_override_is_one_switch_for_sentence_and_image_cells(repo_root, full):
    """The switch reaches the image cells too."""
    fast = cl_config.load(repo_root / "config.yaml", {"precision_override": "bf16"})
    cells = list(cl_config.Grid(fast).cells)
    assert {c.experiment for c in cells} >= {"oar_cifar10", "macl_cifar10"}
    assert {resolved(fast, c.experiment, c.method, c.backbone)["precision"] for c in cells} == {"bf16"}
    as_configured = {resolved(full, c.experiment, c.method, c.backbone)["precision"] for c in cells}
    assert as_configured >= {"fp32", "fp16", "auto"}  # each paper's own without the switch


def test_dev_pooling_is_the_authors_choice(full):
    """Nie's script omits --mlp_only_train (dev selection with the MLP); SimCSE, Li and MACL use raw [CLS]."""
    for cell in sentence_cells(full):
        s = resolved(full, cell.experiment, cell.method, cell.backbone)
        nie_like = cell.experiment in ("nie2023", "nie2023_fig3") or (
            cell.experiment == "li2024" and cell.method in ("mpt", "met")
        )
        assert s["dev_pooling"] == ("cls_mlp" if nie_like else "cls"), cell


def test_macl_dropout_is_a_stated_choice(full):
    macl = full["experiments"]["macl"]["methods"]["macl"]
    assert resolved(full, "macl", "macl", "bert-base")["dropout"] == 0.2
    assert resolved(full, "macl", "simcse", "bert-base")["dropout"] == 0.1
    assert "our reading" in macl["note"]


def test_pretrained_rows_use_the_authors_avg_first_last(full):
    """Nie's evaluation.py "avg_first_last" averages hidden_states[0] (embeddings) and the last layer."""
    assert full["experiments"]["nie2023"]["pretrained_pooling"] == "avg_embeddings_and_last"
    assert cl_config.Grid(full).pretrained == [
        (b, "avg_embeddings_and_last") for b in ("bert-base", "bert-large", "roberta-base", "roberta-large")
    ]


def vision_cells(config, *experiments):
    return [c for c in cl_config.Grid(config).cells if c.experiment in experiments]


def test_oar_cells_train_as_the_authors_code_where_the_paper_is_silent(full):
    """OAR's cells take its code's blur and fp32 at every sweep point; MACL's CIFAR cells are unchanged."""
    from contrastlab.training.vision import VisionTrainSettings

    oar = vision_cells(full, "oar_cifar10", "oar_cifar100")
    assert len(oar) == 8 * 8 + 8  # CIFAR-10: 8 losses x 8 rates of Fig. 2; CIFAR-100: 8 losses
    rates = set()
    for cell in oar:
        s = VisionTrainSettings.from_dict(resolved(full, cell.experiment, cell.method, cell.backbone))
        assert (s.blur_p, s.blur_sigma, s.precision) == (0.5, (0.1, 2.0), "fp32"), cell
        # The code's 80/20 random_split and ModelCheckpoint(monitor="val_loss").
        assert (s.val_fraction, s.keep) == (0.2, "best_val_loss"), cell
        augment = s.augment(s.input_size, (0.5,) * 3, (0.25,) * 3)
        assert (augment.blur_p, augment.blur_sigma, augment.blur_kernel) == (0.5, (0.1, 2.0), 13)
        rates.add(s.lr)
    assert {0.1, 1.0} <= rates
    for cell in vision_cells(full, "macl_cifar10"):
        s = VisionTrainSettings.from_dict(resolved(full, cell.experiment, cell.method, cell.backbone))
        assert s.blur_p == 0.0 and s.augment(32, (0.5,) * 3, (0.25,) * 3).blur_p == 0.0, cell
        assert (s.val_fraction, s.keep) == (0.0, "last"), cell


def test_one_key_turns_the_live_curves_off_for_every_cell(repo_root):
    """training.tensorboard: false reaches the image cells too; absent, no cell's settings change."""
    off = cl_config.load(repo_root / "config" / "demo.yaml", {"training": {"tensorboard": False}})
    grid = cl_config.Grid(off)
    cells = list(grid.cells)
    assert {grid.experiment(c.experiment).track for c in cells} == {"sentence", "vision"}
    assert {resolved(off, c.experiment, c.method, c.backbone)["tensorboard"] for c in cells} == {False}
    demo = cl_config.load(repo_root / "config" / "demo.yaml")
    assert not any("tensorboard" in resolved(demo, c.experiment, c.method, c.backbone) for c in cells)
