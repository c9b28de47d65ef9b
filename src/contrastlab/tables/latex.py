"""LaTeX for every ``.tex`` the pipeline writes: the one escaper and the one table float.

:func:`latex_table` renders a table given as plain text: every cell and the caption pass through
:func:`latex_escape`, so a producer never writes LaTeX of its own and a name from a config is shown as
written, never run (``\\input{...}``, ``$``, ``&``, ``%``, ``#``). Every table fits the page it is put
on; the file's first lines name the packages it needs (booktabs, graphicx, in Debian's
``texlive-latex-base`` and ``texlive-latex-recommended``).

>>> latex_escape(r"\\input{/etc/passwd} $x$ & 50% #1 ν±0.5")
'\\\\textbackslash{}input\\\\{/etc/passwd\\\\} \\\\$x\\\\$ \\\\& 50\\\\% \\\\#1 $\\\\nu$$\\\\pm$0.5'
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ADDLINESPACE",
    "FIT",
    "LANDSCAPE_LINES",
    "MIDRULE",
    "PACKAGES",
    "Span",
    "latex_escape",
    "latex_table",
]

#: The packages a written table needs: ``\\toprule`` & co. (booktabs), ``\\resizebox`` and
#: ``\\rotatebox`` (graphicx).
PACKAGES = ("booktabs", "graphicx")

#: ASCII that LaTeX reads as markup, and the symbols the tables print. ``<``, ``>`` and ``|`` print as
#: other glyphs in LaTeX's default (OT1) font encoding; ``[``, ``]`` and ``*`` after a row's ``\\`` would
#: be read as its optional argument or star, so they are braced.
_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "[": "{[}",
    "]": "{]}",
    "*": "{*}",
    "\n": " ",
    "\r": " ",
    "\t": " ",
    "±": r"$\pm$",
    "≠": r"$\neq$",
    "≈": r"$\approx$",
    "≤": r"$\leq$",
    "≥": r"$\geq$",
    "×": r"$\times$",
    "÷": r"$\div$",
    "·": r"$\cdot$",
    "√": r"$\surd$",
    "∞": r"$\infty$",
    "→": r"$\rightarrow$",
    "–": "--",
    "—": "---",
    "−": "$-$",
    "“": "``",
    "”": "''",
    "‘": "`",
    "’": "'",
    "«": "<<",
    "»": ">>",
    "▲": r"$\uparrow$",
    "▼": r"$\downarrow$",
    "↑": r"$\uparrow$",
    "↓": r"$\downarrow$",
    "†": r"$\dagger$",
    "‡": r"$\ddagger$",
    "§": r"\S{}",
    "°": r"$^\circ$",
    "ß": r"\ss{}",
    "æ": r"\ae{}",
    "Æ": r"\AE{}",
    "œ": r"\oe{}",
    "Œ": r"\OE{}",
    "ø": r"\o{}",
    "Ø": r"\O{}",
    "ł": r"\l{}",
    "Ł": r"\L{}",
}

#: LaTeX's text accents by the Unicode combining mark they draw (all in the default OT1 encoding).
_ACCENTS = {
    "\u0300": "`",
    "\u0301": "'",
    "\u0302": "^",
    "\u0303": "~",
    "\u0304": "=",
    "\u0306": "u",
    "\u0307": ".",
    "\u0308": '"',
    "\u030a": "r",
    "\u030b": "H",
    "\u030c": "v",
    "\u0327": "c",
}

#: Greek letters with a math symbol of the same name (``ν`` -> ``$\\nu$``, ``Δ`` -> ``$\\Delta$``).
_GREEK = frozenset(
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho sigma tau upsilon phi "
    "chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega".split()
)

#: What a ``\\label`` key may not hold (a config's experiment name may).
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9:._-]")

#: A number's minus sign: ``-`` before a digit and after no word character or point (not ``1e-5``).
_MINUS = re.compile(r"(?<![\w.])-(?=\d)")


def _char(ch: str) -> str:
    """One character as LaTeX text (:func:`latex_escape`)."""
    if ch in _SPECIAL:
        return _SPECIAL[ch]
    if " " <= ch <= "~":
        return ch
    name = unicodedata.name(ch, "")
    if name.startswith("GREEK "):  # e.g. GREEK SMALL LETTER NU, GREEK CAPITAL LETTER DELTA
        letter = name.rsplit(" ", 1)[-1].lower()
        letter = letter.capitalize() if "CAPITAL" in name else letter
        if letter in _GREEK:
            return f"$\\{letter}$"
    base, *marks = unicodedata.normalize("NFD", ch)
    if marks and " " <= base <= "~" and all(m in _ACCENTS for m in marks):
        text = _char(base)
        for mark in marks:
            text = f"\\{_ACCENTS[mark]}{{{text}}}"
        return text
    return f"[U+{ord(ch):04X}]".replace("[", "{[}").replace("]", "{]}")  # shown, not dropped


def latex_escape(text: object) -> str:
    """``text`` as LaTeX that prints it: the markup characters escaped, the symbols the tables use
    (``±``, ``−``, ``≈``, ``▲``, ``▼``, ``†``, ``‡``, Greek letters) as math, accented Latin letters as
    accents, a number's minus sign as math, any other character as its code point ``[U+XXXX]``, so
    that the result compiles with plain ``pdflatex`` whatever the text holds."""
    return "".join(_char(ch) for ch in _MINUS.sub("−", str(text)))


@dataclass(frozen=True)
class Span:
    """A header cell over ``width`` columns (``\\multicolumn``, centred; ruled below when not empty)."""

    text: str
    width: int


#: The box and length the float is built in (declared once, by the first table a document inputs).
_REGISTERS = "\\ifdefined\\clTableBox\\else\\newsavebox{\\clTableBox}\\newlength{\\clTableWidth}\\fi"

#: The tabular's box, shrunk to ``\\clTableWidth`` where wider, never enlarged.
FIT = "\\resizebox{\\ifdim\\wd\\clTableBox>\\clTableWidth\\clTableWidth\\else\\wd\\clTableBox\\fi}{!}"

#: Wider than this many lines, a table turns a quarter onto the page's height (a landscape float) before
#: it is shrunk: nie2023_table1's grid of six backbones is 3.5 lines wide.
LANDSCAPE_LINES = 1.5

#: Body separators: a rule, or a little space (between groups of rows).
MIDRULE, ADDLINESPACE = "\\midrule", "\\addlinespace"

Row = Sequence[str | Span]


def _row(cells: Row) -> str:
    texts = (
        f"\\multicolumn{{{c.width}}}{{c}}{{{latex_escape(c.text)}}}"
        if isinstance(c, Span)
        else latex_escape(c)
        for c in cells
    )
    return " & ".join(texts) + " \\\\"


def _rules_under(cells: Row) -> str:
    """``\\cmidrule`` under each non-empty span of a header row ("" where none)."""
    rules, column = [], 1
    for cell in cells:
        width = cell.width if isinstance(cell, Span) else 1
        if isinstance(cell, Span) and cell.text:
            rules.append(f"\\cmidrule(lr){{{column}-{column + width - 1}}}")
        column += width
    return " ".join(rules)


def latex_table(
    name: str,
    columns: str,
    head: Sequence[Row],
    body: Sequence[Row | str],
    caption: str,
) -> str:
    """A ``table`` float labelled ``tab:<name>``: ``caption``, then a booktabs tabular of spec ``columns``
    with the ``head`` rows (a :class:`Span` groups columns) and the ``body`` rows, shrunk to the line where
    wider (:data:`FIT`) and turned onto the page's height first beyond :data:`LANDSCAPE_LINES`
    (``\\rotatebox``). Every text is escaped here (:func:`latex_escape`)."""
    out = [
        f"% {name}: generated by contrastlab.tables from the metrics files and config; do not edit.",
        "% Requires " + ", ".join(f"\\usepackage{{{p}}}" for p in PACKAGES) + ".",
        "\\begin{table}[htbp]",
        "\\centering",
        "\\scriptsize",
        "\\setlength{\\tabcolsep}{3pt}",
        _REGISTERS,
        "\\sbox{\\clTableBox}{%",
        f"\\begin{{tabular}}{{{columns}}}",
        "\\toprule",
    ]
    for row in head:
        out.append(_row(row))
        if rules := _rules_under(row):
            out.append(rules)
    out.append("\\midrule")
    out += [row if row in (MIDRULE, ADDLINESPACE) else _row(row) for row in body]
    out += [
        "\\bottomrule",
        "\\end{tabular}}%",
        f"% wider than {LANDSCAPE_LINES:g} lines: turned a quarter onto the page's height; shrunk to fit",
        f"\\ifdim\\wd\\clTableBox>{LANDSCAPE_LINES:g}\\linewidth",
        "\\setlength{\\clTableWidth}{0.9\\textheight}\\def\\clTableAngle{90}",
        "\\else",
        "\\setlength{\\clTableWidth}{\\linewidth}\\def\\clTableAngle{0}",
        "\\fi",
        "\\sbox{\\clTableBox}{\\rotatebox{\\clTableAngle}{\\parbox{\\clTableWidth}{\\centering",
        f"\\caption{{{latex_escape(caption)}}}",
        f"\\label{{tab:{_LABEL_UNSAFE.sub('-', name)}}}",
        FIT + "{\\usebox{\\clTableBox}}}}}%",
        "% the whole, caption and all, shrunk to the line where wider (a turned table's caption adds width)",
        "% and to the page where taller (a long table)",
        "\\resizebox*{!}{\\ifdim\\totalheight>0.95\\textheight 0.95\\textheight\\else\\totalheight\\fi}{%",
        "\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{\\usebox{\\clTableBox}}}",
        "\\end{table}",
    ]
    return "\n".join(out) + "\n"
