"""Virtual servers in process: what a selection serves, what its definition selects nothing by, who
it admits (tenants, scopes, IdP claims), and that a rebuild tells only the servers whose listing
changed. A real in-process Python backend; the HTTP side is in tests/server/mcp/test_virtual_servers.py."""

from __future__ import annotations

from typing import Any

import pytest

from support.configs import python_backend
from support.fixtures import OpenGateway
from toolweave import Gateway
from toolweave.config import ConfigError, parse_config
from toolweave.executor import Session
from toolweave.identity import Identity
from toolweave.server.auth import session_for_token
from toolweave.servers import VirtualServer


def config(*servers: dict[str, Any]) -> dict[str, Any]:
    return {
        "backends": [python_backend(tools={"nap": {"tags": ["ops"]}, "numbers": {"tags": ["ops", "data"]}})],
        "composite_tools": [
            {"name": "both", "description": "Greet twice", "tools": ["py/greet", "py/greet"]}
        ],
        "servers": list(servers),
    }


async def served(open_gateway: OpenGateway, server: dict[str, Any]) -> VirtualServer:
    gateway = await open_gateway(config(server))
    found = gateway.servers.get(server["name"])
    assert found is not None
    return found


async def test_a_selection_by_names_backends_tags_and_hide(open_gateway: OpenGateway) -> None:
    by_tags = await served(open_gateway, {"name": "ops", "tags": ["ops"], "tools": ["py__greet"]})
    assert sorted(t.name for t in by_tags.list_tools()) == ["py__greet", "py__nap", "py__numbers"]
    whole = await served(open_gateway, {"name": "py", "backends": ["py"], "hide": ["re:py__(nap|explode)"]})
    listed = {t.name for t in whole.list_tools()}
    assert "py__greet" in listed and "py__nap" not in listed and "both" not in listed


async def test_overrides_rename_and_redescribe_on_that_server_only(open_gateway: OpenGateway) -> None:
    server = await served(
        open_gateway,
        {
            "name": "desk",
            "tools": ["py__greet", "both"],
            "overrides": {"py__greet": {"name": "hello", "description": "Hi."}},
        },
    )
    listed = {t.name: t.description for t in server.list_tools()}
    assert listed["hello"] == "Hi." and "py__greet" not in listed
    assert server.served["hello"] == "py__greet"
    assert server.gateway.catalog.get("py__greet").tool.description != "Hi."  # /mcp unchanged
    local = Session(tenant=None, scopes=frozenset(), label="local")
    assert server.gateway.servers.used_in("py__greet", local) == ["desk"]
    result = await server.gateway.executor().call("py__greet", {"name": "x"})  # /mcp still has it
    assert not result.is_error


async def test_problems_name_what_selects_nothing_and_composites_reaching_out(
    open_gateway: OpenGateway,
) -> None:
    server = await served(
        open_gateway,
        {
            "name": "odd",
            "tools": ["both", "no_such_*"],
            "tags": ["nope"],
            "pinned": ["py__nap"],
            "overrides": {"py__ghost": {"description": "x"}},
        },
    )
    assert [(p.path, p.message) for p in server.problems()] == [
        ("tools[1]", "'no_such_*' matches no listed tool"),
        ("tags[0]", "no listed tool has the tag 'nope'"),
        ("overrides.py__ghost", "'py__ghost' matches no listed tool; did you mean 'py__greet'?"),
        ("pinned[0]", "'py__nap' is not a tool this server lists"),
        (
            "tools",
            "composite 'both' calls py__greet, which this server does not serve "
            "(they run, but its clients reach them only through the composite)",
        ),
    ]


def test_the_config_names_every_problem_of_servers() -> None:
    raw = config(
        {"name": "Bad Name", "tools": ["re:("]},
        {"name": "a", "backends": ["nope"]},
        {"name": "a", "tools": ["x"]},
        {"name": "b"},
    )
    with pytest.raises(ConfigError) as error:
        parse_config(raw)
    shown = [str(problem) for problem in error.value.issues]
    assert any(s.startswith("servers[0].name: ") for s in shown), shown
    assert any(s.startswith("servers[0].tools[0]: ") and "invalid regular expression" in s for s in shown), (
        shown
    )
    assert any(s.startswith("servers[3]: ") and "selects nothing" in s for s in shown), shown


def test_the_config_names_unknown_backends_and_duplicates() -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(config({"name": "a", "backends": ["nope"]}, {"name": "a", "tools": ["x"]}))
    shown = [str(problem) for problem in error.value.issues]
    assert any(
        s.startswith("servers[0].backends[0]: unknown backend or federated namespace 'nope'") for s in shown
    )
    assert any(s.startswith("servers[1].name: duplicate server name 'a'") for s in shown)


@pytest.mark.parametrize(
    ("session", "admitted"),
    [
        (Session(tenant="acme", scopes=frozenset({"tools:read"}), label="key:a"), True),
        (Session(tenant="other", scopes=frozenset({"tools:read", "servers:gated"}), label="key:b"), True),
        (Session(tenant="other", scopes=frozenset({"tools:read"}), label="key:c"), False),
        (Session(tenant="other", label="oauth:x", extra={"claims": {"groups": ["eng", "support"]}}), True),
        (Session(tenant="other", label="oauth:y", extra={"claims": {"groups": "support"}}), True),
        (Session(tenant="other", label="oauth:z", extra={"claims": {"groups": ["eng"]}}), False),
        (Session(), True),  # the local operator (auth off)
    ],
)
async def test_access_admits_by_tenant_scope_or_claim(
    open_gateway: OpenGateway, session: Session, admitted: bool
) -> None:
    access = {"tenants": ["acme"], "scopes": ["servers:gated"], "claims": {"groups": ["support"]}}
    server = await served(open_gateway, {"name": "gated", "tools": ["py__greet"], "access": access})
    assert server.allows(session) is admitted


def test_a_tokens_claims_reach_its_session() -> None:
    identity = Identity("acme", "ann", frozenset({"tools:read"}), "https://idp", 0.0, {"groups": ["support"]})
    assert session_for_token(identity).extra["claims"] == {"groups": ["support"]}


async def test_a_rebuild_tells_only_the_servers_whose_listing_changed(open_gateway: OpenGateway) -> None:
    gateway: Gateway = await open_gateway(
        config({"name": "composites", "tools": ["both", "extra"]}, {"name": "greet", "tools": ["py__greet"]})
    )
    heard: list[str] = []
    for name in ("composites", "greet"):
        gateway.servers.get(name).on_tools_changed(lambda name=name: heard.append(name))  # type: ignore[union-attr]
    gateway.rebuild()
    assert heard == []
    definition = parse_config(
        {"backends": [python_backend()], "composite_tools": [{"name": "extra", "tools": ["py/nap"]}]}
    ).composite_tools[0]  # type: ignore[union-attr]
    gateway.set_definitions({"extra": (None, definition)})
    assert heard == ["composites"]
    assert "extra" in [t.name for t in gateway.servers.get("composites").list_tools()]  # type: ignore[union-attr]
