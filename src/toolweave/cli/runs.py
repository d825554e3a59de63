"""`toolweave runs`: list, show and resume run records: through the gateway running for the config when
there is one (`cli/running.py`; REST `/api/v1/runs`), else in the config's database (or `--database`)
directly. The output is the same either way; a line on stderr says which."""

from __future__ import annotations

import json
from typing import Annotated, Any, NoReturn

import typer
from rich.markup import escape
from rich.table import Table

from toolweave.cli.common import (
    ConfigOption,
    DatabaseOption,
    JsonOption,
    database_url,
    err,
    json_object_option,
    load_config_or_exit,
    out,
    print_call_result,
    quiet_logging,
    when,
    with_database,
)
from toolweave.cli.running import (
    GatewayError,
    LocalOption,
    Running,
    UrlOption,
    fail,
    find_gateway,
    gateway_for,
    gateway_or_here,
    said_which,
)
from toolweave.runs import MAX_LISTED

runs_app = typer.Typer(help="Run records of composite (and recorded direct) calls.")


def _run_dict(record: Any) -> dict[str, Any]:
    """The same body `GET /api/v1/runs/{id}` answers."""
    from toolweave.server.api.records import run_out

    return run_out(record).model_dump(mode="json")


@runs_app.callback(invoke_without_command=True)
def runs_list(
    ctx: typer.Context,
    tool: Annotated[str | None, typer.Option("--tool", help="Only runs of this tool.")] = None,
    status: Annotated[
        str | None, typer.Option("--status", help="completed, failed, running, interrupted, ...")
    ] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's runs.")] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=MAX_LISTED, help="At most this many, newest first.")
    ] = 20,
    config: ConfigOption = None,
    database: DatabaseOption = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    local: LocalOption = False,
) -> None:
    """List recent runs, newest first. `toolweave runs show ID` for one run with its steps."""
    if ctx.invoked_subcommand is not None:
        return
    query = {k: v for k, v in {"tool": tool, "status": status, "tenant": tenant, "limit": limit}.items() if v}
    records: list[dict[str, Any]] = gateway_or_here(
        gateway_for(config, database, url, local),
        local,
        lambda r: r.get("/api/v1/runs", query)["runs"],
        lambda: _listed_here(database_url(config, database), tenant, tool, status, limit),
    )
    if as_json:
        print(json.dumps(records, indent=2))
        return
    table = Table(title=f"{len(records)} runs", title_justify="left")
    for column in ("id", "started", "tool", "kind", "tenant", "status", "operation", "ms", "error"):
        table.add_column(column)
    for r in records:
        table.add_row(
            r["id"],
            when(r["startedAt"]),
            escape(r["tool"]),
            r["kind"],
            escape(r["tenant"] or ""),
            r["status"],
            escape(r["operation"] or ""),
            f"{r['latencyMs']:.0f}",
            escape((r["error"] or "").split("\n")[0][:60]),
        )
    out.print(table)


def _listed_here(
    url: str, tenant: str | None, tool: str | None, status: str | None, limit: int
) -> list[dict[str, Any]]:
    from toolweave.store import SqlRunStore

    records = with_database(
        url, lambda db: SqlRunStore(db).list_runs(tenant=tenant, tool=tool, status=status, limit=limit)
    )
    return [_run_dict(record) for record in records]


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    config: ConfigOption = None,
    database: DatabaseOption = None,
    url: UrlOption = None,
    local: LocalOption = False,
) -> None:
    """One run as JSON: arguments (secrets redacted), operation and reason, steps, error."""
    from urllib.parse import quote

    path = f"/api/v1/runs/{quote(run_id, safe='')}"
    shown: dict[str, Any] = gateway_or_here(
        gateway_for(config, database, url, local),
        local,
        lambda r: r.get(path),
        lambda: _shown_here(database_url(config, database), run_id),
        not_found={},
    )
    if not shown:
        err.print(f"[red]no run {escape(run_id)!r}[/]")
        raise typer.Exit(1)
    print(json.dumps(shown, indent=2, ensure_ascii=False))


def _shown_here(url: str, run_id: str) -> dict[str, Any]:
    from toolweave.store import SqlRunStore

    record = with_database(url, lambda db: SqlRunStore(db).get_run(run_id))
    return {} if record is None else _run_dict(record)


@runs_app.command("resume")
def runs_resume(
    run_id: Annotated[
        str, typer.Argument(help="The interrupted run's id (`toolweave runs --status interrupted`).")
    ],
    args: Annotated[
        str | None,
        typer.Option(
            "--args",
            help="Secret arguments the run record does not keep, as a JSON object (the rest come from the record).",
        ),
    ] = None,
    config: ConfigOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON (as `call` does).")
    ] = True,
    url: UrlOption = None,
    local: LocalOption = False,
) -> None:
    """Continue an interrupted run as the same run: completed workflow steps are not run again, and the step
    that was in flight only when its tool is idempotent or the step retries. Prints the result as `call`
    does; exits 1 when it is an error or the run cannot be resumed, 2 on malformed --args."""
    arguments = json_object_option(args, "--args") if args is not None else {}
    running = find_gateway(config, url, local)
    result = (
        _resumed_by(running, run_id, arguments)
        if running is not None
        else _resumed_here(config, run_id, arguments, local)
    )
    print_call_result(result)


def _cannot_resume(message: str, problems: list[tuple[str, str]]) -> NoReturn:
    err.print(f"[red]cannot resume:[/] {escape(message)}", highlight=False, soft_wrap=True)
    for path, problem in problems:
        err.print(f"  [red]•[/] {escape(path)}: {escape(problem)}", highlight=False, soft_wrap=True)
    raise typer.Exit(1)


def _resumed_by(running: Running, run_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Through the running gateway: its backends, and no second process racing it for the run."""
    from urllib.parse import quote

    said_which(running)
    try:
        answer = running.post(f"/api/v1/runs/{quote(run_id, safe='')}/resume", {"arguments": arguments})
    except GatewayError as error:
        if error.status in (404, 409, 422):
            _cannot_resume(str(error), error.problems)
        fail(error)
    return {key: value for key, value in answer.items() if value is not None}


def _resumed_here(config: Any, run_id: str, arguments: dict[str, Any], local: bool) -> dict[str, Any]:
    from toolweave.executor.errors import ResumeError
    from toolweave.results import result_to_dict
    from toolweave.services.offline import resume_offline
    from toolweave.store import StoreError

    cfg = load_config_or_exit(config)
    quiet_logging("error")
    said_which(None, local)
    try:
        import asyncio

        result = asyncio.run(resume_offline(cfg, run_id, arguments))
    except ResumeError as error:
        _cannot_resume(error.message, list(error.problems))
    except (StoreError, ValueError) as error:
        err.print(f"[red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    return result_to_dict(result)
