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

from support.configs import python_backend
from support.fixtures import WriteConfig
from support.paths import TOOLWEAVE
from support.processes import free_port, stop_process, subprocess_env, wait_for_port
from toolweave.cli.running import state_file


@pytest.fixture
def config_path(write_config: WriteConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the state files live under ~/.cache
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("TOOLWEAVE_URL", raising=False)
    monkeypatch.delenv("TOOLWEAVE_API_KEY", raising=False)
    return write_config(
        {
            "gateway": {"database": f"sqlite:///{tmp_path / 'toolweave.db'}"},
            "backends": [python_backend()],
            "composite_tools": [
                {"name": "hello_all", "description": "Greet everyone", "tools": ["py/greet"]}
            ],
        }
    )


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOOLWEAVE), *args], capture_output=True, text=True, timeout=120, env=subprocess_env(**env)
    )


def serve(config_path: Path, *flags: str) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [str(TOOLWEAVE), "serve", "--port", str(port), "-c", str(config_path), *flags],
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, 60)
        # written before the port takes connections: a command from now on uses this gateway
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


@pytest.fixture
def served(config_path: Path) -> Iterator[str]:
    yield from serve(config_path)


def both(config_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], ...]:
    """The command through the running gateway, then on the database directly (--local)."""
    remote = run(*args, "-c", str(config_path))
    local = run(*args, "-c", str(config_path), "--local")
    assert "via the running gateway" in remote.stderr, (args, remote.stderr)
    assert "--local: using the database directly" in local.stderr, (args, local.stderr)
    return remote, local


def test_keys_through_the_gateway_match_the_database(config_path: Path, served: str) -> None:
    created = run("keys", "create", "--tenant", "acme", "--name", "ci", "-c", str(config_path))
    assert created.returncode == 0, created.stderr
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
    assert revoked.returncode == 0 and f"revoked key {key['id']}" in revoked.stdout
    assert "via the running gateway" in revoked.stderr
    [after] = json.loads(run("keys", "list", "--json", "-c", str(config_path), "--local").stdout)
    assert after["revokedAt"] is not None
    for missing in both(config_path, "keys", "revoke", "nope"):
        assert missing.returncode == 1 and "no API key 'nope'" in missing.stderr
    bad = run("keys", "create", "--tenant", "acme", "--scopes", "tools:everything", "-c", str(config_path))
    assert bad.returncode == 1 and "invalid scope(s): tools:everything" in bad.stderr


def test_runs_through_the_gateway_match_the_database(config_path: Path, served: str) -> None:
    called = run("call", "hello_all", '{"name": "Ada"}', "-c", str(config_path))
    assert called.returncode == 0, called.stdout + called.stderr
    remote, local = both(config_path, "runs", "--json")
    assert remote.stdout == local.stdout
    [record] = json.loads(remote.stdout)
    assert (record["tool"], record["status"]) == ("hello_all", "completed")
    remote, local = both(config_path, "runs", "--tool", "hello_all")
    assert remote.stdout == local.stdout and "1 runs" in remote.stdout
    remote, local = both(config_path, "runs", "show", record["id"])
    assert remote.stdout == local.stdout and json.loads(remote.stdout)["id"] == record["id"]
    for missing in both(config_path, "runs", "show", "nope"):
        assert missing.returncode == 1 and "no run 'nope'" in missing.stderr
    refused = run("runs", "resume", record["id"], "-c", str(config_path))
    assert refused.returncode == 1 and "cannot resume:" in refused.stderr, refused.stderr


def test_a_gateway_requiring_keys(config_path: Path) -> None:
    for _url in serve(config_path, "--auth"):
        first = run(
            "keys", "create", "--tenant", "ops", "--scopes", "tools:admin,tools:read", "-c", str(config_path)
        )
        assert first.returncode == 0, first.stderr
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
        assert reader.returncode == 0 and "via the running gateway" in reader.stderr, reader.stderr
        listed = run("keys", "list", "--json", "-c", str(config_path), TOOLWEAVE_API_KEY=admin)
        assert [k["scopes"] for k in json.loads(listed.stdout)] == [
            ["tools:admin", "tools:read"],
            ["tools:read"],
        ]
        denied = run("keys", "list", "-c", str(config_path), TOOLWEAVE_API_KEY=reader.stdout.strip())
        assert denied.returncode == 1 and "lacks the tools:admin scope" in denied.stderr
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
        assert beyond.returncode == 1 and "cannot grant scope(s) it lacks: tools:call" in beyond.stderr
        other = run("keys", "list", "--tenant", "acme", "-c", str(config_path), TOOLWEAVE_API_KEY=admin)
        assert other.returncode == 1 and "acts for tenant 'ops', not 'acme'" in other.stderr
