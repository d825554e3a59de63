"""toolweave as the client of the MCP conformance suite's `auth/*` client scenarios, through its public
interface only: a generated config with `[backends.oauth]`, `toolweave login`, `toolweave tools --local`
and `toolweave call --local`.

The suite runs this script with the scenario's MCP server URL as the last argument, the scenario in
`MCP_CONFORMANCE_SCENARIO` and its credentials as JSON in `MCP_CONFORMANCE_CONTEXT`. The scenarios'
authorization servers approve at once, so the "browser" (`BROWSER`, honoured by `toolweave login`)
is this script again (`--browse URL`): it follows the authorization URL's redirects to toolweave's
loopback listener, as a person's browser would.

The three commands run in this one interpreter (the `toolweave` command's Typer app, each with its
own event loop and gateway, reading the grant `login` stored from the database): a `toolweave`
process spends 1-3 s importing, and this runs for 18 scenarios. A login used by another process is
tests/credentials/test_oauth_api.py's subject.

For the same reason the suite's command is usually `forked_client.py`: `--serve-forks SOCKET` runs
this script as a process that has imported toolweave once and forks a copy of itself for each
scenario (`serve_forks`), and `forked_client.py` hands it the scenario's arguments, environment and
standard streams and exits with its status. Each scenario still runs in its own process, as if
started afresh, only without importing again.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import tempfile
import traceback
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CIMD_URL = "https://conformance-test.local/client-metadata.json"
"""The Client ID Metadata Document URL the `auth/basic-cimd` scenario expects."""


def browse(url: str) -> int:
    """Follow `url` and its redirects (to the loopback callback) like a browser that approves."""
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            answer.read()
    except urllib.error.HTTPError as error:
        print(f"browser: HTTP {error.code} at {error.url}", file=sys.stderr)
        return 1
    return 0


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return json.dumps(value)


def _issuer_of(server_url: str) -> str:
    """The MCP server's authorization server, read from its protected-resource metadata (what an
    operator looks up once to configure `issuer` for token exchange)."""
    request = urllib.request.Request(server_url, data=b"{}", method="POST")
    request.add_header("content-type", "application/json")
    metadata_url = None
    try:
        urllib.request.urlopen(request, timeout=10).read()
    except urllib.error.HTTPError as error:
        challenge = error.headers.get("www-authenticate", "")
        if 'resource_metadata="' in challenge:
            metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
    if metadata_url is None:
        base, _, path = server_url.partition("://")[2].partition("/")
        metadata_url = f"{server_url.split('://')[0]}://{base}/.well-known/oauth-protected-resource/{path}"
    with urllib.request.urlopen(metadata_url, timeout=10) as answer:
        return str(json.loads(answer.read())["authorization_servers"][0])


def oauth_table(scenario: str, context: dict[str, Any], server_url: str) -> dict[str, Any]:
    """`[backends.oauth]` for the scenario, from its context, as a user would write it."""
    if scenario == "auth/client-credentials-basic":
        return {
            "grant": "client_credentials",
            "client_id": context["client_id"],
            "client_secret": context["client_secret"],
        }
    if scenario == "auth/client-credentials-jwt":
        return {
            "grant": "client_credentials",
            "client_id": context["client_id"],
            "private_key": context["private_key_pem"],
            "private_key_alg": context.get("signing_algorithm", "ES256"),
        }
    if scenario == "auth/cross-app-access-complete-flow":
        return {
            "grant": "token_exchange",
            "client_id": context["client_id"],
            "client_secret": context["client_secret"],
            "issuer": _issuer_of(server_url),
            "idp_token_endpoint": context["idp_token_endpoint"],
            "idp_client_id": context["idp_client_id"],
            "subject_token": context["idp_id_token"],
        }
    table: dict[str, Any] = {}
    if context.get("client_id"):
        table["client_id"] = context["client_id"]
    if context.get("client_secret"):
        table["client_secret"] = context["client_secret"]
    if scenario == "auth/basic-cimd":
        table["client_metadata_url"] = CIMD_URL
    return table


def write_config(folder: Path, server_url: str, oauth: dict[str, Any]) -> Path:
    lines = [
        "[gateway]",
        f"database = {_toml('sqlite:///' + str(folder / 'toolweave.db'))}",
        "",
        "[[backends]]",
        'name = "test"',
        f"url = {_toml(server_url)}",
        "",
        "[backends.oauth]",
        *(f"{key} = {_toml(value)}" for key, value in oauth.items()),
    ]
    path = folder / "toolweave.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str


def run(*args: str, env: dict[str, str]) -> Done:
    """`toolweave ARGS` in this interpreter, with `env` as the environment for its duration."""
    from typer.testing import CliRunner

    from toolweave.cli import app

    unset: dict[str, str | None] = {name: None for name in os.environ if name not in env}
    done = CliRunner().invoke(app, list(args), env={**unset, **env})
    print(f"$ toolweave {' '.join(args)} -> {done.exit_code}", file=sys.stderr)
    print(done.stdout[-2000:], done.stderr[-2000:], sep="\n", file=sys.stderr)
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        traceback.print_exception(done.exception, file=sys.stderr)
    return Done(done.exit_code, done.stdout)


PRELOADED = (
    "typer.testing",
    "toolweave.cli.oauth",
    "toolweave.cli.tools",
    "toolweave.cli.running",
    "toolweave.gateway",
    "toolweave.services.runtime",
    "toolweave.credentials.oauth",
    "toolweave.backends.http.oauth",
    "toolweave.backends.mcp.calls",
)
"""What the three commands import: imported once, before `serve_forks` forks."""


def serve_forks(path: str) -> int:
    """Import toolweave, then fork a copy of this process for each request on the Unix socket `path`.

    A request (from `forked_client.py`) is the client's three standard streams, passed as file
    descriptors, then its arguments, environment and working directory as JSON; the copy runs
    `main` with them and writes its exit status back. Requests are served one after another here
    and run side by side in their copies; this process holds no thread and no event loop when it
    forks.
    """
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen()
        while True:
            connection, _ = listener.accept()
            _reap_copies()
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:
                listener.close()
                os._exit(_run_forked(connection))
            connection.close()


def _reap_copies() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] != 0:
            pass


def _run_forked(connection: socket.socket) -> int:
    """In the copy: take the client's streams, arguments and environment, run `main`, report."""
    code = 1
    try:
        _, fds, _, _ = socket.recv_fds(connection, 1, 3)
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
        request = json.loads(b"".join(chunks))
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        code = main(request["argv"])
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported to the client's stderr, as a crash would be
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(OSError):
            connection.sendall(str(code).encode())
    return code


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "--browse":
        return browse(argv[1])
    if len(argv) == 2 and argv[0] == "--serve-forks":
        return serve_forks(argv[1])
    server_url = argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="tw-oauth-") as scratch:
        folder = Path(scratch)
        config = write_config(folder, server_url, oauth_table(scenario, context, server_url))
        env = dict(os.environ)
        env["BROWSER"] = f"{sys.executable} {Path(__file__).resolve()} --browse %s"
        env["TOOLWEAVE_SECRET_KEY"] = "conformance-only-key"
        env.pop("TOOLWEAVE_CONFIG", None)
        if run("login", "test", "-c", str(config), env=env).returncode != 0:
            return 1
        listed = run("tools", "--local", "--json", "-c", str(config), env=env)
        if listed.returncode != 0:
            return 1
        tools = json.loads(listed.stdout)
        if not tools:
            return 1
        called = run("call", "--local", tools[0]["name"], "{}", "-c", str(config), env=env)
        return called.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
