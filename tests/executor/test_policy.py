"""`[policy]` allow/deny, per tenant and per API key scope, evaluated by the executor for every call."""

from __future__ import annotations

from support.executor import MakeGateway, backend
from support.results import text
from toolweave import Gateway
from toolweave.executor import Session

CALL = frozenset({"tools:call"})


async def test_deny_wins_over_allow(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(backend() + '[policy]\nallow = ["t__*"]\ndeny = ["t__increment"]\n')
    assert not (await gw.call("t__echo", {"text": "ok"})).is_error
    denied = await gw.call("t__increment", {})
    assert denied.is_error and text(denied) == "tool 't__increment' is denied by the gateway policy"
    assert (await gw.call("t__counter")).structured_content == {"value": 0}  # nothing ran


async def test_allow_list_closes_everything_else(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(backend() + '[policy]\nallow = ["t__echo", "t__add"]\n')
    assert not (await gw.call("t__add", {"a": 1, "b": 1})).is_error
    result = await gw.call("t__counter")
    assert result.is_error and "not in the gateway policy's allow list" in text(result)


async def test_re_patterns(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(backend() + '[policy]\ndeny = ["re:t__(increment|slow_.*)", "re:t__add"]\n')
    for name in ("t__increment", "t__slow_write", "t__add"):
        assert (await gw.call(name, {"a": 1, "b": 2} if name == "t__add" else {})).is_error
    assert not (await gw.call("t__counter")).is_error
    # patterns match the whole name: `re:t__add` does not deny `t__add_tool`
    assert gw.default_executor.classify("t__add_tool") == "serial"


async def test_rules_per_tenant(make_gateway: MakeGateway) -> None:
    policy = (
        '[policy]\ndeny = ["t__delete_everything"]\n'
        '[[policy.rules]]\ntenant = "acme"\nallow = ["re:t__(echo|counter)"]\n'
        '[[policy.rules]]\ntenant = "globex"\ndeny = ["t__echo"]\n'
    )
    gw = await make_gateway(backend() + policy)
    acme = gw.executor(Session(tenant="acme"))
    globex = gw.executor(Session(tenant="globex"))
    anyone = gw.executor(Session())

    assert not (await acme.call("t__echo", {"text": "hi"})).is_error
    refused = await acme.call("t__increment", {})
    assert (
        refused.is_error
        and text(refused) == "tool 't__increment' is not allowed for tenant 'acme' by the gateway policy"
    )

    denied = await globex.call("t__echo", {"text": "hi"})
    assert denied.is_error and "denied for tenant 'globex'" in text(denied)
    assert not (await globex.call("t__increment", {})).is_error

    assert not (await anyone.call("t__increment", {})).is_error
    # the global deny applies to every tenant
    for ex in (acme, globex, anyone):
        assert (await ex.call("t__delete_everything", {})).is_error


async def test_rules_per_scope(make_gateway: MakeGateway) -> None:
    policy = '[[policy.rules]]\nscope = "readonly"\ndeny = ["re:t__(increment|slow_write|delete_.*)"]\n'
    gw = await make_gateway(backend() + policy)
    limited = gw.executor(Session(scopes=CALL | {"readonly"}))
    full = gw.executor(Session(scopes=CALL))
    denied = await limited.call("t__increment", {})
    assert denied.is_error and "denied for scope 'readonly'" in text(denied)
    assert not (await limited.call("t__counter")).is_error
    assert not (await full.call("t__increment", {})).is_error


async def test_a_tenant_and_a_scope_rule_both_apply(make_gateway: MakeGateway) -> None:
    policy = (
        '[[policy.rules]]\ntenant = "acme"\nallow = ["t__*"]\n'
        '[[policy.rules]]\nscope = "readonly"\ndeny = ["t__increment"]\n'
    )
    gw = await make_gateway(backend() + policy)
    ex = gw.executor(Session(tenant="acme", scopes=CALL | {"readonly"}))
    assert (await ex.call("t__increment", {})).is_error  # deny of the scope rule wins over the tenant's allow
    assert not (await ex.call("t__counter")).is_error


async def test_calling_needs_the_tools_call_scope(gw: Gateway) -> None:
    ex = gw.executor(Session(scopes=frozenset({"tools:read"})))
    result = await ex.call("t__echo", {"text": "hi"})
    assert result.is_error and text(result) == "calling 't__echo' needs the tools:call scope"


async def test_policy_applies_inside_batches(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(backend() + '[[policy.rules]]\ntenant = "acme"\ndeny = ["t__increment"]\n')
    ex = gw.executor(Session(tenant="acme"))
    assert ex.classify("t__increment") == "short"
    results = await ex.execute_batch([{"id": "1", "name": "t__increment"}, {"id": "2", "name": "t__counter"}])
    assert results[0].is_error and "denied for tenant 'acme'" in text(results[0])
    assert results[1].structured_content == {"value": 0}
