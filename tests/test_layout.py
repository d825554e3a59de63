"""The test tree itself: pytest imports test modules by their file name (no packages under tests/),
so two modules with one name in different folders stop the whole run at collection."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).parent


def test_no_two_test_modules_share_a_file_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        where[path.name].append(str(path.relative_to(TESTS)))
    shared = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not shared, f"rename one of each: {shared}"
