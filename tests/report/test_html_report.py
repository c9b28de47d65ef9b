"""report.html: one self-contained page (figures embedded), checked in a real headless browser."""

from __future__ import annotations

import base64
import shutil
import subprocess

import matplotlib.image
import numpy as np
import pytest

from contrastlab.figures.style import figure, house_style, save
from contrastlab.report.html import render_html, write_html_report

REPORT = """# Paper tables

| table | run |
|---|---:|
| Nie Table 1 | 3 |

## Figures

### demo/curve

![demo/curve](figures/demo/curve.png)

A caption. ([csv](figures/demo/curve.csv))
"""


@pytest.fixture
def report(tmp_path):
    with house_style():
        fig, axes = figure(1, 1, width="column")
        axes[0, 0].plot([1, 2, 3], [3, 1, 2], marker="o")
        axes[0, 0].set_xlabel("step")
    save(fig, tmp_path / "figures" / "demo" / "curve")
    path = tmp_path / "report.md"
    path.write_text(REPORT, encoding="utf-8")
    return path


def test_html_embeds_every_figure_and_keeps_the_tables(report):
    page = write_html_report(report).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<table>" in page and "<td>Nie Table 1</td>" in page
    assert 'src="figures/' not in page  # nothing to fetch beside the file
    data = page.split('src="data:image/png;base64,')[1].split('"')[0]
    assert base64.b64decode(data) == (report.parent / "figures" / "demo" / "curve.png").read_bytes()
    assert 'href="figures/demo/curve.csv"' in page  # links stay relative


def test_a_missing_figure_is_named_not_fatal(tmp_path):
    page = render_html("![x](figures/none.png)", tmp_path)
    assert "figure not found" in page and "none.png" in page


def _browser() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(
    _browser() is None, reason="no Chromium on this machine (.ci/run installs Debian's chromium)"
)
def test_headless_chromium_renders_the_page_with_its_figure(report, tmp_path):
    page = write_html_report(report)
    moved = tmp_path / "elsewhere" / "report.html"  # self-contained: works away from the figures
    moved.parent.mkdir()
    shutil.copy(page, moved)
    shutil.rmtree(report.parent / "figures")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=900,1400"]
    dom = subprocess.run(
        [_browser(), *flags, "--dump-dom", moved.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<table>" in dom.stdout and "Nie Table 1" in dom.stdout and "data:image/png;base64," in dom.stdout
    shot = tmp_path / "shot.png"
    run = subprocess.run(
        [_browser(), *flags, f"--screenshot={shot}", moved.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    pixels = matplotlib.image.imread(shot)[..., :3]
    # The figure's blue line (Okabe-Ito #0072B2) is on screen: the embedded image was decoded and drawn.
    blue = np.all(np.abs(pixels - np.array([0x00, 0x72, 0xB2]) / 255) < 0.08, axis=-1)
    assert blue.sum() > 50, int(blue.sum())
