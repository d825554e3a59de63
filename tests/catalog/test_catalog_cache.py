"""Incremental catalog builds (hardening II, findings 2 and 3): a change costs what changed.

As found: every registration, disconnect or stored definition rebuilt the whole catalog — every
backend's entries (copies under exposed names, secret fields) and every composite (its plan and
schemas) — on the event loop, at a cost growing with every tenant's tools: a tenant churning
namespaces, or storing huge schemas, made everyone's rebuilds pay. Now the gateway's
`CatalogCache` hands each build what the last one derived: unchanged backends' entries and
unchanged composites are reused (the same objects, compiled validators included), and only what
changed is derived again. A snapshot is the same with or without the cache: checked here after
every step of a sequence of registrations, disconnects and definitions, against a fresh build.
"""

from __future__ import annotations

from typing import Any

import pytest

from toolweave import Gateway
from toolweave.backends.federated.manifest import read_manifest
from toolweave.catalog import catalog as catalog_module
from toolweave.catalog.catalog import Catalog
from toolweave.catalog.servers import listing_key
from toolweave.config import parse_config
from toolweave.services.definitions import parse_definition


class _Server:
    relayed = False
    in_flight = 0

    def __init__(self, label: str) -> None:
        self.label = label


def workflow(name: str, tool: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"Calls {tool}.",
        "parameters": {"type": "object", "properties": {"pw": {"type": "string", "format": "password"}}},
        "steps": [{"id": "a", "tool": tool, "arguments": {}}],
        **extra,
    }


def register(
    gateway: Gateway, namespace: str, tenant: str | None, schema: dict[str, Any] | None = None
) -> Any:
    raw = [
        {
            "name": f"t{i}",
            "description": f"Look up {namespace} record {i}",
            "inputSchema": schema or {"type": "object"},
        }
        for i in range(3)
    ]
    found, problems = read_manifest(namespace, raw, 256)
    assert found is not None, problems
    assert gateway.federation.check(found, tenant) == []
    server = _Server(namespace)
    gateway.federation.attach(server, found, tenant)
    gateway.rebuild()
    return server


def fresh(gateway: Gateway) -> Catalog:
    """The snapshot as a build without the cache makes it (what `Gateway._rebuild` builds)."""
    definitions = [*gateway.config.composite_tools, *(d for _, d in gateway._definitions.values())]
    owners = {name: owner for name, (owner, _d) in gateway._definitions.items()}
    backends = [*gateway.backends.values(), *gateway.federation.backends()]
    return Catalog.build(gateway.config, backends, definitions, owners=owners)


def seen(catalog: Catalog) -> dict[str, Any]:
    """Everything a client, a composite or an operator can observe of a snapshot."""
    return {
        "listed": listing_key(catalog.listed),
        "listings": {tenant: listing_key(catalog.listing(tenant)) for tenant in (None, "a", "b")},
        "entries": [
            (name, e.owner, e.hidden, e.filtered, e.backend_tool, e.kind, sorted(e.secrets), e.tool_class)
            for name, e in catalog.entries.items()
        ],
        "references": {reference: entry.name for reference, entry in catalog.by_reference.items()},
        "issues": [str(issue) for issue in catalog.issues],
        "warnings": [str(issue) for issue in catalog.warnings],
        "degraded": {name: [str(p) for p in problems] for name, problems in catalog.degraded.items()},
        "used_in": catalog.used_in,
    }


def same_as_fresh(gateway: Gateway) -> None:
    assert seen(gateway.catalog) == seen(fresh(gateway))


async def test_a_sequence_of_changes_builds_what_a_fresh_build_makes() -> None:
    config = parse_config(
        {
            "gateway": {"max_name_length": 24},
            "federation": {"namespaces": [{"name": "fed1"}]},
            "composite_tools": [workflow("wf1", "fed1/t0"), workflow("wf2", "wf1")],
        }
    )
    async with Gateway(config) as gateway:
        same_as_fresh(gateway)  # wf1 and wf2 degraded: fed1 has no client
        fed1 = register(gateway, "fed1", "a")
        same_as_fresh(gateway)
        mine, _ = parse_definition(workflow("mine", "fed1/t1"))  # another tenant's tool: unknown to b
        ours, _ = parse_definition(workflow("ours", "fed1/t1"))
        gateway.set_definitions({"mine": ("b", mine), "ours": ("a", ours)})
        same_as_fresh(gateway)
        assert "mine" in gateway.catalog.degraded and gateway.catalog.get("ours") is not None
        register(gateway, "fed2-with-a-long-name", "b")  # exposed names shortened, warned about
        same_as_fresh(gateway)
        assert gateway.catalog.warnings
        gateway.federation.detach(fed1)
        gateway.rebuild()
        same_as_fresh(gateway)
        assert "wf1" in gateway.catalog.degraded and "ours" in gateway.catalog.degraded
        register(gateway, "fed1", "a", {"type": "object", "properties": {"x": {"type": "string"}}})
        same_as_fresh(gateway)
        assert gateway.catalog.get("wf2") is not None
        gateway.set_definitions({"ours": ("a", ours)})
        same_as_fresh(gateway)


async def test_a_registration_reuses_everything_it_did_not_change(monkeypatch: pytest.MonkeyPatch) -> None:
    config = parse_config(
        {
            "federation": {"namespaces": [{"name": "fed1"}]},
            "composite_tools": [workflow("wf1", "fed1/t0"), workflow("wf2", "wf1")],
        }
    )
    async with Gateway(config) as gateway:
        register(gateway, "fed1", "a")
        before = dict(gateway.catalog.entries)
        assert before["fed1__t0"].validator is not None  # compiled once
        builds = 0
        original = catalog_module.kinds.build_composite

        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal builds
            builds += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(catalog_module.kinds, "build_composite", counted)
        register(gateway, "fed2", "b")
        after = gateway.catalog.entries
        assert builds == 0, "an unchanged composite was built again"
        assert all(after[name] is entry for name, entry in before.items()), "unchanged entries were rebuilt"
        assert after["fed1__t0"]._validator is not None  # its compiled argument validator kept
        assert {"fed2__t0", "fed2__t1", "fed2__t2"} <= after.keys()


async def test_search_mode_splits_and_stems_only_new_tools() -> None:
    async with Gateway(parse_config({"gateway": {"tool_exposure": "search"}})) as gateway:
        register(gateway, "fed1", "a")
        assert gateway.catalog.index is not None
        before = {
            tool.name: gateway.catalog_cache.search_terms[id(tool)][1] for tool in gateway.catalog.index.tools
        }
        register(gateway, "fed2", "a")
        index, again = gateway.catalog.index, fresh(gateway).index
        assert index is not None and again is not None
        terms = {tool.name: gateway.catalog_cache.search_terms[id(tool)][1] for tool in index.tools}
        assert all(terms[name] is found for name, found in before.items()), "unchanged tools indexed again"
        assert [t.name for t in index.tools] == [t.name for t in again.tools] and "fed2__t0" in terms
        assert index.postings == again.postings
        for query in ("look up fed2 record", "record 1", "fed1"):
            assert gateway.catalog.search(query, 5, "a") == fresh(gateway).search(query, 5, "a")
