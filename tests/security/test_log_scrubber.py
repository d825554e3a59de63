"""Logs: no tenant controls how anyone's log lines look, and secrets are redacted by field.

There used to be one process-wide scrubber fed with every tenant's connection values: a tenant
storing `","level":"` garbled every JSON log line of every tenant, and thousands of values made
each line cost a scan per value. Connection values are now never logged in the first place; log
fields whose *name* says they hold a secret are redacted, whatever their value.
"""

from __future__ import annotations

import json
import logging

from support.api import AppFactory
from support.configs import python_backend
from toolweave.secrets import REDACTED
from toolweave.services.logs import TEXT_FORMAT, JsonFormatter

API = "/api/v1"
HOSTILE = ['","level":"', "toolweave", "warning", 'message":"']


def record(message: str = "backend %s answered", *args: object, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("toolweave.test", logging.WARNING, __file__, 1, message, args or ("py",), None)
    made.created = 1_700_000_000.0
    made.msecs = 0.0
    for key, value in extra.items():
        setattr(made, key, value)
    return made


async def test_a_tenants_connection_values_do_not_change_anyones_log_lines(sqlite_app: AppFactory) -> None:
    api = await sqlite_app(
        {"backends": [python_backend(), {"name": "remote", "url": "http://127.0.0.1:9/mcp"}]},
        require_auth=True,
    )
    before_json = JsonFormatter().format(record())
    before_text = logging.Formatter(TEXT_FORMAT).format(record())
    key = await api.key("mallory")
    async with api.client(key) as client:
        headers = {f"X-H{i}": value for i, value in enumerate(HOSTILE)}
        assert (await client.put(f"{API}/connections/remote", json={"headers": headers})).status_code == 200
    after_json = JsonFormatter().format(record())
    assert after_json == before_json
    assert json.loads(after_json)["level"] == "warning"
    assert logging.Formatter(TEXT_FORMAT).format(record()) == before_text


def test_fields_named_as_secrets_are_redacted_by_name_not_by_value() -> None:
    line = json.loads(
        JsonFormatter().format(
            record(
                headers={"Authorization": "Bearer tw_abc", "X-Api-Key": "k-123", "Accept": "text/plain"},
                token="t-456",
                client_secret="s-789",
                tool="py__greet",
            )
        )
    )
    assert line["headers"] == {"Authorization": REDACTED, "X-Api-Key": REDACTED, "Accept": "text/plain"}
    assert line["token"] == REDACTED and line["client_secret"] == REDACTED
    assert line["tool"] == "py__greet" and line["message"] == "backend py answered"
