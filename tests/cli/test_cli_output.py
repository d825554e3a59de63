"""What the CLI prints when its output is not a terminal, and its help."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from typer.testing import CliRunner

from support.paths import TOOLWEAVE
from support.processes import subprocess_env
from toolweave.cli import app


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOOLWEAVE), *args], capture_output=True, text=True, timeout=120, env=subprocess_env(**env)
    )


def test_a_piped_table_is_not_cut_so_a_key_id_can_be_pasted(tmp_path: Path) -> None:
    """Only the listing is a process (its stdout a pipe); making and revoking the key need none."""
    database = f"sqlite:///{tmp_path / 'keys.db'}"
    home = {"HOME": str(tmp_path)}
    tenant = ["--tenant", "a-tenant-with-a-rather-long-name"]
    created = CliRunner().invoke(app, ["keys", "create", *tenant, "--database", database], env=home)
    assert created.exit_code == 0, created.stderr
    key_id = re.search(r"created key (\S+)", created.stderr).group(1)  # type: ignore[union-attr]
    listed = run("keys", "list", "--database", database, COLUMNS="80", HOME=str(tmp_path))
    assert key_id in listed.stdout and "a-tenant-with-a-rather-long-name" in listed.stdout
    assert "…" not in listed.stdout
    revoked = CliRunner().invoke(app, ["keys", "revoke", key_id, "--database", database], env=home)
    assert revoked.exit_code == 0, revoked.stderr


def test_help_shows_no_type_beside_a_plain_flag() -> None:
    shown = CliRunner().invoke(app, ["serve", "--help"]).stdout
    assert "--stdio" in shown and "--port" in shown
    assert "<bool>" not in shown
