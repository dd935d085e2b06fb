"""docs/design.md's layout is the package's tree: every module has its line, and no line
names a module that is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "predgen_ros"
ENTRY = re.compile(r"^(?P<indent> *)(?P<name>\S+)(?: {2,}.*)?$")


def layout_block() -> list[str]:
    text = (ROOT / "docs" / "design.md").read_text()
    section = text.split("\n## Layout\n", 1)[1]
    return section.split("```\n", 2)[1].splitlines()


def listed_modules(lines: list[str]) -> set[str]:
    """Paths under predgen_ros/ of the `.py` entries, a folder's entries indented under it."""
    folders: list[tuple[int, str]] = []  # (indent, folder path) from the outermost
    listed = set()
    for line in lines:
        match = ENTRY.match(line)
        if not match:
            continue
        indent, name = len(match["indent"]), match["name"]
        folders = [(i, f) for i, f in folders if i < indent]
        path = "".join(f for _, f in folders) + name
        if name.endswith("/"):
            folders.append((indent, name))
        elif name.endswith(".py") and path.startswith("predgen_ros/"):
            listed.add(path.removeprefix("predgen_ros/"))
    return listed


def package_modules() -> set[str]:
    return {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}


def test_every_module_of_the_package_has_its_line_in_the_layout():
    missing = package_modules() - listed_modules(layout_block())
    assert not missing, f"docs/design.md's layout lacks {sorted(missing)}"


def test_the_layout_names_no_module_that_is_gone():
    gone = listed_modules(layout_block()) - package_modules()
    assert not gone, f"docs/design.md's layout names {sorted(gone)}, which the package no longer has"


def test_the_reader_sees_a_missing_module():
    lines = ["predgen_ros/", "  engine/", "    session.py   x", "    backends/llama.py  y", "  events.py  z"]
    assert listed_modules(lines) == {"engine/session.py", "engine/backends/llama.py", "events.py"}
