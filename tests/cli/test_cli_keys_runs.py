"""`toolweave keys`, `runs` and `export`: on the config's database (or `--database`), in-process."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from support.configs import python_backend
from support.fixtures import WriteConfig
from toolweave.cli import app
from toolweave.runs import RunRecord, StepRecord
from toolweave.store import CompositeRepository, Database, KeyRepository, SqlRunStore

runner = CliRunner()


def cli(*args: str) -> object:
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return f"sqlite:///{tmp_path / 'cli.db'}"


def test_keys_create_list_revoke(database: str) -> None:
    created = cli(
        "keys",
        "create",
        "--tenant",
        "acme",
        "--scopes",
        "tools:read,tools:call",
        "--name",
        "ci",
        "--database",
        database,
    )
    assert created.exit_code == 0, created.output
    key = created.stdout.strip().splitlines()[-1]
    assert key.startswith("tw_") and len(key) == 46

    async def verify() -> object:
        async with Database.from_url(database) as db:
            return await KeyRepository(db).verify(key)

    info = asyncio.run(verify())
    assert info is not None and info.tenant == "acme" and set(info.scopes) == {"tools:read", "tools:call"}
    listed = json.loads(cli("keys", "list", "--json", "--database", database).stdout)
    assert [(k["tenant"], k["name"], k["revokedAt"]) for k in listed] == [("acme", "ci", None)]
    assert key not in cli("keys", "list", "--database", database).stdout  # never shown again
    assert cli("keys", "revoke", listed[0]["id"], "--database", database).exit_code == 0
    assert asyncio.run(verify()) is None
    assert cli("keys", "revoke", "nope", "--database", database).exit_code == 1
    bad = cli("keys", "create", "--tenant", "acme", "--scopes", "tools:everything", "--database", database)
    assert bad.exit_code == 1 and "invalid scope" in bad.output


def test_runs_list_and_show(database: str) -> None:
    async def seed() -> None:
        async with Database.from_url(database) as db:
            store = SqlRunStore(db)
            for index, status in enumerate(["completed", "failed"]):
                record = RunRecord(
                    id=f"run{index}",
                    tool="smart_scraper",
                    kind="router",
                    status=status,  # type: ignore[arg-type]
                    arguments={"url": "u", "api_key": "[redacted]"},
                    operation="generic",
                    reason="default operation",
                    steps=[StepRecord("s", "completed")],
                    started_at=1000.0 + index,
                )
                await store.start_run(record)
                await store.finish_run(record)

    asyncio.run(seed())
    listed = json.loads(cli("runs", "--json", "--database", database).stdout)
    assert [r["id"] for r in listed] == ["run1", "run0"]
    failed = json.loads(cli("runs", "--status", "failed", "--json", "--database", database).stdout)
    assert [r["id"] for r in failed] == ["run1"]
    assert len(json.loads(cli("runs", "--limit", "1", "--json", "--database", database).stdout)) == 1
    table = cli("runs", "--tool", "smart_scraper", "--database", database)
    assert table.exit_code == 0 and "2 runs" in table.stdout
    shown = json.loads(cli("runs", "show", "run0", "--database", database).stdout)
    assert shown["operation"] == "generic" and shown["arguments"]["api_key"] == "[redacted]"
    assert shown["steps"][0]["id"] == "s"
    assert shown["startedAt"] == "1970-01-01T00:16:40Z"  # ISO 8601 in UTC, as every other time
    assert cli("runs", "show", "nope", "--database", database).exit_code == 1


def test_export_one_or_all_and_unknown_formats(write_config: WriteConfig, database: str) -> None:
    path = write_config(
        {
            "gateway": {"database": database},
            "backends": [python_backend()],
            "composite_tools": [
                {"name": "hello_all", "description": "Greet everyone", "tools": ["py/greet"]}
            ],
        }
    )
    one = cli("export", "hello_all", "--format", "openai", "-c", str(path))
    assert one.exit_code == 0, one.output
    [tool] = json.loads(one.stdout)  # always a list, one tool or all
    assert tool["function"]["name"] == "hello_all" and "# Required inputs" in tool["function"]["description"]

    async def store_one() -> None:  # as if created through the API, by a tenant and shared
        async with Database.from_url(database) as db:
            await CompositeRepository(db).create(None, {"name": "api_made", "tools": ["py/multiply"]})
            await CompositeRepository(db).create("acme", {"name": "acme_made", "tools": ["py/greet"]})

    asyncio.run(store_one())
    every = json.loads(cli("export", "--all", "--format", "anthropic", "-c", str(path)).stdout)
    assert {"hello_all", "py__greet", "api_made"} <= {t["name"] for t in every}
    assert "acme_made" not in {t["name"] for t in every}
    acme = json.loads(cli("export", "--all", "--tenant", "acme", "-c", str(path)).stdout)
    assert {"api_made", "acme_made"} <= {t["name"] for t in acme}
    unknown = cli("export", "hello_all", "--format", "yaml", "-c", str(path))
    assert unknown.exit_code == 2 and "openai-responses" in unknown.output
    missing = cli("export", "nope", "-c", str(path))
    assert missing.exit_code == 1 and "no tool 'nope'" in missing.output
    assert cli("export", "-c", str(path)).exit_code == 2
