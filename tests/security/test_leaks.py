"""Leaks: what one tenant must not learn about another (that a composite exists: a reference to it
answers exactly like an unknown name), and what a backend prints must not reach the log raw."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from support.api import GREETER, AppFactory
from support.configs import python_backend, stdio_backend
from support.paths import PYTHON, SERVERS
from support.processes import wait_until
from toolweave.backends.stderr import BURST_LINES, MAX_LINE_CHARS
from toolweave.services.logs import JsonFormatter

API = "/api/v1"


def caller_of(tool: str, name: str = "probe") -> dict[str, Any]:
    return {
        "name": name,
        "description": "Calls another tool.",
        "steps": [{"id": "a", "tool": tool, "arguments": {"operation": "greet", "name": "x"}}],
    }


async def test_referencing_another_tenants_composite_answers_like_an_unknown_name(
    sqlite_app: AppFactory,
) -> None:
    api = await sqlite_app({"backends": [python_backend()]}, require_auth=True)
    alice, bob = await api.key("alice"), await api.key("bob")
    async with api.client(alice) as a, api.client(bob) as b:
        assert (await a.post(f"{API}/composite-tools", json={"definition": GREETER})).status_code == 201
        theirs = await b.post(f"{API}/composite-tools", json={"definition": caller_of("greeter")})
        # an unknown name as close to bob's own tools as alice's is, so "did you mean" offers
        # both the same of bob's names; alice's 'greeter' would show up in the second if it leaked
        unknown = await b.post(f"{API}/composite-tools", json={"definition": caller_of("greeted")})
        assert theirs.status_code == unknown.status_code == 422, theirs.text
        assert "'greeter'" not in unknown.text
        assert theirs.text.replace("'greeter'", "'greeted'") == unknown.text
        mine = await a.post(f"{API}/composite-tools", json={"definition": caller_of("greeter", "own")})
        assert mine.status_code == 201, mine.text


NOISY_TOKEN = "noisy-token-4f2a9c"


async def test_a_stdio_backends_stderr_becomes_structured_scrubbed_log_lines(
    open_gateway: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Its lines used to be copied raw to the gateway's stderr: unscrubbed, and breaking --log-json."""
    caplog.set_level(logging.INFO)
    noisy = {
        "name": "noisy",
        "command": PYTHON,
        "args": [str(SERVERS / "noisyserver.py")],
        "env": {"NOISY_API_TOKEN": NOISY_TOKEN},
    }
    gateway = await open_gateway({"backends": [noisy]})
    hostile = '{"level":"fatal"} \x1b[31mred\x1b[0m \x07 token=' + NOISY_TOKEN + " " + "A" * 5000
    result = await gateway.call("noisy__shout", {"text": hostile})
    assert not result.is_error

    def relayed() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.name == "toolweave.stderr.noisy"]

    await wait_until(lambda: len(relayed()) >= 2, what="two relayed stderr lines")
    formatter = JsonFormatter()
    for record in relayed():
        line = formatter.format(record)
        parsed = json.loads(line)  # one JSON object per line, whatever the backend printed
        assert parsed["backend"] == "noisy" and parsed["level"] == "info"
        message = record.getMessage()
        assert NOISY_TOKEN not in line and "\x1b" not in message and "\x07" not in message
        assert len(message) <= MAX_LINE_CHARS + 10
    messages = [r.getMessage() for r in relayed()]
    assert any(m.startswith("noisy starting with token [redacted]") for m in messages)
    assert any('{"level":"fatal"} \\x1b[31mred' in m and m.endswith("[cut]") for m in messages)


async def test_a_flood_of_stderr_lines_is_bounded(
    open_gateway: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    noisy = {"name": "noisy", "command": PYTHON, "args": [str(SERVERS / "noisyserver.py")]}
    gateway = await open_gateway({"backends": [noisy]})
    assert not (await gateway.call("noisy__shout", {"text": "spam", "repeat": 5000})).is_error
    await gateway.stop()  # end of file on the pipe: the dropped lines are reported
    spam = [r for r in caplog.records if r.name == "toolweave.stderr.noisy" and r.getMessage() == "spam"]
    dropped = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert len(spam) <= BURST_LINES + 100 and dropped, (len(spam), len(dropped))


SECRET = "hunter2-SECRET-value"
SECRET_WORKFLOW = {
    "name": "login_flow",
    "description": "Logs in with a token.",
    "parameters": {"type": "object", "properties": {"token": {"type": "string", "writeOnly": True}}},
    "steps": [
        {"id": "lower", "tool": "ts/echo", "arguments": {"text": "{{ params.token | lower }}"}},
        {"id": "backwards", "tool": "ts/echo", "arguments": {"text": "{{ params.token | reverse }}"}},
        {"id": "plain", "tool": "ts/echo", "arguments": {"text": "nothing secret"}},
    ],
}


@pytest.mark.usefixtures("in_process_testserver")  # the run records, not the process
async def test_secrets_transformed_by_templates_never_reach_run_records(open_gateway: Any) -> None:
    """A field whose template reads a secret parameter is secret too, whatever the template did to it."""
    gateway = await open_gateway(
        {
            "backends": [stdio_backend()],
            "composite_tools": [SECRET_WORKFLOW],
            "gateway": {"record_direct_calls": True},
        }
    )
    result = await gateway.call("login_flow", {"token": SECRET})
    assert not result.is_error, result
    records = await gateway.runs.list_runs(limit=50)
    dumped = repr([record.to_dict() for record in records])
    for form in (SECRET, SECRET.lower(), SECRET[::-1]):
        assert form not in dumped, form
    inner = [r for r in records if r.tool == "ts__echo"]
    assert sorted(r.arguments["text"] for r in inner) == ["[redacted]", "[redacted]", "nothing secret"]


PASSWORD = "Hunter2-Pass-Word"
TRANSFORMING_WORKFLOW = {
    "name": "transforming",
    "description": "Sends secrets through filters to tools that quote what they got.",
    "parameters": {
        "type": "object",
        "properties": {
            "pw": {"type": "string", "format": "password"},
            "token": {"type": "string", "writeOnly": True},
        },
    },
    "failureMode": "continue",
    "steps": [
        {
            "id": "up",
            "tool": "ts/fail",
            "arguments": {"message": "bad password {{ params.pw | upper }} given"},
        },
        {"id": "rev", "tool": "ts/fail", "arguments": {"message": "{{ params.token | reverse }}"}},
        {"id": "echo", "tool": "ts/echo", "arguments": {"text": "{{ params.token | lower }}"}},
        {
            "id": "later",
            "tool": "ts/fail",
            "dependsOn": ["echo"],
            "arguments": {"message": "{{ steps.echo.output | tojson | reverse }}"},
        },
        {
            "id": "each",
            "collection": "{{ [params.pw, params.token] }}",
            "onError": {"action": "continue"},
            "step": {"tool": "ts/fail", "arguments": {"message": "item {{ item[::-1] | title }}"}},
        },
    ],
}


def secret_forms(secret: str) -> set[str]:
    forms = {secret, secret.upper(), secret.lower(), secret.title()}
    return forms | {form[::-1] for form in forms}


@pytest.mark.usefixtures("in_process_testserver")  # the run records, not the process
async def test_every_form_a_template_makes_of_a_secret_stays_out_of_run_records(open_gateway: Any) -> None:
    """Before, a backend error quoting `{{ params.pw | upper }}`, a later step quoting an earlier
    step's output, and a forEach item (`item[::-1] | title`) put those forms of the secrets in the
    run records (inner calls' arguments and errors, trace events, checkpoints)."""
    gateway = await open_gateway(
        {
            "backends": [stdio_backend()],
            "composite_tools": [TRANSFORMING_WORKFLOW],
            "gateway": {"record_direct_calls": True},
        }
    )
    result = await gateway.call("transforming", {"pw": PASSWORD, "token": SECRET})
    assert result.is_error  # the failing steps; every step ran (failureMode: continue)
    records = await gateway.runs.list_runs(limit=50)
    assert {r.tool for r in records} == {"transforming", "ts__fail", "ts__echo"}
    assert len([r for r in records if r.tool == "ts__fail"]) == 5
    dumped = json.dumps([record.to_dict() for record in records], default=str)
    for form in secret_forms(PASSWORD) | secret_forms(SECRET):
        assert form not in dumped, form
    assert PASSWORD.lower() not in dumped.lower() and SECRET.lower() not in dumped.lower()
    assert "[redacted]" in dumped and "bad password [redacted] given" in dumped


def test_the_sandbox_follows_a_secret_through_filters_methods_and_operators() -> None:
    from toolweave.secrets import TAINTED, SecretValues
    from toolweave.templates import render_text

    context = {"pw": PASSWORD, "other": "harmless"}
    sources = [
        "{{ pw | upper }}",
        "{{ pw | reverse | lower }}",
        "{{ pw[::-1] }}",
        "{{ pw[3:] }}",
        "{{ pw.upper() }}",
        "{{ pw.replace('2', 'Z') }}",
        "{{ ('x' ~ pw) | upper }}",
        "{{ '%s!' % pw | title }}",
        "{{ [pw, 'a'] | join('-') | capitalize }}",
        "{{ pw | urlencode }}",
        "{{ pw.split('-') | join('') }}",
    ]
    for source in sources:  # each with only the secret itself known at first
        tainted = SecretValues([PASSWORD])
        token = TAINTED.set(tainted)
        try:
            rendered = render_text(source, context)
            assert tainted.scrub(rendered).strip("!-a") in ("[redacted]", "x[redacted]"), (source, rendered)
            assert render_text("{{ other | upper }}", context) == "HARMLESS"
            assert tainted.scrub("HARMLESS") == "HARMLESS"  # what no secret made is left alone
        finally:
            TAINTED.reset(token)
