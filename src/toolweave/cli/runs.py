"""`toolweave runs`: list, show and resume run records."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from toolweave.cli.common import (
    ConfigOption,
    DatabaseOption,
    JsonOption,
    database_url,
    err,
    load_config_or_exit,
    out,
    quiet_logging,
    when,
    with_database,
)

runs_app = typer.Typer(help="Run records of composite (and recorded direct) calls.")


def _run_dict(record: Any) -> dict[str, Any]:
    from toolweave.server.api.present import run_out

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
        int, typer.Option("--limit", min=1, max=10_000, help="At most this many, newest first.")
    ] = 20,
    config: ConfigOption = None,
    database: DatabaseOption = None,
    as_json: JsonOption = False,
) -> None:
    """List recent runs, newest first. `toolweave runs show ID` for one run with its steps."""
    if ctx.invoked_subcommand is not None:
        return
    from toolweave.store import SqlRunStore

    records = with_database(
        database_url(config, database),
        lambda db: SqlRunStore(db).list_runs(tenant=tenant, tool=tool, status=status, limit=limit),
    )
    if as_json:
        print(json.dumps([_run_dict(r) for r in records], indent=2))
        return
    table = Table(title=f"{len(records)} runs", title_justify="left")
    for column in ("id", "started", "tool", "kind", "tenant", "status", "operation", "ms", "error"):
        table.add_column(column)
    for r in records:
        table.add_row(
            r.id,
            when(r.started_at),
            escape(r.tool),
            r.kind,
            escape(r.tenant or ""),
            r.status,
            escape(r.operation or ""),
            f"{r.latency_ms:.0f}",
            escape((r.error or "").split("\n")[0][:60]),
        )
    out.print(table)


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    config: ConfigOption = None,
    database: DatabaseOption = None,
) -> None:
    """One run as JSON: arguments (secrets redacted), operation and reason, steps, error."""
    from toolweave.store import SqlRunStore

    record = with_database(database_url(config, database), lambda db: SqlRunStore(db).get_run(run_id))
    if record is None:
        err.print(f"[red]no run {escape(run_id)!r}[/]")
        raise typer.Exit(1)
    print(json.dumps(_run_dict(record), indent=2, ensure_ascii=False))


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
) -> None:
    """Continue an interrupted run as the same run: completed workflow steps are not run again, and the step
    that was in flight only when its tool is idempotent or the step retries. Prints the result as `call`
    does; exits 1 when it is an error or the run cannot be resumed, 2 on malformed --args."""
    arguments: dict[str, Any] = {}
    if args is not None:
        try:
            arguments = json.loads(args)
        except json.JSONDecodeError as error:
            err.print(f"[red]--args is not valid JSON:[/] {escape(str(error))}", soft_wrap=True)
            raise typer.Exit(2) from None
        if not isinstance(arguments, dict):
            err.print(f"[red]--args must be a JSON object[/], got {type(arguments).__name__}")
            raise typer.Exit(2)
    from toolweave.executor.resume import ResumeError
    from toolweave.results import result_to_dict
    from toolweave.services.offline import resume_offline
    from toolweave.store import StoreError

    cfg = load_config_or_exit(config)
    quiet_logging("error")
    try:
        result = asyncio.run(resume_offline(cfg, run_id, arguments))
    except ResumeError as error:
        err.print(f"[red]cannot resume:[/] {escape(error.message)}", highlight=False, soft_wrap=True)
        for path, message in error.problems:
            err.print(f"  [red]•[/] {escape(path)}: {escape(message)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    except (StoreError, ValueError) as error:
        err.print(f"[red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    print(json.dumps(result_to_dict(result), indent=2, ensure_ascii=False))
    raise typer.Exit(1 if result.is_error else 0)
