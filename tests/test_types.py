"""The type gate: `mypy --strict` on src/ (the `[tool.mypy]` table in pyproject.toml) reports no error.

CI runs the whole suite, so a type error anywhere in src/ fails CI, with mypy's own lines as the
failure message (CONTRIBUTING.md "Types"). mypy runs in a child process (the worker keeps none of
its memory) with its incremental cache in `.mypy_cache` (gitignored): about 30 s cold, a few
seconds warm.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_src_passes_mypy_strict() -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    report = (finished.stdout + finished.stderr).strip()
    assert finished.returncode == 0, f"mypy --strict on src/ failed (fix the types, not the gate):\n{report}"
    assert "no issues found" in report, report
