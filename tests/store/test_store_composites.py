from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolweave.store import CompositeRepository, Conflict, Database, Forbidden, NotFound, StoredComposite


def fanout(name: str = "search_all", **extra: Any) -> dict[str, Any]:
    return {"name": name, "tools": ["github/search", "docs/search"], **extra}


def router(name: str = "smart_scraper") -> dict[str, Any]:
    return {
        "name": name,
        "routing": "rule_based",
        "operations": [{"slug": "generic", "tool": "firecrawl/scrape"}],
        "default_operation": "generic",
    }


@pytest.fixture
def tools(db: Database) -> CompositeRepository:
    return CompositeRepository(db)


async def test_create_and_get_by_id_or_name(tools: CompositeRepository) -> None:
    created = await tools.create("acme", fanout(description="Search"))
    assert isinstance(created, StoredComposite)
    assert (created.tenant, created.name, created.kind, created.status, created.version) == (
        "acme",
        "search_all",
        "fanout",
        "active",
        1,
    )
    assert created.definition == fanout(description="Search")
    assert created.validation_errors is None
    assert created.created_at == created.updated_at
    assert await tools.get(created.id, "acme") == created
    assert await tools.get("search_all", "acme") == created


async def test_kinds_are_inferred_or_taken_from_the_definition(tools: CompositeRepository) -> None:
    assert (await tools.create(None, router())).kind == "router"
    workflow = {"name": "deploy", "steps": [{"id": "a", "tool": "k8s/apply"}]}
    assert (await tools.create(None, workflow)).kind == "workflow"
    toolhive = {
        "apiVersion": "toolhive.stacklok.dev/v1alpha1",
        "kind": "VirtualMCPCompositeToolDefinition",
        "metadata": {"name": "deploy-app"},
        "spec": {"name": "deploy_app", "steps": []},
    }
    stored = await tools.create(None, toolhive)
    assert (stored.name, stored.kind) == ("deploy_app", "workflow")


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        ([1, 2], "must be a mapping"),
        ({"tools": ["a/b"]}, "name None"),
        ({"name": "bad name!", "tools": ["a/b"]}, "must match"),
        ({"name": "x" * 65, "tools": ["a/b"]}, "must match"),
        ({"name": "thing"}, "unknown composite kind None"),
        ({"name": "thing", "kind": "agentic"}, "unknown composite kind 'agentic'"),
        ({"name": "thing", "tools": ["a/b"], "meta": {"when": object()}}, "not JSON-serializable"),
    ],
)
async def test_invalid_definitions_change_nothing(
    tools: CompositeRepository, definition: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        await tools.create("acme", definition)
    assert await tools.list("acme") == []


async def test_invalid_status_is_rejected(tools: CompositeRepository) -> None:
    with pytest.raises(ValueError, match="invalid status 'live'"):
        await tools.create("acme", fanout(), status="live")
    created = await tools.create("acme", fanout(), status="draft")
    with pytest.raises(ValueError, match="invalid status"):
        await tools.set_status(created.id, "acme", "gone")
    assert (await tools.set_status(created.id, "acme", "disabled")).status == "disabled"


async def test_duplicate_names_conflict_per_tenant(tools: CompositeRepository) -> None:
    await tools.create("acme", fanout())
    with pytest.raises(Conflict, match="already exists"):
        await tools.create("acme", router("search_all"))
    other = await tools.create("globex", fanout())
    assert other.tenant == "globex"


async def test_shared_names_cannot_be_shadowed(tools: CompositeRepository) -> None:
    await tools.create(None, fanout("shared_one"))
    with pytest.raises(Conflict, match="shared composite tool"):
        await tools.create("acme", fanout("shared_one"))
    await tools.create("acme", fanout("mine"))
    with pytest.raises(Conflict, match="tenant 'acme'"):
        await tools.create(None, fanout("mine"))


async def test_concurrent_creates_of_one_name_leave_one(tools: CompositeRepository) -> None:
    results = await asyncio.gather(
        *(tools.create("acme", fanout("racy")) for _ in range(5)), return_exceptions=True
    )
    assert sum(isinstance(r, StoredComposite) for r in results) == 1
    assert all(isinstance(r, Conflict) for r in results if not isinstance(r, StoredComposite))


async def test_concurrent_shared_and_tenant_creates_of_one_name(tools: CompositeRepository) -> None:
    results = await asyncio.gather(
        tools.create(None, fanout("contested")),
        tools.create("acme", fanout("contested")),
        tools.create("acme", router("contested")),
        return_exceptions=True,
    )
    assert sum(isinstance(r, StoredComposite) for r in results) == 1
    assert all(isinstance(r, Conflict) for r in results if not isinstance(r, StoredComposite))


async def test_visibility_own_plus_shared(tools: CompositeRepository) -> None:
    shared = await tools.create(None, fanout("everyone"))
    mine = await tools.create("acme", router("acme_only"))
    await tools.create("globex", fanout("globex_only"))
    assert [t.name for t in await tools.list("acme")] == ["acme_only", "everyone"]
    assert [t.name for t in await tools.list(None)] == ["everyone"]
    assert [t.name for t in await tools.list("acme", kind="router")] == ["acme_only"]
    assert [t.name for t in await tools.list("acme", status="draft")] == []
    assert (await tools.get("everyone", "globex")).id == shared.id
    with pytest.raises(NotFound):
        await tools.get(mine.id, "globex")
    with pytest.raises(NotFound):
        await tools.get("acme_only", None)


async def test_update_writes_a_new_version(tools: CompositeRepository) -> None:
    created = await tools.create("acme", fanout(), note="first")
    changed = fanout(description="v2")
    updated = await tools.update("search_all", "acme", changed, note="describe it")
    assert (updated.version, updated.definition, updated.id) == (2, changed, created.id)
    assert updated.updated_at >= created.updated_at
    assert updated.created_at == created.created_at
    history = await tools.versions(created.id, "acme")
    assert [(v.version, v.note) for v in history] == [(1, "first"), (2, "describe it")]
    assert history[0].definition == fanout()


async def test_update_can_rename_and_change_kind(tools: CompositeRepository) -> None:
    created = await tools.create("acme", fanout())
    await tools.create("acme", fanout("taken"))
    with pytest.raises(Conflict, match="'taken'"):
        await tools.update(created.id, "acme", fanout("taken"))
    renamed = await tools.update(created.id, "acme", router("scraper"))
    assert (renamed.name, renamed.kind, renamed.version) == ("scraper", "router", 2)
    with pytest.raises(NotFound):
        await tools.get("search_all", "acme")


async def test_expected_version_guards_against_lost_updates(tools: CompositeRepository) -> None:
    created = await tools.create("acme", fanout())
    await tools.update(created.id, "acme", fanout(description="a"), expected_version=1)
    with pytest.raises(Conflict, match="at version 2, not 1"):
        await tools.update(created.id, "acme", fanout(description="b"), expected_version=1)
    current = await tools.get(created.id, "acme")
    assert (current.version, current.definition["description"]) == (2, "a")
    for bad in (0, -1, True, "2"):
        with pytest.raises(ValueError, match="expected_version"):
            await tools.update(created.id, "acme", fanout(), expected_version=bad)  # type: ignore[arg-type]


async def test_concurrent_updates_with_the_same_expected_version(tools: CompositeRepository) -> None:
    created = await tools.create("acme", fanout())
    results = await asyncio.gather(
        *(tools.update(created.id, "acme", fanout(description=str(n)), expected_version=1) for n in range(4)),
        return_exceptions=True,
    )
    assert sum(isinstance(r, StoredComposite) for r in results) == 1
    assert sum(isinstance(r, Conflict) for r in results) == 3
    assert len(await tools.versions(created.id, "acme")) == 2


async def test_unknown_ids_are_not_found(tools: CompositeRepository) -> None:
    for call in (
        tools.get("missing", "acme"),
        tools.update("missing", "acme", fanout()),
        tools.set_status("missing", "acme", "active"),
        tools.set_validation("missing", ["x"]),
        tools.delete("missing", "acme"),
        tools.versions("missing", "acme"),
    ):
        with pytest.raises(NotFound, match="'missing'"):
            await call


async def test_tenants_cannot_change_shared_tools(tools: CompositeRepository) -> None:
    shared = await tools.create(None, fanout("everyone"))
    with pytest.raises(Forbidden, match="shared"):
        await tools.update("everyone", "acme", fanout("everyone", description="mine now"))
    with pytest.raises(Forbidden):
        await tools.delete(shared.id, "acme")
    with pytest.raises(Forbidden):
        await tools.set_status(shared.id, "acme", "disabled")
    assert (await tools.update(shared.id, None, fanout("everyone", description="ok"))).version == 2


async def test_validation_errors_degrade_and_recover(tools: CompositeRepository) -> None:
    created = await tools.create("acme", fanout())
    degraded = await tools.set_validation(created.id, ["docs/search: unknown tool"])
    assert (degraded.status, degraded.validation_errors) == ("degraded", ("docs/search: unknown tool",))
    recovered = await tools.set_validation(created.id, None)
    assert (recovered.status, recovered.validation_errors) == ("active", None)
    await tools.set_status(created.id, "acme", "disabled")
    still_disabled = await tools.set_validation(created.id, ["broken"])
    assert still_disabled.status == "disabled"
    assert (await tools.set_validation(created.id, [])).validation_errors is None
    assert (await tools.set_validation(created.id, "one message")).validation_errors == ("one message",)


async def test_delete_is_soft_and_frees_the_name(tools: CompositeRepository) -> None:
    created = await tools.create("acme", fanout())
    await tools.delete("search_all", "acme")
    with pytest.raises(NotFound):
        await tools.get(created.id, "acme")
    with pytest.raises(NotFound):
        await tools.delete(created.id, "acme")
    assert await tools.list("acme") == []
    again = await tools.create("acme", fanout())
    assert again.id != created.id and again.version == 1


async def test_own_tool_wins_over_an_id_lookalike_name(tools: CompositeRepository) -> None:
    first = await tools.create("acme", fanout())
    lookalike = await tools.create("acme", fanout(first.id[:36].replace("-", "_")))
    assert (await tools.get(first.id, "acme")).id == first.id
    assert (await tools.get(lookalike.name, "acme")).id == lookalike.id
