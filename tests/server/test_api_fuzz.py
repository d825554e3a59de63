"""Fuzzing the REST API from its own OpenAPI document (schemathesis): bad input of any kind is a
documented 4xx with the error shape, never a 5xx, and every response matches the document.

The app runs in schemathesis' in-process ASGI client, whose lifespan starts the gateway (an
in-process Python backend, so arbitrary calls are safe and fast) on a SQLite file. The number of
examples per operation is bounded to keep the suite fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.python import asgi as schemathesis_asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from starlette.testclient import TestClient

from support.api import GREETER, TEST_SECRET
from support.configs import python_backend
from toolweave.config import parse_config
from toolweave.server.app import server_app

EXAMPLES = 12
CHECKS = [
    schemathesis.checks.not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(
    params=[False, True], ids=["open", "auth-without-key"]
)  # an app per test: its lifespan runs once
def fuzzed_api(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The open API, and the API with auth on called without a key (every answer a documented 401)."""
    folder = tmp_path_factory.mktemp("fuzz")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOOLWEAVE_SECRET_KEY", TEST_SECRET)
        patch.setenv("HOME", str(folder / "home"))
        patch.delenv("TOOLWEAVE_LLM_BASE_URL", raising=False)
        raw = {
            "backends": [
                python_backend(hide=["drop_table"]),
                {"name": "remote", "url": "http://127.0.0.1:9/mcp"},
            ],
            "composite_tools": [{"name": "from_file", "tools": ["py/greet"]}],
            "gateway": {
                "database": f"sqlite:///{folder / 'fuzz.db'}",
                "allowed_hosts": ["testserver"],  # the in-process client's Host
            },
        }
        cfg = parse_config(raw)
        assert cfg is not None
        with TestClient(server_app(cfg)) as client:  # something to find, so not every call is a 404
            assert client.post("/api/v1/composite-tools", json={"definition": GREETER}).status_code == 201
        yield schemathesis.openapi.from_asgi("/openapi.json", server_app(cfg, require_auth=request.param))
        schemathesis_asgi.shutdown_lifespans()


def test_no_5xx_and_responses_match_the_document(fuzzed_api: Any) -> None:
    """Every operation of the document, each with a bounded number of generated requests."""
    failures: list[str] = []
    sent: list[int] = []
    # `GET /events` streams until the client leaves: a request/response fuzzer would wait forever
    # (it is tested as a stream in tests/services/test_events.py)
    operations = [
        op
        for op in (result.ok() for result in fuzzed_api.get_all_operations())
        if op.path != "/api/v1/events"
    ]
    assert len(operations) >= 18, [op.label for op in operations]
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES if not fuzzed_api.app.state.runtime.require_auth else 3,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def fuzz(case: Any) -> None:
            sent.append(case.call_and_validate(checks=CHECKS).status_code)

        try:
            fuzz()
        except Exception as error:  # noqa: BLE001 - collect every operation's failure, then report them all
            failures.append(f"{operation.label}: {error}")
    assert not failures, "\n\n".join(failures)
    assert len(sent) >= 2 * len(operations) and all(status < 500 for status in sent)


def test_stateful_sequences_keep_every_answer_documented(fuzzed_api: Any) -> None:
    """Chains of calls with real ids (a created composite read, edited, deleted; a run read) from the
    links schemathesis infers from the document: no 5xx, every response as documented."""
    steps: list[str] = []

    class Machine(fuzzed_api.as_state_machine()):  # type: ignore[misc]
        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            steps.append(f"{case.method} {case.formatted_path} {response.status_code}")
            case.validate_response(response, checks=CHECKS)  # the checks of the test above

    Machine.run(
        settings=settings(
            max_examples=10 if not fuzzed_api.app.state.runtime.require_auth else 2,
            stateful_step_count=6,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
    )
    chained = [step for step in steps if "/composite-tools/" in step and not step.endswith(" 404")]
    assert len(steps) >= 10 and (chained or fuzzed_api.app.state.runtime.require_auth), steps
