"""Connections: a tenant's headers reach an HTTP backend only for that tenant's calls, only once a
router actually chose that backend, and no secret ever appears in an export, a run record, a log
line, an error message or the database file."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.api import AppFactory
from support.configs import python_backend, stdio_backend
from support.processes import header_server
from toolweave.executor import Session
from toolweave.services.errors import ConnectionUnavailable
from toolweave.services.logs import JsonFormatter

API = "/api/v1"
pytestmark = pytest.mark.usefixtures("in_process_testserver")
"""The stdio backend is there to be refused a connection: no process is needed for that."""
SECRET_A = "alice-token-6f1c2d9e"
SECRET_A2 = "alice-token-rotated-77aa"
SECRETS = (SECRET_A, SECRET_A2)
ROUTER = {
    "name": "who",
    "description": "Ask the remote service who we are, or greet locally.",
    "operations": [
        {"slug": "remote", "tool": "hdr/whoami"},
        {"slug": "local", "tool": "py/greet", "arguments": {"name": "local"}},
    ],
    "rules": [{"condition": {"type": "equals", "field": "topic", "value": "remote"}, "operation": "remote"}],
    "default_operation": "local",
}


def fingerprint(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:12]


@pytest.fixture(scope="module")
def header_url() -> Iterator[str]:
    with header_server() as url:
        yield url


def assert_no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"a secret leaked into {where}"


async def test_connections_are_per_tenant_lazy_and_never_shown(
    make_app: AppFactory, header_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    backends = [
        {"name": "hdr", "url": header_url},
        python_backend(),
        stdio_backend(),
        {"name": "dead", "url": "http://127.0.0.1:9/mcp", "connect_timeout": 0.5},
    ]
    api = await make_app({"backends": backends}, require_auth=True)
    alice, bob = await api.key("alice"), await api.key("bob")
    pool = api.runtime.tenant_backends
    seen_text: list[str] = []
    async with api.client(alice) as a, api.client(bob) as b:
        assert (await a.post(f"{API}/composite-tools", json={"definition": ROUTER})).status_code == 201
        put = await a.put(f"{API}/connections/hdr", json={"headers": {"X-Token": SECRET_A}})
        assert put.status_code == 200 and put.json()["keys"] == ["X-Token"]
        seen_text.append(put.text)
        assert pool.opened() == []  # nothing is loaded before a call needs it

        local = await a.post(f"{API}/composite-tools/invoke", json={"tool": "who", "params": {"topic": "x"}})
        assert local.json()["meta"]["operation"] == "local"
        assert pool.opened() == []  # the router chose another backend: the connection stays unloaded

        remote = await a.post(
            f"{API}/composite-tools/invoke", json={"tool": "who", "params": {"topic": "remote"}}
        )
        assert remote.json()["data"]["token"] == fingerprint(SECRET_A), remote.text
        assert pool.opened() == [("alice", "hdr")]
        seen_text.append(remote.text)

        shared = await b.post(f"{API}/composite-tools", json={"definition": {**ROUTER, "name": "who_b"}})
        assert shared.status_code == 201
        bobs = await b.post(
            f"{API}/composite-tools/invoke", json={"tool": "who_b", "params": {"topic": "remote"}}
        )
        assert bobs.json()["data"]["token"] is None  # bob has no connection: the shared backend, no header

        rotated = await a.put(f"{API}/connections/hdr", json={"headers": {"X-Token": SECRET_A2}})
        assert rotated.status_code == 200 and pool.opened() == []  # the old session is closed
        again = await a.post(f"{API}/tools/hdr__whoami/call", json={"topic": "direct"})
        assert again.json()["structuredContent"]["token"] == fingerprint(SECRET_A2)

        # read back: names only
        for path in ("/connections", "/connections/hdr", "/backends", "/runs", "/composite-tools/who"):
            response = await a.get(f"{API}{path}")
            assert response.status_code == 200, path
            seen_text.append(response.text)
        for fmt in ("mcp", "openai", "openai-responses", "anthropic", "langchain", "universal"):
            seen_text.append((await a.get(f"{API}/composite-tools/who/tools/{fmt}")).text)

        # error messages name the header, never the value
        bad = await a.put(
            f"{API}/connections/hdr", json={"headers": {"X-Token": SECRET_A + "\n", "Bad Name": SECRET_A}}
        )
        assert bad.status_code == 422 and len(bad.json()["error"]["problems"]) == 2
        stdio = await a.put(f"{API}/connections/ts", json={"headers": {"X-Token": SECRET_A}})
        assert stdio.status_code == 422 and "stdio" in stdio.json()["error"]["message"]
        unknown = await a.put(f"{API}/connections/nope", json={"headers": {"X-Token": SECRET_A}})
        assert unknown.status_code == 404
        seen_text += [bad.text, stdio.text, unknown.text]

        assert (
            await a.put(f"{API}/connections/dead", json={"headers": {"X-Token": SECRET_A}})
        ).status_code == 200
        with pytest.raises(ConnectionUnavailable) as failure:
            await pool(api.gateway.backends["dead"], Session(tenant="alice"))
        seen_text.append(str(failure.value))
        assert "tenant 'alice'" in str(failure.value)

        deleted = await a.delete(f"{API}/connections/hdr")
        assert deleted.status_code == 204 and (await a.get(f"{API}/connections/hdr")).status_code == 404

    runs = await api.runtime.runs.list_runs(limit=500)
    seen_text += [repr(r.to_dict()) for r in runs]
    seen_text.append(repr(api.gateway.export("mcp")))
    for index, text in enumerate(seen_text):
        assert_no_secret(text, f"API/run/export text #{index}")
    formatter = JsonFormatter()
    for record in caplog.records:
        assert_no_secret(record.getMessage(), f"log record {record.name}")
        assert_no_secret(formatter.format(record), f"log line {record.name}")
    if api.url.startswith("sqlite"):
        database = Path(api.url.removeprefix("sqlite:///"))
        for file in database.parent.glob(database.name + "*"):
            data = file.read_bytes()
            assert all(secret.encode() not in data for secret in SECRETS), f"plaintext secret in {file.name}"
