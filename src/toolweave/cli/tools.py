"""`toolweave tools` and `toolweave call`: through the gateway running for the config when there is one
(`cli/running.py`), else the gateway in this process, for one listing or one call. The output is the
same either way; a line on stderr says which was used."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from toolweave.cli.common import (
    ConfigOption,
    JsonOption,
    err,
    json_object_option,
    load_config_or_exit,
    out,
    print_call_result,
    quiet_logging,
)
from toolweave.cli.oauth import grants_of
from toolweave.cli.running import (
    GatewayError,
    LocalOption,
    Running,
    UrlOption,
    fail,
    find_gateway,
    said_which,
)
from toolweave.cli.serve import open_run_store_or_warn


def tools(
    config: ConfigOption = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    local: LocalOption = False,
) -> None:
    """List every tool the gateway serves."""
    running = find_gateway(config, url, local)
    listed = _listed_by(running) if running is not None else _listed_here(config, local)
    if as_json:
        print(json.dumps(listed, indent=2, ensure_ascii=False))
        return
    table = Table(title=f"{len(listed)} tools", title_justify="left")
    table.add_column("name", no_wrap=True, overflow="fold")
    table.add_column("description")
    for tool in listed:
        table.add_row(tool["name"], escape((tool.get("description") or "").split("\n")[0][:100]))
    out.print(table)


def _listed_by(running: Running) -> list[dict[str, Any]]:
    said_which(running)
    try:
        listed: list[dict[str, Any]] = running.get("/api/v1/tools")["tools"]
        warn_missing(running.get("/api/v1/backends")["backends"])
    except GatewayError as error:
        fail(error)
    return listed


def _listed_here(config: Any, local: bool) -> list[dict[str, Any]]:
    cfg = load_config_or_exit(config)
    quiet_logging("error")
    said_which(None, local)

    async def run() -> list[dict[str, Any]]:
        from toolweave.gateway import Gateway

        async with grants_of(cfg, interactive=True) as grants, Gateway(cfg, credentials=grants) as gateway:
            warn_missing(gateway.describe_backends())
            return [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in gateway.list_tools()]

    import asyncio

    return asyncio.run(run())


def warn_missing(backends: list[dict[str, Any]]) -> None:
    """The backends whose tools are missing from the list (not connected, or still connecting), and why."""
    for backend in backends:
        if backend["status"] != "connected":
            why = backend.get("last_error") or "its first connection attempt has not finished"
            problem = f"backend {backend['name']!r} is {backend['status']}: {why}"
            err.print(f"[yellow]warning:[/] {escape(problem)}", highlight=False, soft_wrap=True)


def call(
    name: Annotated[str, typer.Argument(help="Exposed tool name, e.g. github__search")],
    args_json: Annotated[str, typer.Argument(help="Arguments as a JSON object")] = "{}",
    config: ConfigOption = None,
    url: UrlOption = None,
    local: LocalOption = False,
) -> None:
    """Call a tool and print the CallToolResult as JSON; exit 1 when it is an error."""
    arguments = json_object_option(args_json, "ARGS_JSON")
    running = find_gateway(config, url, local)
    result = (
        _called_by(running, name, arguments)
        if running is not None
        else _called_here(config, name, arguments, local)
    )
    print_call_result(result)


def _called_by(running: Running, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    from urllib.parse import quote

    said_which(running)
    try:
        answer = running.post(f"/api/v1/tools/{quote(name, safe='')}/call", arguments)
    except GatewayError as error:
        if error.status != 404:
            fail(error)
        # an unknown tool: the same isError result a call in this process prints
        return {"content": [{"type": "text", "text": str(error)}], "isError": True, "resultType": "complete"}
    return {key: value for key, value in answer.items() if value is not None}


def needed_backends(cfg: Any, name: str) -> set[str] | None:
    """The backends a call of `name` needs, from the config alone (a composite's references, followed
    through composites); None when that cannot be told (an alias, a backend without namespace): all."""
    from toolweave.composite.kinds import tool_references
    from toolweave.fields import split_tool_ref

    composites = {getattr(d, "name", None): d for d in cfg.composite_tools}
    backends = {b.name: b for b in cfg.backends}
    if any(not b.namespace or b.tools for b in cfg.backends):
        return None  # names the config alone cannot map to a backend
    needed: set[str] = set()
    pending, seen = [name], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        if current in composites:
            pending.extend(reference.tool for reference in tool_references(composites[current]))
            continue
        parts = split_tool_ref(current)
        backend = parts[0] if parts else current.split(cfg.gateway.separator, 1)[0]
        if backend not in backends or (parts is None and cfg.gateway.separator not in current):
            return None
        needed.add(backend)
    return needed


def _only(cfg: Any, needed: set[str] | None) -> Any:
    """`cfg` with every backend a one-shot call does not need disabled (started: none of them)."""
    if needed is None:
        return cfg
    kept = [b if b.name in needed else b.model_copy(update={"enabled": False}) for b in cfg.backends]
    return cfg.model_copy(update={"backends": kept})


def _called_here(config: Any, name: str, arguments: dict[str, Any], local: bool) -> dict[str, Any]:
    cfg = load_config_or_exit(config)
    cfg = _only(cfg, needed_backends(cfg, name))
    quiet_logging("error")
    said_which(None, local)

    async def run() -> Any:
        from toolweave.gateway import Gateway

        runs = await open_run_store_or_warn(cfg)
        try:
            async with (
                grants_of(cfg, interactive=True) as grants,
                Gateway(cfg, runs=runs, credentials=grants) as gateway,
            ):
                return await gateway.call(name, arguments)
        finally:
            if runs is not None:
                await runs.close()

    import asyncio

    from toolweave.results import result_to_dict

    return result_to_dict(asyncio.run(run()))
