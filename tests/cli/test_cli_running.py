"""`tools`, `call` and `export` through the gateway `serve` runs for the same config (found through the
state file it writes), or the one `--url`/`TOOLWEAVE_URL` names: the served gateway's state, the same
output as in-process, and a line saying which was used."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import Result
from typer.testing import CliRunner

from support.configs import python_backend, stdio_backend
from support.paths import TOOLWEAVE
from support.processes import free_port, stop_process, subprocess_env, wait_for_port
from toolweave.cli import app
from toolweave.cli.running import state_file

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("in_process_testserver")
"""The commands here run in this process, `--local` ones starting the test server: in this process too
(a child importing the SDK costs 1-3 s CPU each time). The gateway `serve` runs keeps a real one."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's folder: its config, database and HOME (the state files live under ~/.cache)."""
    return tmp_path_factory.mktemp("running")


@pytest.fixture(scope="module")
def config_path(folder: Path) -> Path:
    config = {
        "gateway": {"database": f"sqlite:///{folder / 'toolweave.db'}"},
        # crash and garbage differ in-process (they need a process): hidden, so listings compare equal
        "backends": [stdio_backend(hide=["crash", "garbage"]), python_backend()],
        "composite_tools": [{"name": "hello_all", "description": "Greet everyone", "tools": ["py/greet"]}],
    }
    path = folder / "toolweave.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture(autouse=True)
def home(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(folder / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("TOOLWEAVE_URL", raising=False)
    return folder / "home"


def run(*args: str, **env: str) -> Result:
    """The command in this process (Typer's runner): the process boundary these tests are about is
    the one between the command and the gateway `serve` runs, which stays a real process."""
    return runner.invoke(app, list(args), env=env, catch_exceptions=False)


def wait_until_connected(url: str, timeout: float = 60) -> None:
    """The gateway listens before its backends are up; these tests compare listings, so wait for them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            with urllib.request.urlopen(f"{url}/api/v1/backends", timeout=5) as answer:
                backends = json.loads(answer.read())["backends"]
            if backends and all(backend["status"] == "connected" for backend in backends):
                return
        time.sleep(0.1)
    raise TimeoutError(f"the backends of {url} did not all connect within {timeout}s")


@pytest.fixture(scope="module")
def served(config_path: Path, folder: Path) -> Iterator[str]:
    """One `toolweave serve` for the module: the tests through it change no state another reads
    (the test server's counter is read by one test only)."""
    port = free_port()
    process = subprocess.Popen(
        [str(TOOLWEAVE), "serve", "--port", str(port), "-c", str(config_path)],
        env=subprocess_env(HOME=str(folder / "home")),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, 60)
        url = f"http://127.0.0.1:{port}"
        wait_until_connected(url)
        yield url
    finally:
        stop_process(process)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(folder / "home"))
        assert not state_file(config_path).exists(), "serve removes its state file when it stops"


def test_call_goes_through_the_running_gateway_and_sees_its_state(config_path: Path, served: str) -> None:
    first = run("call", "ts__increment", "-c", str(config_path))
    second = run("call", "ts__increment", "-c", str(config_path))
    assert first.exit_code == 0 and second.exit_code == 0, first.stdout + second.stdout
    # one backend process, kept by the gateway: the counter goes on (each in-process call would say 1)
    assert json.loads(first.stdout)["structuredContent"] == {"value": 1}
    assert json.loads(second.stdout)["structuredContent"] == {"value": 2}
    assert f"via the running gateway at {served}" in first.stderr.replace("\n", "")
    local = run("call", "ts__increment", "-c", str(config_path), "--local")
    assert json.loads(local.stdout)["structuredContent"] == {"value": 1}
    assert "--local: starting the backends in this process" in local.stderr


def test_the_output_is_the_same_through_the_gateway_and_in_process(config_path: Path, served: str) -> None:
    for args in (
        ["tools", "--json"],
        ["tools"],
        ["export", "hello_all", "--format", "openai"],
        ["export", "--all", "--format", "anthropic"],
        ["call", "py__greet", '{"name": "Ada"}'],
        ["call", "nope__missing"],
    ):
        remote = run(*args, "-c", str(config_path))
        local = run(*args, "-c", str(config_path), "--local")
        assert "via the running gateway" in remote.stderr, args
        assert (remote.exit_code, remote.stdout) == (local.exit_code, local.stdout), args
    [tool] = json.loads(run("export", "hello_all", "-c", str(config_path)).stdout)
    assert tool["name"] == "hello_all"


def test_an_explicit_url_and_a_gateway_that_cannot_be_reached(served: str) -> None:
    other = run("tools", "--json", "-c", "/nowhere/at/all.toml", "--url", served)
    assert other.exit_code == 0, other.stderr
    assert "ts__echo" in {tool["name"] for tool in json.loads(other.stdout)}
    assert f"via the gateway at {served}" in other.stderr.replace("\n", "")
    dead = f"http://127.0.0.1:{free_port()}"
    gone = run("call", "ts__echo", '{"text": "x"}', TOOLWEAVE_URL=dead)
    assert gone.exit_code == 1
    assert f"the gateway at {dead} cannot be reached" in gone.stderr.replace("\n", "")


def test_without_a_gateway_the_command_starts_the_backends_and_says_so(
    config_path: Path, tmp_path: Path
) -> None:
    alone = shutil.copy(config_path, tmp_path / "alone.yaml")  # not the config the module's gateway serves
    stale = state_file(alone)
    stale.parent.mkdir(parents=True, exist_ok=True)
    dead_pid = 2**22 + 17  # above the default pid_max: no such process
    stale.write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": dead_pid, "config": str(alone)}))
    done = run("call", "ts__increment", "-c", str(alone))
    assert done.exit_code == 0, done.stderr
    assert "no gateway running for this config" in done.stderr.replace("\n", "")
    assert not stale.exists(), "a state file left by a gateway that died is removed"
    assert os.environ.get("TOOLWEAVE_URL") is None
