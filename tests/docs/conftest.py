"""After a run that included the docs examples, list the blocks marked not-run and why."""

from __future__ import annotations

import pytest
from doc_blocks import doc_files, shell_blocks


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    ran = any(
        "test_docs_run.py" in report.nodeid
        for reports in terminalreporter.stats.values()
        for report in reports
        if hasattr(report, "nodeid")
    )
    if not ran:
        return
    skipped = [b for path in doc_files() for b in shell_blocks(path) if b.not_run is not None]
    terminalreporter.section(f"docs examples not run ({len(skipped)})")
    for block in skipped:
        terminalreporter.write_line(f"{block.where}: {block.not_run}")
