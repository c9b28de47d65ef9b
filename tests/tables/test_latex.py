"""Every ``.tex`` the pipeline writes compiles with plain ``pdflatex`` and the packages its header names,
fits the page, and shows names from a config as written. The demo is tests/report/golden's, rendered
into a temporary folder."""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from tables_synthetic import make_config, write_synthetic_metrics

from contrastlab import config as cl_config
from contrastlab.paths import REPO_ROOT, Results
from contrastlab.report import build_report
from contrastlab.tables.latex import LANDSCAPE_LINES, PACKAGES, Span, latex_escape, latex_table

GOLDEN = REPO_ROOT / "tests" / "report" / "golden" / "demo-results.tar.gz"

#: How far past the line a box may stick out before the page counts as overflowing (TeX's own slack).
SLACK_PT = 1.0

#: A name holding LaTeX's, HTML's and the shell's metacharacters, as a config may spell an alias or a loss.
NASTY = r"\input{/etc/passwd}$x$&50%#1_^~<img src=q onerror=alert(1)>[0]*"


def pdflatex(tex_files: list[Path], folder: Path) -> str:
    """Compile one article that inputs every file (one per page), with the packages the files' headers
    name; returns pdflatex's log, after asserting it ended well and wrote the PDF."""
    binary = shutil.which("pdflatex")
    if binary is None:
        pytest.skip("pdflatex not installed (apt-get install texlive-latex-base texlive-latex-recommended)")
    uses = [f"\\usepackage{{{p}}}" for p in PACKAGES]
    for path in tex_files:  # the header names what the document below loads, and nothing more
        assert f"% Requires {', '.join(uses)}." in path.read_text(), path
    inputs = "\n".join(f"\\input{{{path.as_posix()}}}\\clearpage" for path in tex_files)
    folder.mkdir(exist_ok=True)
    packages = "".join(uses)
    (folder / "doc.tex").write_text(
        f"\\documentclass{{article}}\n{packages}\n\\begin{{document}}\n{inputs}\n\\end{{document}}\n"
    )
    done = subprocess.run(
        [binary, "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=folder,
        capture_output=True,
        timeout=300,
    )
    log = (folder / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert done.returncode == 0, log[-3000:]
    assert (folder / "doc.pdf").is_file()
    return log


def overflows(log: str) -> list[str]:
    """pdflatex's lines on what sticks out of the page past :data:`SLACK_PT`: a box too wide or too high
    ("Overfull \\hbox (Xpt too wide)", "Overfull \\vbox (Xpt too high)"), a float taller than the page
    ("Float too large for page by Xpt")."""
    found = re.finditer(r"^(?:Overfull \\[hv]box \(|.*Float too large for page by )([\d.]+)pt.*$", log, re.M)
    return [m[0] for m in found if float(m[1]) > SLACK_PT]


@pytest.fixture(scope="module")
def demo_tables(tmp_path_factory) -> Path:
    """The tables folder of the finished demo, rendered from the suite's copy of its results."""
    root = tmp_path_factory.mktemp("demo") / "results" / "demo"
    root.mkdir(parents=True)
    with tarfile.open(GOLDEN) as archive:
        archive.extractall(root, filter="data")
    build_report(Results(root), cl_config.load(REPO_ROOT / "config" / "demo.yaml"))
    return root / "tables"


def test_latex_compiles(demo_tables, tmp_path):
    """The demo's 13 tables (captions with ν, ±, ≈, ▲, ▼, †, ‡, and the searches' headers) compile and
    fit the page."""
    tex = sorted(demo_tables.glob("*.tex"))
    assert len(tex) == 13 and {p.stem for p in tex} >= {"search_nie2023", "search_li2024", "nie2023_table1"}
    text = "".join(p.read_text() for p in tex)
    assert all(symbol not in text for symbol in "ν−±≈▲▼†‡")  # each became LaTeX
    log = pdflatex(tex, tmp_path)
    assert overflows(log) == []
    assert log.count("[") >= len(tex)  # one page shipped per table


def test_every_paper_tables_tex_compiles_and_fits(tmp_path):
    """The synthetic partial grid's tables, every paper table of every paper (tests/tables/
    test_tables.py's), compile and fit too."""
    write_synthetic_metrics(tmp_path / "results" / "metrics")
    build_report(Results(tmp_path / "results"), make_config())
    tex = sorted((tmp_path / "results" / "tables").glob("*.tex"))
    assert overflows(pdflatex(tex, tmp_path / "latex")) == []


def test_a_config_name_holding_latex_is_shown_as_written_and_compiles(tmp_path, monkeypatch):
    """A backbone alias and a method name holding ``\\input{...}``, ``$``, ``&``, ``%``, ``#`` reach the .tex
    escaped: it compiles, never reads the file named, and prints the name as written."""
    monkeypatch.chdir(REPO_ROOT)  # the user loss's file, as the config names it
    config = make_config()
    config["backbones"][NASTY] = {"random": {}}
    nie = config["experiments"]["nie2023"]
    nie["backbones"] = [*nie["backbones"], NASTY]
    nie["methods"][NASTY] = {"loss": "examples/margin_infonce.py:margin_infonce", "hp": {"tau": 0.05}}
    write_synthetic_metrics(tmp_path / "results" / "metrics")
    build_report(Results(tmp_path / "results"), config)
    tables = tmp_path / "results" / "tables"
    shown = latex_escape(NASTY)
    written = [p for p in sorted(tables.glob("*.tex")) if shown in p.read_text()]
    assert {p.stem for p in written} >= {"nie2023_table1", "compare_nie2023"}
    assert all("\\input{/etc" not in p.read_text() for p in written)
    log = pdflatex(written, tmp_path / "latex")
    assert "(/etc/passwd" not in log  # the file was never opened
    assert overflows(log) == []


def test_the_escaper_prints_each_character_as_written():
    """Each metacharacter escaped, each symbol as math, accents as accents, anything else by code point:
    no text makes the file fail to compile."""
    assert latex_escape(r"a\b{c}$d$&e%f#g_h~i^j") == (
        r"a\textbackslash{}b\{c\}\$d\$\&e\%f\#g\_h\textasciitilde{}i\textasciicircum{}j"
    )
    assert latex_escape("<img>|[1]*") == r"\textless{}img\textgreater{}\textbar{}{[}1{]}{*}"
    assert latex_escape("ν −0.2 ± 1e-5 ≈ ▲▼ †‡ Δ") == (
        r"$\nu$ $-$0.2 $\pm$ 1e-5 $\approx$ $\uparrow$$\downarrow$ $\dagger$$\ddagger$ $\Delta$"
    )
    assert latex_escape("Café Ñ Straße 中\n\nx") == r"Caf\'{e} \~{N} Stra\ss{}e {[}U+4E2D{]}  x"


def test_a_wide_table_is_shrunk_to_the_line_the_widest_turned_onto_the_page_and_a_narrow_one_kept(tmp_path):
    """A wider tabular is shrunk to the line, a narrower one kept; one wider than :data:`LANDSCAPE_LINES`
    lines turns a quarter with its caption, shrunk to 0.9 of the page's height. Measured by TeX, each float
    in a box of its own."""
    head = [["", Span("group", 2)], ["a", "b", "c"]]
    tables = {name: "w" * n for name, n in (("narrow", 10), ("wide", 80), ("widest", 400))}
    for name, first in tables.items():
        text = latex_table(name, "lrr", head, [[first, "1", "2"]], f"The {name} table")
        assert "\\multicolumn{2}{c}{group} \\\\\n\\cmidrule(lr){2-3}" in text
        (tmp_path / f"{name}.tex").write_text(text)
    measure = [
        (tmp_path / "narrow.tex").read_text().splitlines()[1],  # the packages' line, for pdflatex()
        r"\makeatletter\def\@captype{table}\def\unmeasured{\global\setbox3=\box\voidb@x}",
        r"\renewenvironment{table}[1][]{}{}",
        r"\newsavebox{\whole}\let\keep\resizebox",
        # the first \resizebox of a table: its tabular as it is (box 3), then fitted (box 1)
        r"\newcommand{\measured}[3]{\ifvoid3 \global\setbox3=\hbox{#3}"
        r"\global\setbox1=\hbox{\keep{#1}{#2}{#3}}\fi\keep{#1}{#2}{#3}}",
        r"\renewcommand{\resizebox}{\@ifstar{\keep*}{\measured}}\makeatother",
    ]
    for name in tables:
        path = (tmp_path / f"{name}.tex").as_posix()
        measure.append(r"\unmeasured\sbox{\whole}{\input{" + path + "}}")
        measure.append(
            r"\typeout{WIDTHS " + name + r" \the\wd3;\the\wd1;\the\wd\whole;\the\ht\whole;"
            r"\the\linewidth;\the\textheight}"
        )
    (tmp_path / "measure.tex").write_text("\n".join([*measure, "Measured."]) + "\n")  # a page: the PDF
    log = pdflatex([tmp_path / "measure.tex"], tmp_path / "latex")
    widths = {m[1]: [float(x) for x in re.findall(r"([\d.]+)pt", m[2])] for m in re.finditer(WIDTHS, log)}
    natural, fitted, across, high, line, page = widths["narrow"]
    assert abs(fitted - natural) < 0.1 and natural < line and high < page / 3  # kept, upright
    natural, fitted, across, high, line, page = widths["wide"]
    assert line < natural < LANDSCAPE_LINES * line and abs(fitted - line) < 0.1 and high < page / 3
    natural, fitted, across, high, line, page = widths["widest"]
    assert natural > LANDSCAPE_LINES * line and abs(fitted - 0.9 * page) < 0.1  # shrunk to the height
    assert abs(high - 0.9 * page) < 0.1 and across < line  # turned: as high as the table is wide


#: What the measuring document prints per table (pt): the tabular's natural width, its fitted width, the
#: float's width and height, the line width and the text height.
WIDTHS = re.compile(r"WIDTHS (\w+) ([\d.pt;]+)")
