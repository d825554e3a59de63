"""`keys` and `runs` through the gateway `serve` runs for the config (REST `/api/v1/keys`, `/api/v1/runs`):
the same output as on the database directly, a line saying which, and with `--auth` the key it needs
(or, without TOOLWEAVE_API_KEY, the database directly, so the first admin key can be made)."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import Result
from typer.testing import CliRunner

from support.configs import python_backend
from support.paths import TOOLWEAVE
from support.processes import free_port, stop_process, subprocess_env, wait_for_port
from toolweave.cli import app
from toolweave.cli.running import state_file

runner = CliRunner()


def write_config(folder: Path) -> Path:
    config = {
        "gateway": {"database": f"sqlite:///{folder / 'toolweave.db'}"},
        "backends": [python_backend()],
        "composite_tools": [{"name": "hello_all", "description": "Greet everyone", "tools": ["py/greet"]}],
    }
    path = folder / "toolweave.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's HOME: the state files live under ~/.cache."""
    return tmp_path_factory.mktemp("records-home")


@pytest.fixture(autouse=True)
def _environment(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("TOOLWEAVE_URL", raising=False)
    monkeypatch.delenv("TOOLWEAVE_API_KEY", raising=False)


@pytest.fixture(scope="module")
def shared_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The config of the module's gateway: each test through it reads only what it made (keys, runs)."""
    return write_config(tmp_path_factory.mktemp("records"))


def run(*args: str, **env: str) -> Result:
    """The command in this process (Typer's runner): the process boundary these tests are about is
    the one between the command and the gateway `serve` runs, which stays a real process."""
    return runner.invoke(app, list(args), env=env, catch_exceptions=False)


def serve(config_path: Path, home: Path, *flags: str) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [str(TOOLWEAVE), "serve", "--port", str(port), "-c", str(config_path), *flags],
        env=subprocess_env(HOME=str(home)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, 60)
        # written before the port takes connections: a command from now on uses this gateway
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("HOME", str(home))
            assert json.loads(state_file(config_path).read_text())["url"] == f"http://127.0.0.1:{port}"
        url = f"http://127.0.0.1:{port}"
        wait_answering(url, process)
        yield url
    finally:
        stop_process(process)


def wait_answering(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Until the API answers at all (a 401 too): `serve` has then written its state file."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "serve exited"
        try:
            with urllib.request.urlopen(f"{url}/api/v1/backends", timeout=5):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout}s")


@pytest.fixture(scope="module")
def served(shared_config: Path, home: Path) -> Iterator[str]:
    yield from serve(shared_config, home)


@pytest.fixture
def config_path(shared_config: Path, served: str) -> Path:
    """The config of the module's running gateway."""
    return shared_config


def both(config_path: Path, *args: str) -> tuple[Result, ...]:
    """The command through the running gateway, then on the database directly (--local)."""
    remote = run(*args, "-c", str(config_path))
    local = run(*args, "-c", str(config_path), "--local")
    assert "via the running gateway" in remote.stderr, (args, remote.stderr)
    assert "--local: using the database directly" in local.stderr, (args, local.stderr)
    return remote, local


def test_keys_through_the_gateway_match_the_database(config_path: Path) -> None:
    created = run("keys", "create", "--tenant", "acme", "--name", "ci", "-c", str(config_path))
    assert created.exit_code == 0, created.stderr
    assert "via the running gateway" in created.stderr and "It is shown once" in created.stderr
    assert created.stdout.strip().startswith("tw_")
    remote, local = both(config_path, "keys", "list", "--json")
    assert remote.stdout == local.stdout
    [key] = json.loads(remote.stdout)
    assert (key["tenant"], key["name"], key["scopes"], key["revokedAt"]) == (
        "acme",
        "ci",
        ["tools:call", "tools:read"],
        None,
    )
    remote, local = both(config_path, "keys", "list")
    assert remote.stdout == local.stdout and key["id"] in remote.stdout
    revoked = run("keys", "revoke", key["id"], "-c", str(config_path))
    assert revoked.exit_code == 0 and f"revoked key {key['id']}" in revoked.stdout
    assert "via the running gateway" in revoked.stderr
    [after] = json.loads(run("keys", "list", "--json", "-c", str(config_path), "--local").stdout)
    assert after["revokedAt"] is not None
    for missing in both(config_path, "keys", "revoke", "nope"):
        assert missing.exit_code == 1 and "no API key 'nope'" in missing.stderr
    bad = run("keys", "create", "--tenant", "acme", "--scopes", "tools:everything", "-c", str(config_path))
    assert bad.exit_code == 1 and "invalid scope(s): tools:everything" in bad.stderr


def test_runs_through_the_gateway_match_the_database(config_path: Path) -> None:
    called = run("call", "hello_all", '{"name": "Ada"}', "-c", str(config_path))
    assert called.exit_code == 0, called.stdout + called.stderr
    remote, local = both(config_path, "runs", "--json")
    assert remote.stdout == local.stdout
    [record] = json.loads(remote.stdout)
    assert (record["tool"], record["status"]) == ("hello_all", "completed")
    remote, local = both(config_path, "runs", "--tool", "hello_all")
    assert remote.stdout == local.stdout and "1 runs" in remote.stdout
    remote, local = both(config_path, "runs", "show", record["id"])
    assert remote.stdout == local.stdout and json.loads(remote.stdout)["id"] == record["id"]
    for missing in both(config_path, "runs", "show", "nope"):
        assert missing.exit_code == 1 and "no run 'nope'" in missing.stderr
    refused = run("runs", "resume", record["id"], "-c", str(config_path))
    assert refused.exit_code == 1 and "cannot resume:" in refused.stderr, refused.stderr


def test_a_gateway_requiring_keys(tmp_path: Path, home: Path) -> None:
    config_path = write_config(tmp_path)  # its own gateway, with --auth
    for _url in serve(config_path, home, "--auth"):
        first = run(
            "keys", "create", "--tenant", "ops", "--scopes", "tools:admin,tools:read", "-c", str(config_path)
        )
        assert first.exit_code == 0, first.stderr
        assert "requires an API key and TOOLWEAVE_API_KEY is not set: using its database directly" in (
            first.stderr.replace("\n", "")
        )
        admin = first.stdout.strip()
        reader = run(
            "keys",
            "create",
            "--tenant",
            "ops",
            "--scopes",
            "tools:read",
            "-c",
            str(config_path),
            TOOLWEAVE_API_KEY=admin,
        )
        assert reader.exit_code == 0 and "via the running gateway" in reader.stderr, reader.stderr
        listed = run("keys", "list", "--json", "-c", str(config_path), TOOLWEAVE_API_KEY=admin)
        assert [k["scopes"] for k in json.loads(listed.stdout)] == [
            ["tools:admin", "tools:read"],
            ["tools:read"],
        ]
        denied = run("keys", "list", "-c", str(config_path), TOOLWEAVE_API_KEY=reader.stdout.strip())
        assert denied.exit_code == 1 and "lacks the tools:admin scope" in denied.stderr
        beyond = run(
            "keys",
            "create",
            "--tenant",
            "ops",
            "--scopes",
            "tools:call",
            "-c",
            str(config_path),
            TOOLWEAVE_API_KEY=admin,
        )
        assert beyond.exit_code == 1 and "cannot grant scope(s) it lacks: tools:call" in beyond.stderr
        other = run("keys", "list", "--tenant", "acme", "-c", str(config_path), TOOLWEAVE_API_KEY=admin)
        assert other.exit_code == 1 and "acts for tenant 'ops', not 'acme'" in other.stderr
