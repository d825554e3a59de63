"""What users read never cites a document they do not have.

The README, docs/, the docstrings and templates under src/, the examples and the bench harness are
all a reader gets from a clone. A pointer to the planning notes the project was built from ("seed
002 §4.9", "SPEC §3", "../shared/ARCHITECTURE.md") leads nowhere for them, so each must say what
it means or point at a file in the repository instead.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

OUTSIDE = re.compile(
    r"\bseeds? ?\d{3}\b"  # "seed 002 §4.9", "seed 000's shape"
    r"|\bseeds/"
    r"|\bSPEC\b"  # "SPEC §3" (upper case only: `spec.steps`, `FASTMCP_SPEC` are fine)
    r"|\bARCHITECTURE\.md\b"  # the upper-case planning document, not docs/architecture.md
    r"|\.\./shared\b|/work/shared\b"
)
"""A reference to a document outside the repository."""

READ_BY_USERS = ("README.md", "docs", "src", "examples", "bench", "pyproject.toml")
SKIP_PARTS = {"vendor", "__pycache__", ".peers", "results", ".venv"}
TEXT_SUFFIXES = {".md", ".py", ".toml", ".yaml", ".yml", ".json", ".html", ".js", ".css", ".txt", ""}


def _files() -> list[Path]:
    """Every text file a reader of a clone sees, minus vendored code and generated results: what git
    tracks or would (installed bench servers, venvs and caches are git-ignored and not ours)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", *READ_BY_USERS],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    found: list[Path] = []
    for name in sorted(set(filter(None, listed.split("\0")))):
        candidate = ROOT / name
        relative = candidate.relative_to(ROOT)
        if candidate.is_file() and candidate.suffix in TEXT_SUFFIXES and not SKIP_PARTS & set(relative.parts):
            found.append(candidate)
    return found


def test_the_scan_covers_the_docs_and_the_sources() -> None:
    names = {str(path.relative_to(ROOT)) for path in _files()}
    assert {"README.md", "docs/api.md", "src/toolweave/gateway.py", "examples/demo.toml"} <= names


@pytest.mark.parametrize(
    "text",
    [
        "The REST API (seed 002 §4.9)",
        "seed 000's shape",
        "Result (SPEC §3)",
        "see ../shared/x",
        "ARCHITECTURE.md §2",
    ],
)
def test_the_pattern_catches_outside_references(text: str) -> None:
    assert OUTSIDE.search(text)


@pytest.mark.parametrize(
    "text", ["spec.steps[1]", "FASTMCP_SPEC = 1", "docs/architecture.md", "a seed of 42"]
)
def test_the_pattern_spares_ordinary_words(text: str) -> None:
    assert not OUTSIDE.search(text)


def test_no_reference_to_documents_outside_the_repository() -> None:
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _files()
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not hits, "say what is meant, or cite a file in the repository:\n" + "\n".join(hits)
