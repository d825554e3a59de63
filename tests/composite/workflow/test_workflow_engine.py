"""The DAG executor: data passing, scheduling, retries, conditions, failures, timeouts, progress, resume."""

from __future__ import annotations

from typing import Any

import pytest

from support.fakes import FakeCalls, FakeCatalog
from support.results import meta, texts
from support.workflows import build, catalog_for, error, params, statuses
from toolweave.composite.errors import BuildError
from toolweave.composite.workflow.build import build_workflow
from toolweave.composite.workflow.config import WorkflowDef
from toolweave.composite.workflow.plan import RetryPolicy
from toolweave.runs import MemoryRunStore, RunRecord
from toolweave.secrets import REDACTED

# -- data passing -----------------------------------------------------------------------


async def test_a_chain_passes_structured_and_text_outputs_along() -> None:
    catalog = catalog_for("gh/get_user", "gh/get_repo", "slack/send")
    backend = FakeCalls(
        answers={"gh__get_user": {"login": "ann", "repos": 2}, "gh__get_repo": "repo is fine"}
    )
    workflow = build(
        [
            {"id": "user", "tool": "gh/get_user", "arguments": {"name": "{{ params.who }}"}},
            {
                "id": "repo",
                "tool": "gh.get_repo",
                "dependsOn": ["user"],
                "arguments": {"owner": "{{ steps.user.output.login }}"},
            },
            {
                "id": "say",
                "tool": "slack/send",
                "dependsOn": ["repo"],
                "arguments": {
                    "text": "{{ steps.user.output.login }}: {{ steps.repo.output.text }} ({{ steps.repo.status }})",
                    "n": "{{ steps.user.output.repos }}",
                    "raw": "{{ steps.repo.content[0].text }}",
                },
            },
        ],
        catalog,
        parameters=params("who"),
    )
    result = await workflow.run({"who": "ann"}, backend.context())
    assert not result.is_error
    assert backend.calls == [
        ("gh__get_user", {"name": "ann"}),
        ("gh__get_repo", {"owner": "ann"}),
        ("slack__send", {"text": "ann: repo is fine (completed)", "n": 2, "raw": "repo is fine"}),
    ]
    assert meta(result)["kind"] == "workflow" and meta(result)["status"] == "completed"
    assert [s["id"] for s in meta(result)["steps"]] == ["user", "repo", "say"]
    assert all(s["attempts"] == 1 and s["latency_ms"] >= 0 for s in meta(result)["steps"])


async def test_parameter_defaults_apply_without_overriding_the_caller() -> None:
    catalog = catalog_for("k8s/apply")
    backend = FakeCalls()
    parameters = {
        "type": "object",
        "properties": {
            "env": {"type": "string"},
            "replicas": {"type": "integer", "default": 3},
            "tier": {"default": "web"},
        },
    }
    workflow = build(
        [
            {
                "id": "a",
                "tool": "k8s/apply",
                "arguments": {"r": "{{ params.replicas }}", "t": "{{ params.tier }}"},
            }
        ],
        catalog,
        parameters=parameters,
    )
    await workflow.run({"env": "dev"}, backend.context())
    await workflow.run({"env": "dev", "replicas": 5}, backend.context())
    assert [args for _, args in backend.calls] == [{"r": 3, "t": "web"}, {"r": 5, "t": "web"}]


async def test_rendered_text_is_coerced_to_the_target_schema() -> None:
    catalog = catalog_for(
        "k8s/scale",
        k8s__scale={
            "replicas": {"type": "integer"},
            "dry": {"type": "boolean"},
            "ratio": {"type": "number"},
            "label": {"type": "string"},
        },
    )
    backend = FakeCalls()
    workflow = build(
        [
            {
                "id": "s",
                "tool": "k8s/scale",
                "arguments": {
                    "replicas": "{{ params.n }}0",
                    "dry": "{% if params.n > 1 %}true{% else %}false{% endif %}",
                    "ratio": "0.{{ params.n }}",
                    "label": "{{ params.n }}",
                },
            }
        ],
        catalog,
        parameters=params("n"),
    )
    await workflow.run({"n": 2}, backend.context())
    assert backend.calls == [("k8s__scale", {"replicas": 20, "dry": True, "ratio": 0.2, "label": 2})]


async def test_text_that_does_not_fit_the_schema_fails_the_step_clearly() -> None:
    catalog = catalog_for("k8s/scale", k8s__scale={"replicas": {"type": "integer"}})
    workflow = build(
        [{"id": "s", "tool": "k8s/scale", "arguments": {"replicas": "many {{ params.n }}"}}],
        catalog,
        parameters=params("n"),
    )
    backend = FakeCalls()
    result = await workflow.run({"n": 2}, backend.context())
    assert result.is_error and backend.calls == []
    assert "replicas" in texts(result)[0] and "integer" in texts(result)[0]


async def test_a_template_error_fails_the_step_with_the_template_named() -> None:
    workflow = build(
        [{"id": "a", "tool": "x/y", "arguments": {"v": "{{ params.missing }}"}}],
        catalog_for("x/y"),
        parameters=params("missing"),
    )
    result = await workflow.run({}, FakeCalls().context())
    assert result.is_error and statuses(result) == {"a": "failed"}
    assert "missing" in texts(result)[0] and "Step 'a' failed" in texts(result)[0]


async def test_sandbox_escape_in_arguments_fails_the_step() -> None:
    workflow = build(
        [{"id": "a", "tool": "x/y", "arguments": {"v": "{{ ''.__class__.__mro__ }}"}}], catalog_for("x/y")
    )
    backend = FakeCalls()
    result = await workflow.run({}, backend.context())
    assert result.is_error and backend.calls == []


# -- scheduling ------------------------------------------------------------------------------


async def test_independent_steps_overlap_and_a_join_waits_for_both() -> None:
    catalog = catalog_for("a/one", "a/two", "a/join")
    backend = FakeCalls(delays={"a__one": 0.02, "a__two": 0.02})
    workflow = build(
        [
            {"id": "one", "tool": "a/one"},
            {"id": "two", "tool": "a/two"},
            {"id": "join", "tool": "a/join", "dependsOn": ["one", "two"]},
        ],
        catalog,
    )
    result = await workflow.run({}, backend.context())
    assert not result.is_error
    assert backend.overlapped("a__one", "a__two")
    assert backend.position("start", "a__join") > max(
        backend.position("end", "a__one"), backend.position("end", "a__two")
    )


async def test_a_step_starts_when_its_own_dependencies_finish_not_level_by_level() -> None:
    catalog = catalog_for("a/slow", "a/fast", "a/after_fast")
    backend = FakeCalls(delays={"a__slow": 0.05})
    workflow = build(
        [
            {"id": "slow", "tool": "a/slow"},
            {"id": "fast", "tool": "a/fast"},
            {"id": "after_fast", "tool": "a/after_fast", "dependsOn": ["fast"]},
        ],
        catalog,
    )
    await workflow.run({}, backend.context())
    assert backend.position("end", "a__after_fast") < backend.position("end", "a__slow")


async def test_max_parallel_bounds_concurrency() -> None:
    names = [f"a/t{i}" for i in range(5)]
    backend = FakeCalls(delays={f"a__t{i}": 0.01 for i in range(5)})
    workflow = build(
        [{"id": f"s{i}", "tool": name} for i, name in enumerate(names)], catalog_for(*names), maxParallel=2
    )
    await workflow.run({}, backend.context())
    assert backend.max_active == 2 and len(backend.calls) == 5


async def test_max_parallel_one_runs_steps_one_after_another_in_declaration_order() -> None:
    names = ["a/x", "a/y", "a/z"]
    backend = FakeCalls(delays={"a__x": 0.01, "a__y": 0.01})
    workflow = build([{"id": n[2:], "tool": n} for n in names], catalog_for(*names), maxParallel=1)
    await workflow.run({}, backend.context())
    assert backend.events == [(kind, n) for n in ("a__x", "a__y", "a__z") for kind in ("start", "end")]


# -- retries -------------------------------------------------------------------------------------


async def test_retry_treats_is_error_as_failure_and_retries_until_success() -> None:
    backend = FakeCalls(answers={"x__flaky": [error("503"), error("503"), {"ok": True}]})
    workflow = build(
        [
            {
                "id": "f",
                "tool": "x/flaky",
                "onError": {"action": "retry", "retryCount": 3, "retryDelay": "1ms"},
            }
        ],
        catalog_for("x/flaky"),
    )
    result = await workflow.run({}, backend.context())
    assert not result.is_error and result.structured_content == {"ok": True}
    assert len(backend.calls) == 3 and meta(result)["steps"][0]["attempts"] == 3


async def test_retry_gives_up_after_max_retries() -> None:
    backend = FakeCalls(answers={"x__down": error("backend down")})
    workflow = build(
        [{"id": "d", "tool": "x/down", "onError": {"action": "retry", "maxRetries": 2, "retryDelay": 0}}],
        catalog_for("x/down"),
    )
    result = await workflow.run({}, backend.context())
    assert result.is_error and len(backend.calls) == 3
    assert meta(result)["steps"][0] == {
        "id": "d",
        "status": "failed",
        "attempts": 3,
        "latency_ms": pytest.approx(meta(result)["steps"][0]["latency_ms"]),
        "start_ms": pytest.approx(meta(result)["steps"][0]["start_ms"]),
    }
    assert "backend down" in texts(result)[0]


async def test_without_retry_a_failure_is_tried_once() -> None:
    backend = FakeCalls(answers={"x__down": error()})
    workflow = build([{"id": "d", "tool": "x/down"}], catalog_for("x/down"))
    await workflow.run({}, backend.context())
    assert len(backend.calls) == 1


def test_backoff_doubles_and_is_capped() -> None:
    policy = RetryPolicy(retries=6, delay=1.0, cap=5.0)
    assert [policy.delay_before(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    defn = WorkflowDef.model_validate(
        {
            "name": "w",
            "description": "d",
            "steps": [
                {
                    "id": "a",
                    "tool": "x/y",
                    "onError": {"action": "retry", "retryCount": 2, "retryDelay": "2s"},
                }
            ],
        }
    )
    on_error = defn.steps[0].on_error
    assert on_error is not None and on_error.delay_cap == 120.0


async def test_an_exception_from_the_call_is_a_failure_value_not_a_crash() -> None:
    backend = FakeCalls(answers={"x__bad": RuntimeError("socket closed")})
    workflow = build([{"id": "b", "tool": "x/bad"}], catalog_for("x/bad"))
    result = await workflow.run({}, backend.context())
    assert result.is_error and "socket closed" in texts(result)[0]


# -- conditions and defaultResults --------------------------------------------------------------


async def test_a_false_condition_skips_the_step_and_its_default_results_flow_on() -> None:
    catalog = catalog_for("x/enrich", "x/use")
    backend = FakeCalls()
    workflow = build(
        [
            {
                "id": "enrich",
                "tool": "x/enrich",
                "condition": "{{ params.enrich }}",
                "defaultResults": {"text": "no enrichment"},
            },
            {
                "id": "use",
                "tool": "x/use",
                "dependsOn": ["enrich"],
                "arguments": {"data": "{{ steps.enrich.output.text }}"},
            },
        ],
        catalog,
        parameters=params("enrich"),
    )
    result = await workflow.run({"enrich": False}, backend.context())
    assert backend.calls == [("x__use", {"data": "no enrichment"})]
    assert statuses(result) == {"enrich": "skipped", "use": "completed"}
    await workflow.run({"enrich": True}, backend.context())
    assert backend.called()[-2:] == ["x__enrich", "x__use"]


@pytest.mark.parametrize(
    ("value", "runs"), [("true", True), ("False", False), ("yes", True), (0, False), (None, False)]
)
async def test_conditions_accept_yes_no_values(value: Any, runs: bool) -> None:
    backend = FakeCalls()
    workflow = build(
        [{"id": "a", "tool": "x/y", "condition": "{{ params.v }}"}],
        catalog_for("x/y"),
        parameters=params("v"),
    )
    await workflow.run({"v": value}, backend.context())
    assert bool(backend.calls) is runs


async def test_a_condition_that_is_not_yes_or_no_fails_the_step() -> None:
    workflow = build(
        [{"id": "a", "tool": "x/y", "condition": "{{ params.v }}"}],
        catalog_for("x/y"),
        parameters=params("v"),
    )
    result = await workflow.run({"v": "maybe"}, FakeCalls().context())
    assert result.is_error and "true or false" in texts(result)[0]


async def test_on_error_continue_records_the_failure_and_uses_default_results() -> None:
    catalog = catalog_for("x/lookup", "x/process")
    backend = FakeCalls(answers={"x__lookup": error("unavailable")})
    workflow = build(
        [
            {
                "id": "lookup",
                "tool": "x/lookup",
                "onError": {"action": "continue"},
                "defaultResults": {"text": '{"status": "unavailable"}'},
            },
            {
                "id": "process",
                "tool": "x/process",
                "dependsOn": ["lookup"],
                "arguments": {
                    "r": "{{ (steps.lookup.output.text | fromjson).status }}",
                    "s": "{{ steps.lookup.status }}",
                },
            },
        ],
        catalog,
    )
    result = await workflow.run({}, backend.context())
    assert not result.is_error and meta(result)["status"] == "completed"
    assert statuses(result) == {"lookup": "failed", "process": "completed"}
    assert backend.calls[-1] == ("x__process", {"r": "unavailable", "s": "failed"})


# -- failures ----------------------------------------------------------------------------------------


async def test_abort_stops_the_workflow_and_cancels_running_steps() -> None:
    catalog = catalog_for("x/fail", "x/slow", "x/later")
    backend = FakeCalls(answers={"x__fail": error("kaput")}, delays={"x__slow": 5})
    workflow = build(
        [
            {"id": "fail", "tool": "x/fail"},
            {"id": "slow", "tool": "x/slow"},
            {"id": "later", "tool": "x/later", "dependsOn": ["fail"]},
        ],
        catalog,
    )
    result = await workflow.run({}, backend.context())
    assert result.is_error and meta(result)["status"] == "failed"
    assert statuses(result) == {"fail": "failed", "slow": "cancelled", "later": "cancelled"}
    assert ("cancel", "x__slow") in backend.events and "x__later" not in backend.called()
    assert "Step 'fail' failed: kaput" in texts(result)[0]


async def test_failure_mode_continue_runs_everything_and_keeps_what_succeeded() -> None:
    catalog = catalog_for("x/a", "x/b", "x/c")
    backend = FakeCalls(answers={"x__a": error("a broke"), "x__c": {"summary": "done"}})
    workflow = build(
        [
            {"id": "a", "tool": "x/a"},
            {"id": "b", "tool": "x/b"},
            {"id": "c", "tool": "x/c", "dependsOn": ["a"]},
        ],
        catalog,
        failureMode="continue",
    )
    result = await workflow.run({}, backend.context())
    assert backend.called() == ["x__a", "x__b", "x__c"]
    assert result.is_error and meta(result)["status"] == "failed"
    assert statuses(result) == {"a": "failed", "b": "completed", "c": "completed"}
    assert "a broke" in texts(result)[0] and result.structured_content == {"summary": "done"}


async def test_a_step_timeout_fails_the_step() -> None:
    backend = FakeCalls(delays={"x__hang": 5})
    workflow = build([{"id": "h", "tool": "x/hang", "timeout": "20ms"}], catalog_for("x/hang"))
    result = await workflow.run({}, backend.context())
    assert result.is_error and statuses(result) == {"h": "failed"}
    assert "timed out after 20ms" in texts(result)[0]


async def test_the_workflow_timeout_cancels_running_steps_and_says_so() -> None:
    catalog = catalog_for("x/quick", "x/hang", "x/never")
    backend = FakeCalls(delays={"x__hang": 5})
    workflow = build(
        [
            {"id": "quick", "tool": "x/quick"},
            {"id": "hang", "tool": "x/hang", "dependsOn": ["quick"]},
            {"id": "never", "tool": "x/never", "dependsOn": ["hang"]},
        ],
        catalog,
        timeout="50ms",
    )
    result = await workflow.run({}, backend.context())
    assert result.is_error and meta(result)["status"] == "timed_out"
    assert statuses(result) == {"quick": "completed", "hang": "cancelled", "never": "cancelled"}
    assert ("cancel", "x__hang") in backend.events
    assert "timed out after 0.05s" in texts(result)[0] and "hang" in texts(result)[0]


# -- results ---------------------------------------------------------------------------------------------


async def test_without_output_the_result_is_the_last_steps() -> None:
    backend = FakeCalls(answers={"x__b": {"n": 1}})
    workflow = build(
        [{"id": "a", "tool": "x/a"}, {"id": "b", "tool": "x/b", "dependsOn": ["a"]}],
        catalog_for("x/a", "x/b"),
    )
    result = await workflow.run({}, backend.context())
    assert result.structured_content == {"n": 1} and texts(result) == ["structured"]
    assert workflow.tool.output_schema is None


async def test_a_skipped_last_step_gives_its_default_results() -> None:
    workflow = build(
        [{"id": "a", "tool": "x/a", "condition": "{{ params.go }}", "defaultResults": {"done": False}}],
        catalog_for("x/a"),
        parameters=params("go"),
    )
    result = await workflow.run({"go": False}, FakeCalls().context())
    assert not result.is_error and result.structured_content == {"done": False}
    assert "skipped" in texts(result)[0]


async def test_output_builds_typed_structured_content_and_is_advertised() -> None:
    backend = FakeCalls(answers={"x__stats": {"count": "7", "items": [1, 2], "ok": True}, "x__notes": "line"})
    workflow = build(
        [{"id": "stats", "tool": "x/stats"}, {"id": "notes", "tool": "x/notes"}],
        catalog_for("x/stats", "x/notes"),
        output={
            "properties": {
                "count": {
                    "type": "integer",
                    "description": "How many",
                    "value": "{{ steps.stats.output.count }}",
                },
                "items": {"type": "array", "description": "Items", "value": "{{ steps.stats.output.items }}"},
                "summary": {
                    "type": "string",
                    "description": "Text",
                    "value": "{{ steps.notes.output.text }}!",
                },
                "meta": {
                    "type": "object",
                    "description": "Nested",
                    "properties": {
                        "ok": {
                            "type": "boolean",
                            "description": "Ok",
                            "value": "{{ steps.stats.output.ok }}",
                        },
                        "by": {"type": "string", "description": "Who", "value": "{{ workflow.name }}"},
                    },
                },
                "missing": {
                    "type": "number",
                    "description": "Absent",
                    "value": "{{ steps.stats.output.nope }}",
                    "default": 0.5,
                },
            },
            "required": ["count"],
        },
    )
    result = await workflow.run({}, backend.context())
    expected = {
        "count": 7,
        "items": [1, 2],
        "summary": "line!",
        "meta": {"ok": True, "by": "wf"},
        "missing": 0.5,
    }
    assert result.structured_content == expected
    assert texts(result) == [
        '{"count":7,"items":[1,2],"summary":"line!","meta":{"ok":true,"by":"wf"},"missing":0.5}'
    ]
    schema = workflow.tool.output_schema
    assert schema is not None and schema["required"] == ["count"]
    assert schema["properties"]["meta"]["properties"]["ok"] == {"type": "boolean", "description": "Ok"}
    assert schema["properties"]["missing"]["default"] == 0.5


async def test_a_required_output_without_a_value_fails_the_workflow() -> None:
    workflow = build(
        [{"id": "a", "tool": "x/a"}],
        catalog_for("x/a"),
        output={
            "properties": {"v": {"type": "string", "description": "V", "value": "{{ steps.a.output.nope }}"}},
            "required": ["v"],
        },
    )
    result = await workflow.run({}, FakeCalls().context())
    assert result.is_error and meta(result)["status"] == "failed"
    assert "output" in texts(result)[0]


async def test_output_text_that_does_not_fit_uses_the_default() -> None:
    workflow = build(
        [{"id": "a", "tool": "x/a"}],
        catalog_for("x/a"),
        output={
            "properties": {
                "n": {
                    "type": "integer",
                    "description": "N",
                    "value": "{{ steps.a.output.text }}",
                    "default": "4",
                }
            }
        },
    )
    result = await workflow.run({}, FakeCalls(answers={"x__a": "not a number"}).context())
    assert result.structured_content == {"n": 4}


async def test_object_output_values_given_as_json_text_are_parsed() -> None:
    workflow = build(
        [{"id": "a", "tool": "x/a"}],
        catalog_for("x/a"),
        output={
            "properties": {"o": {"type": "object", "description": "O", "value": "{{ steps.a.output.text }}"}}
        },
    )
    result = await workflow.run({}, FakeCalls(answers={"x__a": '{"k": [1]}'}).context())
    assert result.structured_content == {"o": {"k": [1]}}


# -- secrets ---------------------------------------------------------------------------------------------------


async def test_secret_parameters_never_appear_in_error_messages() -> None:
    parameters = {
        "type": "object",
        "properties": {
            "token": {"type": "string", "writeOnly": True},
            "pw": {"type": "string", "format": "password"},
        },
    }
    backend = FakeCalls(
        answers={"x__login": lambda args: error(f"bad credentials {args['token']} / {args['pw']}")}
    )
    workflow = build(
        [
            {
                "id": "login",
                "tool": "x/login",
                "arguments": {"token": "{{ params.token }}", "pw": "{{ params.pw }}"},
            }
        ],
        catalog_for("x/login"),
        parameters=parameters,
    )
    result = await workflow.run({"token": "tok-SECRET-1", "pw": "hunter2!"}, backend.context())
    rendered = str(result.model_dump()) + str(meta(result))
    assert "tok-SECRET-1" not in rendered and "hunter2!" not in rendered
    assert f"bad credentials {REDACTED} / {REDACTED}" in texts(result)[0]


# -- progress, checkpoints, resume ------------------------------------------------------------------------


async def test_a_progress_notification_per_finished_step() -> None:
    reports: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reports.append((done, total, message))

    workflow = build(
        [
            {"id": "a", "tool": "x/a"},
            {"id": "b", "tool": "x/b", "dependsOn": ["a"], "condition": "{{ false }}"},
        ],
        catalog_for("x/a", "x/b"),
    )
    await workflow.run({}, FakeCalls().context(progress=progress))
    assert reports == [(1, 2, "step a completed"), (2, 2, "step b skipped")]


async def test_steps_are_checkpointed_and_a_resumed_run_skips_completed_steps() -> None:
    store = MemoryRunStore()
    record = RunRecord(id="r1", tool="wf", kind="workflow")
    await store.start_run(record)
    catalog = catalog_for("x/a", "x/b", "x/c")
    steps = [
        {"id": "a", "tool": "x/a"},
        {"id": "b", "tool": "x/b", "dependsOn": ["a"], "arguments": {"v": "{{ steps.a.output.v }}"}},
        {"id": "c", "tool": "x/c", "dependsOn": ["b"], "arguments": {"v": "{{ steps.b.output.text }}"}},
    ]
    workflow = build(steps, catalog)
    first = FakeCalls(answers={"x__a": {"v": 1}, "x__b": "from b", "x__c": error("c is down")})
    result = await workflow.run({}, first.context(runs=store, run_id="r1"))
    assert result.is_error
    saved = await store.get_run("r1")
    assert saved is not None and [s.id for s in saved.steps] == ["a", "b", "c"]
    assert saved.state["steps"]["a"]["output"] == {"v": 1} and saved.state["steps"]["c"]["status"] == "failed"

    second = FakeCalls()
    resumed = await workflow.run({}, second.context(runs=store, run_id="r1", resume=saved))
    assert not resumed.is_error
    assert second.calls == [("x__c", {"v": "from b"})]
    steps_meta = meta(resumed)["steps"]
    assert [s.get("resumed", False) for s in steps_meta] == [True, True, False]


async def test_a_failing_run_store_does_not_fail_the_workflow() -> None:
    class BrokenStore(MemoryRunStore):
        async def checkpoint(self, run_id: str, step: Any, state: Any = None) -> None:
            raise OSError("disk full")

    workflow = build([{"id": "a", "tool": "x/a"}], catalog_for("x/a"))
    result = await workflow.run({}, FakeCalls().context(runs=BrokenStore(), run_id="r"))
    assert not result.is_error


# -- building ---------------------------------------------------------------------------------------------------


def test_unknown_tools_are_build_errors_with_their_paths() -> None:
    defn = WorkflowDef.model_validate(
        {
            "name": "w",
            "description": "d",
            "steps": [
                {"id": "a", "tool": "x/known"},
                {"id": "b", "tool": "x/unknown"},
                {"id": "c", "type": "forEach", "collection": "[1]", "step": {"tool": "y/missing"}},
            ],
        }
    )
    with pytest.raises(BuildError) as caught:
        build_workflow(defn, catalog_for("x/known"))
    assert [path for path, _ in caught.value.issues] == ["steps[1].tool", "steps[2].step.tool"]
    assert "x/unknown" in str(caught.value)


def test_a_workflow_may_call_another_composite_but_not_itself() -> None:
    catalog = FakeCatalog().add("x/a").add("helper", composite="workflow", references=["x__a"])
    workflow = build([{"id": "h", "tool": "helper"}], catalog)
    assert workflow.references == frozenset({"helper"})
    catalog.add("wf", composite="workflow", references=["wf"])
    with pytest.raises(BuildError, match="cannot call itself"):
        build([{"id": "me", "tool": "wf"}], catalog)


def test_a_cycle_through_other_composites_is_a_build_error_naming_it() -> None:
    catalog = FakeCatalog().add("first", composite="workflow", references=["second"])
    catalog.add("second", composite="router", references=["wf"])
    with pytest.raises(BuildError, match="wf → first → second"):
        build([{"id": "f", "tool": "first"}], catalog)


def test_the_tool_advertises_parameters_and_derived_annotations() -> None:
    catalog = (
        FakeCatalog()
        .add("x/read", read_only=True)
        .add("x/also", read_only=True)
        .add("x/rm", destructive=True)
    )
    parameters = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    reading = build(
        [{"id": "a", "tool": "x/read"}, {"id": "b", "tool": "x/also"}], catalog, parameters=parameters
    )
    assert reading.tool.input_schema == parameters and reading.tool.description == "A test workflow"
    assert reading.tool.annotations is not None and reading.tool.annotations.read_only_hint is True
    writing = build([{"id": "a", "tool": "x/read"}, {"id": "b", "tool": "x/rm"}], catalog)
    assert writing.tool.annotations is not None
    assert (
        writing.tool.annotations.read_only_hint is None and writing.tool.annotations.destructive_hint is True
    )
    explicit = build(
        [{"id": "b", "tool": "x/rm"}], catalog, annotations={"destructiveHint": False, "title": "T"}
    )
    assert explicit.tool.annotations is not None and explicit.tool.annotations.destructive_hint is False


def test_build_rejects_a_definition_with_static_issues() -> None:
    defn = WorkflowDef.model_validate(
        {"name": "w", "description": "d", "steps": [{"id": "a", "tool": "x/a", "dependsOn": ["a"]}]}
    )
    with pytest.raises(BuildError, match="depend on itself"):
        build_workflow(defn, catalog_for("x/a"))


async def test_templates_see_step_errors_attempts_and_the_workflow() -> None:
    backend = FakeCalls(answers={"x__a": error("quota exceeded")})
    workflow = build(
        [
            {"id": "a", "tool": "x/a", "onError": {"action": "continue"}},
            {
                "id": "b",
                "tool": "x/b",
                "dependsOn": ["a"],
                "arguments": {
                    "why": "{{ steps.a.error }}",
                    "tries": "{{ steps.a.attempts }}",
                    "run": "{{ workflow.id }}",
                    "name": "{{ workflow.name }}",
                    "done": "{{ workflow.step_count }}",
                    "at": "{{ workflow.started_at[:4] }}",
                },
            },
        ],
        catalog_for("x/a", "x/b"),
    )
    await workflow.run({}, backend.context(run_id="run-7"))
    arguments = backend.calls[-1][1]
    assert arguments["why"] == "quota exceeded" and arguments["tries"] == 1
    assert (arguments["run"], arguments["name"], arguments["done"]) == ("run-7", "wf", 0)
    assert arguments["at"].isdigit()


async def test_a_workflow_calls_another_composite_through_the_executor() -> None:
    catalog = FakeCatalog().add("inner_flow", composite="workflow", references=["x__a"])
    backend = FakeCalls(answers={"inner_flow": {"nested": True}})
    workflow = build([{"id": "n", "tool": "inner_flow"}], catalog)
    result = await workflow.run({}, backend.context())
    assert backend.calls == [("inner_flow", {})] and result.structured_content == {"nested": True}
