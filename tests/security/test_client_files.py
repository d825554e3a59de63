"""`toolweave init` and `toolweave connect` write files in a project someone else may have prepared:
never through a symbolic link, a key readable by its owner only, and TOML that parses whatever
characters the source config held."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolweave.cli import app

runner = CliRunner()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def cli(*args: str) -> tuple[int, str]:
    done = runner.invoke(app, list(args), catch_exceptions=False)
    return done.exit_code, done.output


def servers_file(folder: Path, servers: dict[str, object]) -> Path:
    path = folder / "servers.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_init_does_not_follow_a_dangling_link(project: Path, tmp_path: Path) -> None:
    source = servers_file(project, {"a": {"command": "echo"}})
    target = tmp_path / "elsewhere" / "created.toml"
    target.parent.mkdir()
    (project / "toolweave.toml").symlink_to(target)
    for extra in ([], ["--force"]):
        code, output = cli("init", str(source), "-o", "toolweave.toml", *extra)
        assert code == 1 and "symbolic link" in output, output
        assert not target.exists()  # before: `exists()` said no, and writing created the link's target


def test_connect_does_not_write_through_a_linked_client_file(project: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text('{"keep": true}')
    (project / ".vscode").mkdir()
    (project / ".vscode" / "mcp.json").symlink_to(victim)
    code, output = cli("connect", "vscode", "--http", "http://127.0.0.1:9/mcp", "--key", "tw_k")
    assert code == 1 and "symbolic link" in output, output
    assert victim.read_text() == '{"keep": true}'
    # a linked folder is refused the same way
    (project / ".vscode" / "mcp.json").unlink()
    (project / ".vscode").rmdir()
    (tmp_path / "other").mkdir()
    (project / ".vscode").symlink_to(tmp_path / "other")
    code, output = cli("connect", "vscode", "--http", "http://127.0.0.1:9/mcp")
    assert code == 1 and "symbolic link" in output, output
    assert list((tmp_path / "other").iterdir()) == []


def test_a_key_written_for_a_client_is_readable_by_its_owner_only(project: Path) -> None:
    (project / ".mcp.json").write_text('{"mcpServers": {}}')
    os.chmod(project / ".mcp.json", 0o644)
    code, output = cli("connect", "claude-code", "--http", "http://127.0.0.1:9/mcp", "--key", "tw_secret_k")
    assert code == 0, output
    written = project / ".mcp.json"
    assert "tw_secret_k" in written.read_text()
    assert stat.S_IMODE(written.stat().st_mode) == 0o600  # before: 0644, world-readable
    assert not written.is_symlink()
    # without a key the file keeps its mode
    other = project / "plain.json"
    other.write_text("{}")
    os.chmod(other, 0o640)
    code, output = cli("connect", "cursor", "--http", "http://127.0.0.1:9/mcp", "--file", str(other))
    assert code == 0, output
    assert stat.S_IMODE(other.stat().st_mode) == 0o640


def test_control_characters_in_a_source_config_make_valid_toml(project: Path) -> None:
    odd = 'a\x7fb\x00c\x1bd\x85e"f\\g\th\U0001f600'
    source = servers_file(project, {"odd": {"command": "run" + odd, "args": [odd], "env": {"K" + odd: odd}}})
    code, output = cli("init", str(source), "-o", "toolweave.toml")
    assert code == 0, output
    parsed = tomllib.loads((project / "toolweave.toml").read_text(encoding="utf-8"))  # before: DEL broke it
    [backend] = parsed["backends"]
    assert backend["command"] == "run" + odd and backend["args"] == [odd]
    assert backend["env"] == {"K" + odd: odd}
