"""The caller's subject: one field of `Session`, set at the edge, kept through every call."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from support.api import GREETER, AppFactory
from support.configs import python_backend
from toolweave.executor.session import Session
from toolweave.server.auth import local_session, session_for
from toolweave.store import ApiKeyInfo, KeyRepository


def test_an_api_key_acts_as_its_label_and_the_operator_as_local() -> None:
    info = ApiKeyInfo("id1", "acme", None, "tw_abcd1234", ("tools:read",), datetime.now(UTC), None, None)
    session = session_for(info)
    assert (session.tenant, session.subject, session.caller) == ("acme", "key:tw_abcd1234", "key:tw_abcd1234")
    assert local_session().caller == "local"


def test_the_subject_survives_the_per_call_copy() -> None:
    session = Session(tenant="acme", label="oidc:x", subject="alice@example.com")
    assert session.asking_with(None).subject == "alice@example.com"
    assert Session(label="cli").caller == "cli"


async def test_a_keys_calls_are_recorded_with_its_label(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]}, require_auth=True)
    key = await api.key("acme")
    heard: list[dict[str, Any]] = []
    subscriber = api.runtime.events.subscribe("acme", everything=False)
    async with api.client(key) as client:
        created = await client.post("/api/v1/composite-tools", json={"definition": GREETER})
        assert created.status_code == 201
        ran = await client.post("/api/v1/tools/greeter/call", json={"operation": "greet", "name": "x"})
        assert ran.status_code == 200, ran.text
        runs = (await client.get("/api/v1/runs")).json()["runs"]
    while not subscriber.queue.empty():
        heard.append(subscriber.queue.get_nowait())
    prefix = (await KeyRepository(api.runtime.db).list("acme"))[0].prefix
    assert [run["subject"] for run in runs] == [f"key:{prefix}"]
    assert {event["subject"] for event in heard} == {f"key:{prefix}"}
