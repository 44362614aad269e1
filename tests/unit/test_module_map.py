"""docs/architecture.md's module map names every module of pgsched/ and no other, so a
reader who trusts it finds every part and nothing that is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def test_the_module_map_matches_the_tree():
    doc = _section((ROOT / "docs" / "architecture.md").read_text(), "## Module map")
    listed = re.findall(r"^\| `([^`]+\.py)` \|", doc, re.M)
    tree = {
        p.relative_to(ROOT / "pgsched").as_posix()
        for p in (ROOT / "pgsched").rglob("*.py")
        if "__pycache__" not in p.parts and "_resources" not in p.parts
    }
    assert len(listed) == len(set(listed)), "a module is listed twice"
    assert sorted(tree - set(listed)) == [], "in the tree, not in the module map"
    assert sorted(set(listed) - tree) == [], "in the module map, not in the tree"


def test_no_module_is_over_400_lines_and_the_median_is_under_200():
    sizes = sorted(
        len(p.read_text().splitlines())
        for p in (ROOT / "pgsched").rglob("*.py")
        if "__pycache__" not in p.parts
    )
    big = [
        p.as_posix()
        for p in (ROOT / "pgsched").rglob("*.py")
        if len(p.read_text().splitlines()) > 400
    ]
    assert big == []
    assert sizes[len(sizes) // 2] < 200
