"""The type gate: `mypy --strict` on src/ (the `[tool.mypy]` table in pyproject.toml) reports no error.

CI runs the whole suite, so a type error anywhere in src/ fails CI, with mypy's own lines as the
failure message (CONTRIBUTING.md "Types"). mypy runs in a child process (the worker keeps none of
its memory) with its incremental cache outside the checkout, in `~/.cache/toolweave-tests/mypy`
beside the tests' npm cache: about 20 s of CPU cold, under 1 s warm. mypy keys every cached module
by its file's hash, so one cache serves every clone (CI's fresh ones included) and an edited file
is checked again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def mypy_cache() -> Path:
    """`$TOOLWEAVE_MYPY_CACHE`, else `~/.cache/toolweave-tests/mypy`."""
    configured = os.environ.get("TOOLWEAVE_MYPY_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "toolweave-tests" / "mypy"


def test_src_passes_mypy_strict() -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(mypy_cache())],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    report = (finished.stdout + finished.stderr).strip()
    assert finished.returncode == 0, f"mypy --strict on src/ failed (fix the types, not the gate):\n{report}"
    assert "no issues found" in report, report
