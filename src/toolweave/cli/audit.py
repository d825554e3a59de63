"""`toolweave audit`: the audit log, newest first (a table, `--json`, or every matching record as JSON
lines with `--jsonl`): through the gateway running for the config when there is one (REST
`/api/v1/audit`, scope tools:admin), else in the config's database (or `--database`) directly."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
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
    out,
    when,
    with_database,
)
from toolweave.cli.running import (
    DATABASE_HERE,
    LocalOption,
    Running,
    UrlOption,
    find_gateway,
    said_which,
    through_gateway,
)
from toolweave.fields import parse_duration

PAGE = 500
"""Records per request when `--jsonl` pages through a running gateway (the API's most)."""


def _since(value: str | None) -> str | None:
    """`--since 1h` (a duration back from now) or an ISO 8601 time; the API's `since` (UTC ISO)."""
    if value is None:
        return None
    try:
        return (datetime.now(UTC) - timedelta(seconds=parse_duration(value))).isoformat()
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        err.print(f"[red]--since {escape(value)!r}:[/] give a duration (1h, 7d) or an ISO 8601 time")
        raise typer.Exit(2) from None
    return (parsed if parsed.tzinfo else parsed.astimezone()).isoformat()


def audit(
    action: Annotated[
        str | None, typer.Option("--action", help="An action (key.revoked) or every one of a kind (key.*).")
    ] = None,
    object_id: Annotated[str | None, typer.Option("--object", help="Only this object's id.")] = None,
    actor: Annotated[str | None, typer.Option("--actor", help="Only changes by this caller.")] = None,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Only this tenant's records (- : gateway-wide).")
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Only newer records: a duration back (1h, 7d) or a time.")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=PAGE, help="At most this many (table, --json).")
    ] = 20,
    jsonl: Annotated[
        bool, typer.Option("--jsonl", help="Every matching record, one JSON object a line (an export).")
    ] = False,
    config: ConfigOption = None,
    database: DatabaseOption = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    local: LocalOption = False,
) -> None:
    """Who changed what, newest first: composites, keys, connections, runs resumed, backends, namespaces."""
    query = {
        "action": action,
        "objectId": object_id,
        "actor": actor,
        "tenant": tenant,
        "since": _since(since),
    }
    query = {name: value for name, value in query.items() if value}
    running = None if database else find_gateway(config, url, local)
    records: Iterator[dict[str, Any]] | None = None
    if running is not None:
        first = through_gateway(
            running, lambda r: r.get("/api/v1/audit", {**query, "limit": PAGE if jsonl else limit})
        )
        if first is not None:
            records = _pages(running, query, first) if jsonl else iter(first["records"])
    if records is None:
        if running is None:
            said_which(None, local, DATABASE_HERE)
        records = _read_here(database_url(config, database), query, None if jsonl else limit)
    if jsonl:
        for record in records:
            print(json.dumps(record, ensure_ascii=False), flush=False)
        return
    listed = list(records)
    if as_json:
        print(json.dumps(listed, indent=2))
        return
    _table(listed)


def _pages(running: Running, query: dict[str, Any], first: dict[str, Any]) -> Iterator[dict[str, Any]]:
    page = first
    while True:
        yield from page["records"]
        if page.get("next") is None:
            return
        page = running.get("/api/v1/audit", {**query, "limit": PAGE, "before": page["next"]})


def _read_here(url: str, query: dict[str, Any], limit: int | None) -> Iterator[dict[str, Any]]:
    from toolweave.store import ALL_TENANTS, AuditFilter, AuditRepository

    where = AuditFilter(
        action=query.get("action"),
        object_id=query.get("objectId"),
        actor=query.get("actor"),
        since=datetime.fromisoformat(query["since"]) if "since" in query else None,
    )
    wanted = query.get("tenant")
    tenant: Any = ALL_TENANTS if wanted is None else (None if wanted == "-" else wanted)

    async def read(db: Any) -> list[dict[str, Any]]:
        repo = AuditRepository(db)
        if limit is not None:
            return [r.to_dict() for r in await repo.list(tenant, where, limit=limit)]
        return [r.to_dict() async for r in repo.export(tenant, where)]

    return iter(with_database(url, read))


def _table(records: list[dict[str, Any]]) -> None:
    table = Table(title=f"{len(records)} changes", title_justify="left")
    for column in ("when", "who", "via", "action", "object", "version", "tenant"):
        table.add_column(column)
    for r in records:
        before, after = r["versionBefore"], r["versionAfter"]
        version = "" if before is None and after is None else f"{before or '–'} → {after or '–'}"
        table.add_row(
            when(r["at"]),
            escape(r["actor"]),
            r["via"],
            r["action"],
            escape(r["objectName"] or r["objectId"]),
            version,
            escape(r["tenant"] or ""),
        )
    out.print(table)
