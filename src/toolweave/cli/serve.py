"""`toolweave serve`: MCP over streamable HTTP (with the REST API) or stdio."""

from __future__ import annotations

import errno
import gc
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from toolweave.cli.common import ConfigOption, err, load_config_or_exit, print_backends
from toolweave.cli.running import forget_serving, record_serving

if TYPE_CHECKING:
    from toolweave.config.models import Config


def serve(
    config: ConfigOption = None,
    host: Annotated[str | None, typer.Option(help="Address to bind (default: gateway.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: gateway.port).")] = None,
    stdio: Annotated[
        bool, typer.Option("--stdio", help="Serve MCP over stdin/stdout instead of HTTP.")
    ] = False,
    auth: Annotated[
        bool,
        typer.Option(
            "--auth",
            help="Require a credential (Authorization: Bearer): an API key, or an [[auth.issuers]] token.",
        ),
    ] = False,
    log_json: Annotated[
        bool, typer.Option("--log-json", help='Log JSON lines (same as gateway.log_format = "json").')
    ] = False,
    server: Annotated[
        str | None,
        typer.Option("--server", help="With --stdio: serve this virtual server ([[servers]]) only."),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            max=64,
            help="Serve with N processes on one port (needs gateway.redis_url: they share sessions over it).",
        ),
    ] = 1,
) -> None:
    """Run the gateway: MCP at /mcp (or stdio), the REST API at /api/v1, the web UI at /."""
    # Start-up only allocates (imports, the app, the catalog): collections during it are wasted work,
    # 15-20% of the time to listen. The collector is re-enabled once the gateway is up (HTTP: by the
    # app, `server/app.py`; stdio: below).
    gc.disable()
    try:
        _serve(config, host, port, stdio, auth, log_json, server, workers)
    finally:
        gc.enable()  # a start-up that failed, or a test's process running this command in-process


def _serve(
    config: Path | None,
    host: str | None,
    port: int | None,
    stdio: bool,
    auth: bool,
    log_json: bool,
    server: str | None = None,
    workers: int = 1,
) -> None:
    cfg = load_config_or_exit(config)
    if workers > 1:
        _check_workers(cfg, stdio)
    if server is not None:
        _check_server(cfg, server, stdio)
    if stdio:
        _serve_logging(cfg, log_json)
        import asyncio

        asyncio.run(_serve_stdio(cfg, server))
        return
    from toolweave.server.hosts import is_loopback_bind

    bind = host or cfg.gateway.host
    require_auth = auth or cfg.auth.required
    if not require_auth and not is_loopback_bind(bind):
        err.print(
            f"[red]refusing to serve {bind} without authentication.[/] Anyone who can reach it could call "
            "every tool. Enable API keys with [bold]--auth[/] (or auth.required = true) and create one with "
            "[bold]toolweave keys create[/], or bind 127.0.0.1."
        )
        raise typer.Exit(2)
    recorded: list[Path | None] = []

    def record(sock: socket.socket) -> None:
        """Before the port takes connections: a `tools` or `call` started from now on goes through
        this gateway (waiting for its first answer) instead of starting every backend itself."""
        from toolweave.config.loader import default_config_path

        recorded.append(record_serving(Path(cfg.source or default_config_path()), local_url(sock)))

    listener = listen_or_exit(
        bind, port if port is not None else cfg.gateway.port, port is not None, record, shared=workers > 1
    )
    state = recorded[0] if recorded else None
    _serve_logging(cfg, log_json)
    from toolweave.store import StoreError

    if workers > 1:
        _supervise(cfg, listener, require_auth, state, workers, log_json)
        return
    try:
        import asyncio

        stopped_by = asyncio.run(_serve_http(cfg, listener, require_auth, state, _teller(cfg, log_json)))
    except (StoreError, ValueError, OSError) as error:  # an unreachable database: say so, no traceback
        err.print(f"[red]cannot start:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    finally:
        forget_serving(state)
    if stopped_by is not None:
        # uvicorn re-raises the signal once it has stopped, so the process ends as that signal ends it
        # (130 for SIGINT, 143 for SIGTERM, by the shell's count); where it was inherited ignored (a job
        # a shell without job control put in the background, `nohup`) the re-raise did nothing, and the
        # gateway, stopped by a signal, would say it ended by itself: the same status, said here
        raise typer.Exit(128 + stopped_by)


def _supervise(
    cfg: Config, listener: socket.socket, require_auth: bool, state: Path | None, workers: int, log_json: bool
) -> None:
    """`--workers N`: this process forks N workers and re-forks any that dies (cli/workers.py); the
    first worker's first start tells the operator what happens, as one `serve` would."""
    import asyncio

    from toolweave.cli.workers import supervise

    teller = _teller(cfg, log_json)

    def serve(sock: socket.socket, index: int, first: bool) -> None:
        say = teller if index == 0 and first else lambda _line: None
        asyncio.run(_serve_http(cfg, sock, require_auth, state if index == 0 else None, say))

    try:
        status = supervise(workers, listener, serve, lambda line: teller(escape(line)))
    finally:
        forget_serving(state)
    if status:
        raise typer.Exit(status)


def _check_workers(cfg: Config, stdio: bool) -> None:
    """`--workers N` (N > 1) shares everything a client may meet on any worker (MCP sessions, UI
    logins, events, definitions) through Redis and the database: without `gateway.redis_url` a
    client's second request on another worker would meet a stranger, so it is refused."""
    if stdio:
        err.print("[red]--workers needs HTTP[/] (stdio has one client: serve it with one process)")
        raise typer.Exit(2)
    if not cfg.gateway.redis_url:
        err.print(
            "[red]--workers needs gateway.redis_url[/]: the workers share MCP sessions, events and "
            "definition changes over Redis (docs/deployment.md). Set it, or serve with one worker.",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(2)


def local_url(sock: socket.socket) -> str:
    """The URL a command on this machine reaches the gateway at (`0.0.0.0` is not an address to call)."""
    host, port = sock.getsockname()[:2]
    local_host = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
    return f"http://{local_host if ':' not in local_host else f'[{local_host}]'}:{port}"


def _serve_logging(cfg: Config, log_json: bool) -> None:
    """Text or JSON lines on stderr; connection secrets are scrubbed from both."""
    from toolweave.services.logs import configure_logging

    configure_logging(cfg.gateway.log_level, json_lines=log_json or cfg.gateway.log_format == "json")


def listen_or_exit(
    host: str,
    port: int,
    from_option: bool,
    on_bound: Callable[[socket.socket], None] | None = None,
    *,
    shared: bool = False,
) -> socket.socket:
    """The listening socket, opened before anything else: a busy port is reported at once, naming
    `--port`, instead of after every backend has connected. Made with `IPPROTO_TCP` named: asyncio
    sets TCP_NODELAY only on connections whose socket says TCP, and without it Nagle held the last
    part of every response until the client's delayed ACK (~40 ms a request on loopback).
    `shared`: other processes (`--workers`) listen on the same port (SO_REUSEPORT)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if shared:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
        if on_bound is not None:
            on_bound(sock)
        sock.listen(2048)
    except OSError as error:
        sock.close()
        where = "--port" if from_option else "gateway.port in the config"
        if error.errno == errno.EADDRINUSE:
            reason = f"port {port} on {host} is already in use (another toolweave serve?)"
        else:
            reason = f"cannot listen on {host}:{port}: {error.strerror or error}"
        err.print(
            f"[red]{escape(reason)}[/]. Choose another port with [bold]--port N[/] "
            f"(this one came from {where}; --port 0 picks a free one).",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1) from None
    return sock


def _teller(cfg: Config, log_json: bool) -> Callable[[str], None]:
    """How `serve` tells the operator what happens (listening, each backend, stopping): rich text on the
    terminal, or under `--log-json` (`log_format = "json"`) a JSON log line like every other line,
    so a log shipper parsing the stream never meets plain text."""
    if not (log_json or cfg.gateway.log_format == "json"):
        return lambda markup: err.print(markup, highlight=False, soft_wrap=True)
    import logging

    from rich.text import Text

    logger = logging.getLogger("toolweave.serve")
    return lambda markup: logger.info(Text.from_markup(markup).plain.strip())


async def _serve_http(
    cfg: Config, listener: socket.socket, require_auth: bool, state: Path | None, say: Callable[[str], None]
) -> int | None:
    """Serve until stopped; the signal that stopped it, if one did."""
    import uvicorn

    from toolweave.identity import public_url_for
    from toolweave.server.app import build_http_app

    host, port = listener.getsockname()[:2]
    public_url = public_url_for(cfg.gateway.public_url, host, port)
    app, gateway = await build_http_app(
        cfg, host=host, require_auth=require_auth, wait_for_backends=False, public_url=public_url
    )
    url = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
    if gateway.credentials is not None:  # where backends' authorization servers send people back
        gateway.credentials.callback_url = public_url + "/oauth/callback"
    say(
        f"toolweave listening · MCP at [bold]{url}/mcp[/] · REST at {url}/api/v1 · "
        f"{len(gateway.backends)} backend(s) connecting"
    )
    if cfg.ui.enabled:
        say(f"web UI at [bold]{url}/[/] · API docs at {url}/docs")
    announce_backends(gateway, say)

    from toolweave.cli.stopping import GatewayServer

    server = GatewayServer(
        uvicorn.Config(
            app,
            log_level="warning",
            # uvicorn's access lines are info: never shown at "warning"; off, each request skips building one
            access_log=False,
            lifespan="on",
            http="httptools",
            # the federation endpoint refuses a frame over the limit with its own reason; this bounds the rest
            ws_max_size=2 * cfg.federation.max_frame_bytes,
        ),
        gateway,
        say=lambda line: say(escape(line)),
        on_shutdown=lambda: _stopping(app, state),
    )
    await server.serve(sockets=[listener])
    return server.stopped_by


def _stopping(app: Any, state: Path | None) -> None:
    """At shutdown, not after serve() (uvicorn re-raises SIGTERM/SIGINT once serve() has returned): from
    now on `tools`, `call`, `export` start their own backends again, and MCP event streams end."""
    forget_serving(state)
    app.state.front.stop_listening()


def announce_backends(gateway: Any, say: Callable[[str], None] | None = None) -> None:
    """Print each backend when its first connection attempt ends (and whenever its status changes
    after), while the gateway already serves: its tools appear, with `list_changed`, as it connects."""
    shown: dict[str, str] = {}

    def show(backend: Any) -> None:
        before = shown.get(backend.name)
        if backend.status in ("starting", "stopped") or before == backend.status:
            return
        if backend.status == "reconnecting" and before == "failed":  # still failing: said already
            return
        shown[backend.name] = backend.status
        described = backend.describe()
        if backend.status == "connected":
            line = (
                f"  [green]✓[/] {escape(backend.name)} ({described['transport']}): {described['tools']} tools"
            )
        else:
            reason = escape(backend.last_error or backend.status)
            line = (
                f"  [red]✗[/] {escape(backend.name)} ({described['transport']}): {backend.status}: {reason}"
            )
        if say is None:
            err.print(line, highlight=False, soft_wrap=True)
        else:
            say(line)

    for backend in gateway.backends.values():
        show(backend)
        backend.on_change(show)


def _check_server(cfg: Config, server: str, stdio: bool) -> None:
    known = [s.name for s in cfg.servers]
    if not stdio:
        err.print("[red]--server needs --stdio[/] (over HTTP every virtual server is at /servers/NAME/mcp)")
        raise typer.Exit(2)
    if server not in known:
        err.print(
            f"[red]no virtual server {escape(server)!r}[/] in the config "
            f"(its [[servers]]: {escape(', '.join(known) or 'none')})",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)


async def _serve_stdio(cfg: Config, server: str | None = None) -> None:
    from mcp.server.stdio import stdio_server

    from toolweave.gateway import Gateway
    from toolweave.server.mcp.front import MCPFront
    from toolweave.server.mcp.virtual import identity_of
    from toolweave.telemetry import Tracing

    runs = await open_run_store_or_warn(cfg)
    tracing = Tracing.from_config(cfg)  # None unless [telemetry] / OTEL_* ask for traces
    gateway = Gateway(cfg, runs=runs, tracer=tracing)  # backends' stderr: log records (backends/stderr.py)
    try:
        await gateway.start()
        print_backends(gateway.describe_backends(), err)
        if server is not None:
            chosen = gateway.servers.by_name[server]
            front = MCPFront(chosen, identity=identity_of(chosen))
        else:
            front = MCPFront(gateway)
        gc.collect()
        gc.freeze()  # as the HTTP app does: the start-up heap is never walked again
        gc.enable()
        try:
            async with stdio_server() as (read, write):
                await front.server.run(read, write, front.server.create_initialization_options())
        finally:
            await front.close()
            await gateway.stop()
    finally:
        if runs is not None:
            await runs.close()
        if tracing is not None:
            tracing.close()  # exports what is queued (bounded by the exporter's timeout)


async def open_run_store_or_warn(cfg: Config) -> Any:
    """The database's run store; a one-shot command still works (runs kept in memory) when it cannot be opened."""
    try:
        from toolweave.services.runtime import open_run_store
        from toolweave.store import StoreError
    except ImportError:
        return None
    try:
        return await open_run_store(cfg)
    except (StoreError, ValueError, OSError) as error:
        err.print(
            f"[yellow]warning:[/] runs are not recorded: {escape(str(error))}",
            highlight=False,
            soft_wrap=True,
        )
        return None
