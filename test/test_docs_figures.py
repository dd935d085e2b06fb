"""Every measured figure in the README comes from the results page it cites.

A figure is a number with a decimal point or a unit of measure (s, %, ×, tokens/s,
"N of M").  Each paragraph or list item of the README that holds one must link a
page under docs/results/, and each of its figures must appear in one of the pages it
links (as written there, the unit aside).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURE = re.compile(r"(?<![\w.-])(\d+(?:\.\d+)?)(\s?(?:s\b|ms\b|%|×|x\b|tokens/s|min\b)|\s(?:of|against)\s\d+|(?=\.\d))")
DECIMAL = re.compile(r"(?<![\w.-])\d+\.\d+(?![\w.])")
RESULTS_LINK = re.compile(r"\]\(((?:docs/)?results/[\w./-]+\.md|docs/results/[\w./-]+\.md)(?:#[\w-]+)?\)")


def blocks(markdown: str) -> list[str]:
    """Paragraphs and list items, code blocks and tables left out."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    result = []
    for paragraph in re.split(r"\n\s*\n", text):
        if paragraph.lstrip().startswith("|"):
            continue
        result += [item for item in re.split(r"\n(?=- )", paragraph) if item.strip()]
    return result


def figures(block: str) -> set[str]:
    block = re.sub(r"\]\([^)]*\)", "]", block)  # not the numbers in links
    block = re.sub(r"\b(?:Python|ROS 2|version|v)\s?\d+(?:\.\d+)*", "", block)  # versions are no measurements
    found = {m.group(1) for m in FIGURE.finditer(block) if m.group(2) or "." in m.group(1)}
    return found | set(DECIMAL.findall(block))


def unsourced(readme: Path) -> list[str]:
    problems = []
    for block in blocks(readme.read_text()):
        numbers = figures(block)
        if not numbers:
            continue
        pages = [ROOT / link for link in RESULTS_LINK.findall(block)]
        if not pages:
            problems.append(f"no results page cited for {sorted(numbers)} in: {block.strip()[:120]}")
            continue
        text = " ".join(page.read_text() for page in pages if page.is_file())
        missing = sorted(n for n in numbers if not re.search(rf"(?<![\d.]){re.escape(n)}(?![\d])", text))
        if missing:
            problems.append(f"{missing} not on {[p.name for p in pages]}: {block.strip()[:120]}")
    return problems


def test_every_readme_figure_is_on_the_page_it_cites():
    assert unsourced(ROOT / "README.md") == []


def test_the_check_catches_a_figure_that_no_page_holds(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("The robot answers in **0.123456 s** ([bench](docs/results/bench-80-backends.md)).\n")
    assert any("0.123456" in p for p in unsourced(readme))
    readme.write_text("The robot answers in 0.5 s, no page cited.\n")
    assert any("no results page" in p for p in unsourced(readme))
