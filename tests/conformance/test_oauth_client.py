"""The MCP conformance suite's `auth/*` CLIENT scenarios with toolweave as the client.

For each scenario the suite starts a protected MCP server and its authorization server (an IdP too
for cross-app access), runs `tests/servers/oauth_conformance_client.py` with the server URL and the
scenario's credentials, and checks every request it sees. That script drives toolweave only through
its public interface: a generated config with `[backends.oauth]`, `toolweave login` (the "browser"
follows the authorization redirect, `BROWSER`), `toolweave tools --local`, `toolweave call --local`.

Cost: a Node process per scenario and a Python one, which runs the three commands. The Python one is
a copy forked from one that imported toolweave once for the module (`forked_client.py`): importing
was half of each scenario's CPU (2.2 s of 4.5 s on 2 cores here).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.node import conformance_cli, node_env
from support.npm_documents import Unavailable
from support.paths import PYTHON, SERVERS

SCENARIOS = [
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/client-credentials-basic",
    "auth/client-credentials-jwt",
    "auth/cross-app-access-complete-flow",
]
CLIENT = SERVERS / "oauth_conformance_client.py"
LAUNCHER = SERVERS / "forked_client.py"


@pytest.fixture(scope="module")
def cli() -> Path:
    try:
        return conformance_cli()
    except Unavailable as missing:
        pytest.skip(str(missing))


@pytest.fixture(scope="module")
def client_command() -> Iterator[str]:
    """The command the suite runs for each scenario: a copy of a client that has imported toolweave."""
    with tempfile.TemporaryDirectory(prefix="tw-forks-") as folder:  # short: a socket path is <108 bytes
        socket_path = Path(folder) / "client.sock"
        forks = subprocess.Popen([str(PYTHON), str(CLIENT), "--serve-forks", str(socket_path)])
        try:
            deadline = time.monotonic() + 60
            while not socket_path.exists():
                assert forks.poll() is None, f"the forking client exited ({forks.returncode})"
                assert time.monotonic() < deadline, "the forking client did not listen within 60 s"
                time.sleep(0.05)
            yield f"{PYTHON} -S {LAUNCHER} {socket_path}"
        finally:
            forks.kill()
            forks.wait()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario_passes_through_toolweave(
    cli: Path, client_command: str, scenario: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [
            str(cli),
            "client",
            "--scenario",
            scenario,
            "--timeout",
            "180000",
            "--command",
            client_command,
            "-o",
            str(tmp_path),
        ],
        env=node_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    found = sorted(tmp_path.rglob("checks.json"))
    assert found, f"the suite wrote no result for {scenario}: {done.stdout[-3000:]}{done.stderr[-2000:]}"
    checks = json.loads(found[0].read_text())
    wrong = [
        (c["id"], c["status"], c.get("description")) for c in checks if c["status"] in ("FAILURE", "WARNING")
    ]
    client_log = (
        (found[0].parent / "stderr.txt").read_text() if (found[0].parent / "stderr.txt").exists() else ""
    )
    assert wrong == [], client_log[-4000:]
    assert "TIMED OUT" not in done.stdout, client_log[-4000:]
    assert done.returncode == 0, done.stdout[-3000:]
