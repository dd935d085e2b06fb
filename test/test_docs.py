"""Every documentation path the code and the docs point to exists, with its anchor.

The code cites docs/ pages (`docs/guide.md#parameters`) instead of README section titles;
a page or heading renamed without its references fails here.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CITING = [
    *ROOT.glob("predgen_ros/**/*.py"),
    *ROOT.glob("predgen_ros/data/**/LICENSE-NOTE.txt"),
    *ROOT.glob("test/*.py"),
    *ROOT.glob("config/*.yaml"),
    *ROOT.glob("launch/*.py"),
    ROOT / "Makefile",
]
PAGES = [ROOT / "README.md", *ROOT.glob("docs/**/*.md")]
DOC_REFERENCE = re.compile(r"(docs/[\w./-]+\.md)(#[\w-]+)?")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found, fenced = set(), False
    for line in page.read_text().splitlines():
        fenced ^= line.startswith("```")
        if not fenced and (m := re.match(r"#+ (.*)", line)):
            found.add(github_anchor(m.group(1)))
    return found


def check(target: Path, anchor: str | None, where: str) -> None:
    assert target.exists(), f"{where}: {target.relative_to(ROOT)} does not exist"
    if anchor:
        assert anchor in anchors(target), f"{where}: no heading #{anchor} in {target.relative_to(ROOT)}"


def test_github_anchor_follows_githubs_rule():
    assert (
        github_anchor("Backends: llama.cpp on the CPU, transformers on CUDA")
        == "backends-llamacpp-on-the-cpu-transformers-on-cuda"
    )
    assert github_anchor("Reliability: `make stress`") == "reliability-make-stress"


@pytest.mark.parametrize("source", CITING, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_code_cites_docs_that_exist(source):
    text = source.read_text()
    assert not re.search(r"README[,:]? *\(?\"?[A-Z*]", text), (
        f"{source.name} cites a README section; cite docs/<page>.md#<anchor>"
    )
    for m in DOC_REFERENCE.finditer(text):
        check(ROOT / m.group(1), m.group(2) and m.group(2)[1:], source.name)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_link_to_files_and_headings_that_exist(page):
    for m in MARKDOWN_LINK.finditer(page.read_text()):
        link = m.group(1)
        if link.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = link.partition("#")
        check((page.parent / path).resolve() if path else page, anchor or None, page.name)


def test_the_readme_is_a_front_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 220
