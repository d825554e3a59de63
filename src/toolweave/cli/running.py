"""A gateway already running for a config: the small state file `serve` writes, and the CLI talking to
that gateway's REST API instead of starting every backend itself.

`toolweave serve -c CONFIG` writes `<cache>/toolweave/gateways/<hash of CONFIG's absolute path>.json`
(`<cache>` is `$XDG_CACHE_HOME` or `~/.cache`) with its URL and process id, and removes it on exit.
`tools`, `call`, `export`, `runs` and `keys` then go through that gateway: the same backends, sessions
and state a client sees, answered in milliseconds. `--url` (or `TOOLWEAVE_URL`) names a gateway explicitly,
`--local` never uses one; `TOOLWEAVE_API_KEY` is sent when the gateway requires keys.

Plain `urllib`: a command that only talks to a gateway must not pay for importing an HTTP client.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from toolweave.actor import CLI_USER_AGENT
from toolweave.errors import ToolweaveError

T = TypeVar("T")
URL_ENV = "TOOLWEAVE_URL"
KEY_ENV = "TOOLWEAVE_API_KEY"
TIMEOUT = 330.0
"""Seconds a request may take: longer than any tool call's own timeout would let it run."""

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar=URL_ENV,
        help="A running gateway to use (e.g. http://127.0.0.1:8080). Default: the one `serve` started for "
        "this config, if any.",
        show_default=False,
    ),
]
LocalOption = Annotated[
    bool,
    typer.Option("--local", help="Start the backends in this process even when a gateway is running."),
]


class GatewayError(ToolweaveError):
    """The running gateway answered with an error (its message is the one to show), or is unreachable."""

    def __init__(
        self, message: str, status: int | None = None, problems: list[tuple[str, str]] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.problems = problems or []
        """The API's `problems` (path, message), for a refusal that lists them."""


@dataclass(frozen=True, slots=True)
class Running:
    url: str
    """The gateway's base URL, without a trailing slash."""
    how: str
    """How it was found, for the line saying which gateway was used."""

    def get(self, path: str, query: dict[str, Any] | None = None) -> Any:
        from urllib.parse import urlencode

        suffix = f"?{urlencode(query, doseq=True)}" if query else ""
        return self._send("GET", f"{path}{suffix}", None)

    def post(self, path: str, body: Any) -> Any:
        return self._send("POST", path, body)

    def _send(self, method: str, path: str, body: Any) -> Any:
        import urllib.error
        import urllib.request  # here: it loads ssl and tempfile, which most commands never need

        headers = {"Accept": "application/json", "User-Agent": CLI_USER_AGENT}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        key = os.environ.get(KEY_ENV)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(f"{self.url}{path}", data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as error:
            raise _gateway_error(error) from None
        except (OSError, ValueError) as error:
            reason = getattr(error, "reason", error)
            raise GatewayError(f"the gateway at {self.url} cannot be reached: {reason}") from None


def _gateway_error(error: Any) -> GatewayError:
    """The API's own message and problems (`{"error": {"message", "problems"}}`), else the status line."""
    try:
        payload = json.loads(error.read() or b"{}")
    except ValueError:
        payload = {}
    problem = payload.get("error") if isinstance(payload, dict) else None
    problem = problem if isinstance(problem, dict) else {}
    message = problem.get("message")
    if error.code == 401 and not os.environ.get(KEY_ENV):
        message = f"{message or 'unauthorized'} (set {KEY_ENV} to an API key)"
    listed = problem.get("problems")
    problems = [
        (str(p.get("path", "")), str(p.get("message", "")))
        for p in (listed if isinstance(listed, list) else [])
        if isinstance(p, dict)
    ]
    return GatewayError(message or f"HTTP {error.code} {error.reason}", error.code, problems)


# -- the state file ------------------------------------------------------------------------------


def state_dir() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "toolweave" / "gateways"


def state_file(config_path: Path) -> Path:
    digest = hashlib.sha256(str(config_path.resolve()).encode()).hexdigest()[:16]
    return state_dir() / f"{digest}.json"


def record_serving(config_path: Path, url: str) -> Path | None:
    """Written by `serve` once its port is bound, before it takes connections (a command started during
    its start-up waits for its answer); None (and nothing written) when the cache is not writable."""
    path = state_file(config_path)
    state = {"url": url, "pid": os.getpid(), "config": str(config_path.resolve())}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(state))
        temporary.replace(path)
    except OSError:
        return None
    return path


def forget_serving(path: Path | None) -> None:
    """Removed by `serve` on exit, unless another `serve` of the same config has replaced it since."""
    if path is None:
        return
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def find_gateway(config_path: Path | None, url: str | None, local: bool) -> Running | None:
    """The gateway to use: `--url`/`TOOLWEAVE_URL`, else the one `serve` recorded for this config (if its
    process is alive), else None (the command starts the backends itself)."""
    if local:
        return None
    if url:
        return Running(url.rstrip("/"), f"the gateway at {url.rstrip('/')}")
    if config_path is None:
        from toolweave.config.loader import default_config_path

        config_path = default_config_path()
    path = state_file(config_path)
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not isinstance(state.get("url"), str) or not _alive(state.get("pid")):
        with contextlib.suppress(OSError):
            path.unlink()  # a gateway that died without cleaning up
        return None
    return Running(state["url"], f"the running gateway at {state['url']} (pid {state['pid']})")


# -- saying which was used -----------------------------------------------------------------------

BACKENDS_HERE = "starting its backends in this process"
DATABASE_HERE = "using its database directly"


def said_which(running: Running | None, local: bool = False, here: str = BACKENDS_HERE) -> None:
    """One line on stderr: which gateway answered, or what this process does instead (`here`); stdout
    stays the same either way."""
    from rich.markup import escape

    from toolweave.cli.common import err

    if running is not None:
        message = f"via {escape(running.how)}"
    elif local:
        message = f"--local: {here.replace('its ', 'the ')}"
    else:
        message = (
            f"no gateway running for this config: {here} "
            "(`toolweave serve` keeps them running and this command then uses it)"
            if here == BACKENDS_HERE
            else f"no gateway running for this config: {here}"
        )
    err.print(f"[dim]{message}[/]", highlight=False, soft_wrap=True)


def fail(error: GatewayError | LookupError) -> NoReturn:
    from rich.markup import escape

    from toolweave.cli.common import err

    err.print(f"[red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
    raise typer.Exit(1)


def through_gateway(
    running: Running, request: Callable[[Running], T], not_found: T | None = None
) -> T | None:
    """`request(running)` for `keys` and `runs`, saying which gateway; `not_found` when it answers 404
    (if given); None when that gateway requires an API key and none is set, so the command uses the
    config's database instead (its user can read that database anyway, and bootstrapping the first admin
    key must not need a key). Other errors exit 1."""
    from toolweave.cli.common import err

    said_which(running)
    try:
        return request(running)
    except GatewayError as error:
        if error.status == 404 and not_found is not None:
            return not_found
        if error.status != 401 or os.environ.get(KEY_ENV):
            fail(error)
    err.print(
        f"[dim]it requires an API key and {KEY_ENV} is not set: {DATABASE_HERE}[/]",
        highlight=False,
        soft_wrap=True,
    )
    return None


def gateway_for(
    config_path: Path | None, database: str | None, url: str | None, local: bool
) -> Running | None:
    """`--database` names a database to use directly; otherwise the running gateway, if any."""
    return None if database else find_gateway(config_path, url, local)


def gateway_or_here(
    running: Running | None,
    local: bool,
    request: Callable[[Running], T],
    here: Callable[[], T],
    not_found: T | None = None,
) -> T:
    """What the running gateway answers to `request` (`not_found` for a 404, if given); else (no
    gateway, or one that needs a key this process lacks) `here()` on the database, saying so.
    The one way `keys` and `runs` choose between a served gateway and the database."""
    answer = through_gateway(running, request, not_found) if running is not None else None
    if answer is None:
        if running is None:
            said_which(None, local, DATABASE_HERE)
        answer = here()
    return answer
