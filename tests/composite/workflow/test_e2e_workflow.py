"""Workflows end to end (seed 003, SPEC §2–3): ToolHive's test scenarios as a checklist, against real
stdio MCP backends behind one `Gateway`, and through the MCP front over streamable HTTP.

Two testserver processes (`alpha`, `beta`) serve the checklist; direct calls
are recorded, so run records prove which backend calls a workflow made (and
which it did not). Parallelism is proven from the `sleep` tool's own start/end
timestamps, never from wall-clock thresholds. Seed 003's four complete
examples run unchanged against `tests/servers/opsserver.py` playing kubectl,
slack, prometheus, jira, registry and metrics; the demo's `research_note`
runs against the demo's own backends.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from support.cli import toolweave_here_async
from support.configs import stdio_testserver, toml_value, write_toml
from support.paths import PYTHON, ROOT, SERVERS
from support.results import inner_records, meta, texts
from toolweave import Gateway

pytestmark = pytest.mark.asyncio(loop_scope="module")

OPSSERVER = SERVERS / "opsserver.py"
EXAMPLES = ROOT / "examples" / "toolhive"
DEMO = ROOT / "examples" / "demo.toml"
OPS_BACKENDS = ["kubectl", "slack", "prometheus", "jira", "registry", "metrics"]

CONFIG = """
[gateway]
record_direct_calls = true

{alpha}
{beta}

# -- composites the workflows call -----------------------------------------------------------------
[[composite_tools]]
name = "search_both"
description = "Search alpha and beta at once"
tools = ["alpha/search", "beta/search"]
order = "declared"

[[composite_tools]]
name = "pick_adder"
description = "Add on alpha, or on beta for big numbers"
default_operation = "small"

[[composite_tools.operations]]
slug = "small"
tool = "alpha/add"

[[composite_tools.operations]]
slug = "big"
tool = "beta/add"

[[composite_tools.rules]]
condition = {{ type = "gt", field = "a", value = 100 }}
operation = "big"

# -- chains with data passing, parameter defaults -------------------------------------------------
[[composite_tools]]
name = "chain"
description = "Add, add again, talk about it, parse it back"
parameters = {{ type = "object", properties = {{ x = {{ type = "integer" }}, y = {{ type = "integer", default = 10 }} }}, required = ["x"] }}

[[composite_tools.steps]]
id = "first"
tool = "alpha/add"
arguments = {{ a = "{{{{ params.x }}}}", b = "{{{{ params.y }}}}" }}

[[composite_tools.steps]]
id = "second"
tool = "beta.add"
dependsOn = ["first"]
arguments = {{ a = "{{{{ steps.first.output.sum }}}}", b = "1{{{{ steps.first.output.sum }}}}" }}

[[composite_tools.steps]]
id = "say"
tool = "alpha__text_only"
dependsOn = ["second"]
arguments = {{ text = "{{{{ {{'n': steps.second.output.sum, 'via': steps.first.status}} | tojson }}}}" }}

[[composite_tools.steps]]
id = "parsed"
tool = "beta/add"
dependsOn = ["say"]
arguments = {{ a = "{{{{ (steps.say.output.text | fromjson).n }}}}", b = 0 }}

# -- retries ----------------------------------------------------------------------------------------
[[composite_tools]]
name = "retrying"
description = "Call a flaky tool with retries"
parameters = {{ type = "object", properties = {{ key = {{ type = "string" }}, fail_times = {{ type = "integer" }} }}, required = ["key", "fail_times"] }}

[[composite_tools.steps]]
id = "call"
tool = "alpha/flaky"
arguments = {{ key = "{{{{ params.key }}}}", fail_times = "{{{{ params.fail_times }}}}" }}
onError = {{ action = "retry", retryCount = 3, retryDelay = "10ms" }}

[[composite_tools]]
name = "retrying_toolhive"
description = "ToolHive's spelling: maxRetries"
parameters = {{ type = "object", properties = {{ key = {{ type = "string" }} }}, required = ["key"] }}

[[composite_tools.steps]]
id = "call"
tool = "alpha.flaky"
arguments = {{ key = "{{{{ params.key }}}}", fail_times = 1 }}
onError = {{ action = "retry", maxRetries = 1, retryDelay = "10ms" }}

# -- conditions -------------------------------------------------------------------------------------
[[composite_tools]]
name = "maybe_bump"
description = "Increment only when asked to"
parameters = {{ type = "object", properties = {{ go = {{ type = "string", default = "no" }} }} }}

[[composite_tools.steps]]
id = "bump"
tool = "alpha/increment"
condition = "{{{{ params.go }}}}"
defaultResults = {{ value = -1 }}

[[composite_tools.steps]]
id = "report"
tool = "beta/echo"
dependsOn = ["bump"]
arguments = {{ text = "value={{{{ steps.bump.output.value }}}} status={{{{ steps.bump.status }}}}" }}

# -- timeouts ---------------------------------------------------------------------------------------
[[composite_tools]]
name = "slow_workflow"
description = "A workflow that outlives its timeout"
timeout = "300ms"

[[composite_tools.steps]]
id = "fast"
tool = "alpha/sleep"
arguments = {{ seconds = 0, label = "fast" }}

[[composite_tools.steps]]
id = "slow"
tool = "alpha/sleep"
dependsOn = ["fast"]
arguments = {{ seconds = 5, label = "slow" }}

[[composite_tools.steps]]
id = "after"
tool = "beta/echo"
dependsOn = ["slow"]
arguments = {{ text = "never" }}

[[composite_tools]]
name = "slow_step"
description = "A step that outlives its timeout, retries included"

[[composite_tools.steps]]
id = "slow"
tool = "alpha/sleep"
arguments = {{ seconds = 5, label = "slow-step" }}
timeout = "200ms"
onError = {{ action = "retry", retryCount = 3, retryDelay = "10ms" }}

[[composite_tools.steps]]
id = "after"
tool = "beta/echo"
dependsOn = ["slow"]
arguments = {{ text = "never" }}

[[composite_tools]]
name = "slow_step_continue"
description = "A timed-out step whose defaults carry the workflow on"

[[composite_tools.steps]]
id = "slow"
tool = "alpha/sleep"
arguments = {{ seconds = 5, label = "slow-step-continue" }}
timeout = "200ms"
onError = {{ action = "continue" }}
defaultResults = {{ label = "too slow" }}

[[composite_tools.steps]]
id = "after"
tool = "beta/echo"
dependsOn = ["slow"]
arguments = {{ text = "{{{{ steps.slow.output.label }}}} ({{{{ steps.slow.status }}}})" }}

# -- parallel join, and steps that start as soon as their own dependencies finish --------------------
[[composite_tools]]
name = "join"
description = "Two sleeps side by side, then a third after both"

[[composite_tools.steps]]
id = "left"
tool = "alpha/sleep"
arguments = {{ seconds = 0.3, label = "left" }}

[[composite_tools.steps]]
id = "right"
tool = "beta/sleep"
arguments = {{ seconds = 0.3, label = "right" }}

[[composite_tools.steps]]
id = "joined"
tool = "alpha/sleep"
dependsOn = ["left", "right"]
arguments = {{ seconds = 0, label = "{{{{ steps.left.output.label }}}}+{{{{ steps.right.output.label }}}}" }}

[composite_tools.output.properties]
left = {{ type = "object", description = "left", value = "{{{{ steps.left.output }}}}" }}
right = {{ type = "object", description = "right", value = "{{{{ steps.right.output }}}}" }}
joined = {{ type = "object", description = "joined", value = "{{{{ steps.joined.output }}}}" }}

[[composite_tools]]
name = "eager"
description = "A quick chain next to a long step"

[[composite_tools.steps]]
id = "quick"
tool = "alpha/sleep"
arguments = {{ seconds = 0.05, label = "quick" }}

[[composite_tools.steps]]
id = "long"
tool = "beta/sleep"
arguments = {{ seconds = 0.5, label = "long" }}

[[composite_tools.steps]]
id = "after_quick"
tool = "alpha/sleep"
dependsOn = ["quick"]
arguments = {{ seconds = 0, label = "after_quick" }}

[composite_tools.output.properties]
long = {{ type = "object", description = "long", value = "{{{{ steps.long.output }}}}" }}
after_quick = {{ type = "object", description = "after quick", value = "{{{{ steps.after_quick.output }}}}" }}

# -- forEach ----------------------------------------------------------------------------------------
[[composite_tools]]
name = "each"
description = "Echo a list through one tool, then echo every item"
parameters = {{ type = "object", properties = {{ words = {{ type = "array", items = {{ type = "string" }} }} }}, required = ["words"] }}

[[composite_tools.steps]]
id = "listed"
tool = "alpha/text_only"
arguments = {{ text = "{{{{ params.words | tojson }}}}" }}

[[composite_tools.steps]]
id = "loop"
type = "forEach"
dependsOn = ["listed"]
collection = "{{{{ steps.listed.output.text }}}}"
itemVar = "word"
maxIterations = 5
step = {{ tool = "beta/text_only", arguments = {{ text = "{{{{ index }}}}:{{{{ word }}}}:{{{{ forEach.word | upper }}}}" }} }}

[[composite_tools]]
name = "each_sleep"
description = "The same sleeps one at a time and all at once"
parameters = {{ type = "object", properties = {{ labels = {{ type = "array" }} }}, required = ["labels"] }}

[[composite_tools.steps]]
id = "serial"
type = "forEach"
collection = "{{{{ params.labels }}}}"
maxParallel = 1
step = {{ tool = "alpha/sleep", arguments = {{ seconds = 0.1, label = "serial-{{{{ item }}}}" }} }}

[[composite_tools.steps]]
id = "parallel"
type = "forEach"
collection = "{{{{ params.labels }}}}"
step = {{ tool = "beta/sleep", arguments = {{ seconds = 0.2, label = "parallel-{{{{ item }}}}" }} }}

[composite_tools.output.properties]
serial = {{ type = "array", description = "one at a time", value = "{{{{ steps.serial.output.iterations | map(attribute='output') | list }}}}" }}
parallel = {{ type = "array", description = "all at once", value = "{{{{ steps.parallel.output.iterations | map(attribute='output') | list }}}}" }}

[[composite_tools]]
name = "each_failing"
description = "One failing iteration, tolerated and not"
failureMode = "continue"
parameters = {{ type = "object", properties = {{ items = {{ type = "array" }} }}, required = ["items"] }}

[[composite_tools.steps]]
id = "tolerant"
type = "forEach"
collection = "{{{{ params.items }}}}"
onError = {{ action = "continue" }}
step = {{ tool = "alpha/flaky", arguments = {{ key = "{{{{ item.key }}}}-tolerant", fail_times = "{{{{ item.fail }}}}" }} }}

[[composite_tools.steps]]
id = "strict"
type = "forEach"
collection = "{{{{ params.items }}}}"
maxParallel = 1
step = {{ tool = "alpha/flaky", arguments = {{ key = "{{{{ item.key }}}}-strict", fail_times = "{{{{ item.fail }}}}" }} }}

# -- typed output: coercion and defaults ------------------------------------------------------------
[[composite_tools]]
name = "typed"
description = "Text in, typed numbers out"
parameters = {{ type = "object", properties = {{ n = {{ type = "string" }}, note = {{ type = "string" }} }}, required = ["n"] }}

[[composite_tools.steps]]
id = "text"
tool = "alpha/text_only"
arguments = {{ text = "{{{{ params.n }}}}" }}

[[composite_tools.steps]]
id = "sum"
tool = "beta/add"
dependsOn = ["text"]
arguments = {{ a = "{{{{ steps.text.output.text }}}}", b = "1" }}

[composite_tools.output]
required = ["total", "parsed"]

[composite_tools.output.properties]
total = {{ type = "integer", description = "n + 1", value = "{{{{ steps.sum.output.sum }}}}" }}
parsed = {{ type = "integer", description = "n, from text", value = "{{{{ steps.text.output.text }}}}" }}
big = {{ type = "boolean", description = "n > 100", value = "{{{{ steps.sum.output.sum > 100 }}}}" }}
note = {{ type = "string", description = "the caller's note", value = "{{{{ params.note }}}}", default = "no note" }}
wrapped = {{ type = "object", description = "nested", properties = {{ text = {{ type = "string", description = "echoed", value = "{{{{ steps.text.output.text }}}}" }} }} }}

[[composite_tools]]
name = "typed_required"
description = "A required output that may have no value"
parameters = {{ type = "object", properties = {{ note = {{ type = "string" }} }} }}

[[composite_tools.steps]]
id = "say"
tool = "alpha/echo"
arguments = {{ text = "hi" }}

[composite_tools.output]
required = ["note"]

[composite_tools.output.properties]
note = {{ type = "string", description = "the caller's note", value = "{{{{ params.note }}}}" }}

# -- the sandbox ------------------------------------------------------------------------------------
[[composite_tools]]
name = "escapes"
description = "Every step tries to leave the sandbox"
failureMode = "continue"
parameters = {{ type = "object", properties = {{ p = {{ type = "object" }} }} }}

[[composite_tools.steps]]
id = "klass"
tool = "alpha/echo"
arguments = {{ text = "{{{{ ''.__class__ }}}}" }}

[[composite_tools.steps]]
id = "subclasses"
tool = "alpha/echo"
arguments = {{ text = "{{{{ ''.__class__.__mro__[1].__subclasses__() }}}}" }}

[[composite_tools.steps]]
id = "globals"
tool = "alpha/echo"
arguments = {{ text = "x{{{{ params.p.__init__.__globals__ }}}}" }}

[[composite_tools.steps]]
id = "mutate"
tool = "alpha/echo"
arguments = {{ text = "{{{{ params.p.update({{'x': 1}}) }}}}" }}

[[composite_tools.steps]]
id = "huge"
tool = "alpha/echo"
arguments = {{ text = "{{{{ 'a' * 1000000000 }}}}" }}

# -- workflows calling other composites, and the failure modes -------------------------------------
[[composite_tools]]
name = "via_composites"
description = "A fan-out and a router inside a workflow"
parameters = {{ type = "object", properties = {{ q = {{ type = "string" }}, a = {{ type = "integer" }} }}, required = ["q", "a"] }}

[[composite_tools.steps]]
id = "found"
tool = "search_both"
arguments = {{ query = "{{{{ params.q }}}}" }}

[[composite_tools.steps]]
id = "added"
tool = "pick_adder"
arguments = {{ a = "{{{{ params.a }}}}", b = "{{{{ steps.found.output.results | length }}}}" }}
dependsOn = ["found"]

[[composite_tools.steps]]
id = "summary"
tool = "beta/echo"
dependsOn = ["added"]
arguments = {{ text = "{{{{ steps.found.output.results | map(attribute='tool') | join(',') }}}} -> {{{{ steps.added.output.sum }}}}" }}

[[composite_tools]]
name = "nested"
description = "A workflow calling a workflow"
[[composite_tools.steps]]
id = "inner"
tool = "chain"
arguments = {{ x = 1 }}

[[composite_tools]]
name = "aborting"
description = "A failure stops everything"

[[composite_tools.steps]]
id = "bad"
tool = "alpha/fail"
arguments = {{ message = "alpha broke" }}

[[composite_tools.steps]]
id = "other"
tool = "beta/sleep"
arguments = {{ seconds = 5, label = "aborted" }}

[[composite_tools.steps]]
id = "after"
tool = "beta/echo"
dependsOn = ["bad"]
arguments = {{ text = "never" }}

[[composite_tools]]
name = "continuing"
description = "A failure does not stop the rest"
failureMode = "continue"

[[composite_tools.steps]]
id = "bad"
tool = "alpha/fail"
arguments = {{ message = "alpha broke" }}

[[composite_tools.steps]]
id = "other"
tool = "beta/echo"
arguments = {{ text = "other ran" }}

[[composite_tools.steps]]
id = "after"
tool = "beta/echo"
dependsOn = ["bad"]
arguments = {{ text = "after saw {{{{ steps.bad.status }}}}" }}
"""


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def gateway(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    directory = tmp_path_factory.mktemp("workflow-e2e")
    text = CONFIG.format(alpha=stdio_testserver("alpha"), beta=stdio_testserver("beta"))
    async with Gateway.from_config(write_toml(directory, text)) as gw:
        assert gw.catalog.degraded == {}, gw.catalog.issues
        assert gw.catalog.issues == [], gw.catalog.issues
        yield gw


def statuses(result: Any) -> dict[str, str]:
    return {step["id"]: step["status"] for step in meta(result)["steps"]}


def attempts(result: Any) -> dict[str, int]:
    return {step["id"]: step["attempts"] for step in meta(result)["steps"]}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def counter(gateway: Gateway, backend: str) -> int:
    return (await gateway.call(f"{backend}__counter", {})).structured_content["value"]


async def calls_to(gateway: Gateway, tool: str, **matching: Any) -> list[Any]:
    """Recorded direct calls of `tool` whose arguments include `matching`, oldest first."""
    records = await inner_records(gateway, tool)
    found = [r for r in records if all((r.arguments or {}).get(k) == v for k, v in matching.items())]
    return sorted(found, key=lambda r: r.started_at)


def overlap(first: dict[str, Any], second: dict[str, Any]) -> bool:
    return first["start"] < second["end"] and second["start"] < first["end"]


# -- chains with data passing ------------------------------------------------------------------------


async def test_a_chain_passes_data_from_step_to_step(gateway: Gateway) -> None:
    result = await gateway.call("chain", {"x": 3, "y": 4})
    assert not result.is_error, texts(result)
    # first: 3+4=7; second: 7 + int("17") = 24; say: JSON text; parsed: fromjson(...).n + 0
    assert result.structured_content == {"sum": 24}
    assert statuses(result) == dict.fromkeys(["first", "second", "say", "parsed"], "completed")
    (said,) = [r for r in await calls_to(gateway, "alpha__text_only") if '"n":24' in r.arguments["text"]]
    assert said.arguments == {"text": '{"n":24,"via":"completed"}'}
    # native values stay native; text is coerced to the target's integer parameter
    (second,) = await calls_to(gateway, "beta__add", a=7, b=17)
    assert second.status == "completed"


async def test_parameter_defaults_apply_and_the_caller_wins(gateway: Gateway) -> None:
    defaulted = await gateway.call("chain", {"x": 1})
    assert defaulted.structured_content == {"sum": 11 + 111}  # y = 10 by default
    given = await gateway.call("chain", {"x": 1, "y": 0})
    assert given.structured_content == {"sum": 1 + 11}
    missing = await gateway.call("chain", {})
    assert missing.is_error and "missing required argument 'x'" in texts(missing)[0]


async def test_meta_names_the_kind_the_steps_and_the_run(gateway: Gateway) -> None:
    result = await gateway.call("chain", {"x": 2})
    info = meta(result)
    assert info["kind"] == "workflow" and info["status"] == "completed"
    assert [step["id"] for step in info["steps"]] == ["first", "second", "say", "parsed"]
    for step in info["steps"]:
        assert set(step) >= {"id", "status", "attempts", "latency_ms"}
        assert step["attempts"] == 1 and step["latency_ms"] >= 0
    run = await gateway.runs.get_run(info["run_id"])
    assert (run.tool, run.kind, run.status) == ("chain", "workflow", "completed")
    assert [(s.id, s.status) for s in run.steps] == [(s["id"], s["status"]) for s in info["steps"]]
    assert info["latency_ms"] >= max(step["latency_ms"] for step in info["steps"])


# -- retry counts ----------------------------------------------------------------------------------


async def test_retries_are_counted_against_a_real_flaky_tool(gateway: Gateway) -> None:
    key = unique("twice")
    result = await gateway.call("retrying", {"key": key, "fail_times": 2})
    assert not result.is_error, texts(result)
    assert result.structured_content == {"key": key, "calls": 3}
    assert attempts(result) == {"call": 3} and statuses(result) == {"call": "completed"}
    made = await calls_to(gateway, "alpha__flaky", key=key)
    assert [r.status for r in made] == ["failed", "failed", "completed"]


async def test_retries_run_out(gateway: Gateway) -> None:
    key = unique("always")
    result = await gateway.call("retrying", {"key": key, "fail_times": 10})
    assert result.is_error
    assert attempts(result) == {"call": 4}  # the call and its 3 retries
    assert texts(result)[0] == (
        f"Workflow 'retrying' failed.\nStep 'call' failed: Error executing tool flaky: flaky {key}: failure 4 of 10"
    )
    assert len(await calls_to(gateway, "alpha__flaky", key=key)) == 4
    assert meta(result)["status"] == "failed"


async def test_toolhive_max_retries_spelling(gateway: Gateway) -> None:
    key = unique("once")
    result = await gateway.call("retrying_toolhive", {"key": key})
    assert not result.is_error and attempts(result) == {"call": 2}


# -- conditional skip ----------------------------------------------------------------------------


async def test_a_false_condition_skips_and_its_default_results_flow_on(gateway: Gateway) -> None:
    before = await counter(gateway, "alpha")
    skipped = await gateway.call("maybe_bump", {})  # go defaults to "no"
    assert not skipped.is_error, texts(skipped)
    assert statuses(skipped) == {"bump": "skipped", "report": "completed"}
    assert texts(skipped) == ["value=-1 status=skipped"]
    assert await counter(gateway, "alpha") == before
    ran = await gateway.call("maybe_bump", {"go": "yes"})
    assert statuses(ran) == {"bump": "completed", "report": "completed"}
    assert texts(ran) == [f"value={before + 1} status=completed"]
    assert await counter(gateway, "alpha") == before + 1


async def test_a_condition_that_is_not_yes_or_no_fails_the_step(gateway: Gateway) -> None:
    before = await counter(gateway, "alpha")
    result = await gateway.call("maybe_bump", {"go": "maybe"})
    assert result.is_error
    assert "Step 'bump' failed: condition: a condition must evaluate to true or false" in texts(result)[0]
    assert statuses(result) == {"bump": "failed", "report": "cancelled"}
    assert await counter(gateway, "alpha") == before


# -- timeouts --------------------------------------------------------------------------------------


async def test_the_workflow_timeout_cancels_running_steps(gateway: Gateway) -> None:
    async with asyncio.timeout(4):  # a hang guard; the slow step alone would take 5 s
        result = await gateway.call("slow_workflow", {})
    assert result.is_error
    assert texts(result) == ["Workflow 'slow_workflow' timed out after 0.3s. Cancelled steps: slow, after."]
    assert statuses(result) == {"fast": "completed", "slow": "cancelled", "after": "cancelled"}
    assert meta(result)["status"] == "timed_out"
    run = await gateway.runs.get_run(meta(result)["run_id"])
    assert run.status == "timed_out"
    assert await calls_to(gateway, "beta__echo", text="never") == []
    # the backend is still fine afterwards
    assert texts(await gateway.call("alpha__echo", {"text": "alive"})) == ["alive"]


async def test_a_step_timeout_covers_all_its_attempts(gateway: Gateway) -> None:
    async with asyncio.timeout(4):
        result = await gateway.call("slow_step", {})
    assert result.is_error
    assert "Step 'slow' failed: timed out after 200ms (attempt 1)" in texts(result)[0]
    assert statuses(result) == {"slow": "failed", "after": "cancelled"}
    assert attempts(result)["slow"] == 1


async def test_a_timed_out_step_can_be_continued_past_with_defaults(gateway: Gateway) -> None:
    async with asyncio.timeout(4):
        result = await gateway.call("slow_step_continue", {})
    assert not result.is_error, texts(result)
    assert statuses(result) == {"slow": "failed", "after": "completed"}
    assert texts(result) == ["too slow (failed)"]


# -- parallel join ---------------------------------------------------------------------------------


async def test_independent_steps_run_in_parallel_and_the_join_waits_for_both(gateway: Gateway) -> None:
    result = await gateway.call("join", {})
    assert not result.is_error, texts(result)
    left, right, joined = (result.structured_content[k] for k in ("left", "right", "joined"))
    assert (left["label"], right["label"], joined["label"]) == ("left", "right", "left+right")
    assert overlap(left, right)  # the two sleeps ran at the same time, in two processes
    assert joined["start"] >= max(left["end"], right["end"])  # the join started after both ended


async def test_a_step_starts_when_its_own_dependencies_finish(gateway: Gateway) -> None:
    """ToolHive runs level by level; here `after_quick` does not wait for the unrelated `long`."""
    result = await gateway.call("eager", {})
    assert not result.is_error, texts(result)
    long, after_quick = result.structured_content["long"], result.structured_content["after_quick"]
    assert after_quick["start"] < long["end"]


# -- forEach ---------------------------------------------------------------------------------------


async def test_for_each_runs_one_real_call_per_item(gateway: Gateway) -> None:
    words = [unique("w") for _ in range(3)]
    result = await gateway.call("each", {"words": words})
    assert not result.is_error, texts(result)
    loop = result.structured_content
    assert (loop["count"], loop["completed"], loop["failed"]) == (3, 3, 0)
    assert [it["output"] for it in loop["iterations"]] == [
        {"text": f"{i}:{w}:{w.upper()}"} for i, w in enumerate(words)
    ]
    assert [it["item"] for it in loop["iterations"]] == words
    for index, word in enumerate(words):
        assert len(await calls_to(gateway, "beta__text_only", text=f"{index}:{word}:{word.upper()}")) == 1


async def test_for_each_over_max_iterations_fails_before_any_call(gateway: Gateway) -> None:
    before = len(await inner_records(gateway, "beta__text_only"))
    result = await gateway.call("each", {"words": [unique("w") for _ in range(6)]})
    assert result.is_error
    assert (
        "Step 'loop' failed: collection: collection has 6 items, more than maxIterations (5)"
        in texts(result)[0]
    )
    assert len(await inner_records(gateway, "beta__text_only")) == before


async def test_for_each_max_parallel(gateway: Gateway) -> None:
    result = await gateway.call("each_sleep", {"labels": ["a", "b", "c"]})
    assert not result.is_error, texts(result)
    serial, parallel = result.structured_content["serial"], result.structured_content["parallel"]
    assert [it["label"] for it in serial] == ["serial-a", "serial-b", "serial-c"]
    assert [it["label"] for it in parallel] == ["parallel-a", "parallel-b", "parallel-c"]
    # default maxParallel: every iteration overlaps every other; maxParallel 1: none overlaps the next
    assert all(overlap(x, y) for x in parallel for y in parallel if x is not y)
    spans = sorted(serial, key=lambda it: it["start"])
    assert all(earlier["end"] <= later["start"] for earlier, later in itertools.pairwise(spans))


async def test_a_failed_iteration_fails_the_step_unless_continued(gateway: Gateway) -> None:
    good, bad = unique("good"), unique("bad")
    items = [{"key": good, "fail": 0}, {"key": bad, "fail": 5}, {"key": unique("late"), "fail": 0}]
    result = await gateway.call("each_failing", {"items": items})
    assert result.is_error
    assert statuses(result) == {"tolerant": "completed", "strict": "failed"}
    first = texts(result)[0]
    assert first.startswith("Workflow 'each_failing' failed.\nStep 'strict' failed: iteration 1 failed: ")
    assert f"flaky {bad}-strict: failure 1 of 5" in first
    # tolerant: every iteration ran and the failure is counted (ToolHive's semantics)
    assert len(await calls_to(gateway, "alpha__flaky", key=f"{items[2]['key']}-tolerant")) == 1
    run = await gateway.runs.get_run(meta(result)["run_id"])
    tolerant = run.state["steps"]["tolerant"]["output"]  # the checkpointed step outputs
    assert (tolerant["count"], tolerant["completed"], tolerant["failed"]) == (3, 2, 1)
    # strict, one at a time: the iteration after the failed one never ran
    assert await calls_to(gateway, "alpha__flaky", key=f"{items[2]['key']}-strict") == []
    # failureMode continue keeps the rest: the last declared step's (strict) partial output
    partial = result.structured_content
    assert (partial["count"], partial["completed"], partial["failed"]) == (3, 1, 1)
    assert [it["status"] for it in partial["iterations"]] == ["completed", "failed", "cancelled"]


# -- output coercion and defaults -------------------------------------------------------------------


async def test_output_is_coerced_to_its_declared_types(gateway: Gateway) -> None:
    result = await gateway.call("typed", {"n": "41"})
    assert not result.is_error, texts(result)
    assert result.structured_content == {
        "total": 42,
        "parsed": 41,
        "big": False,
        "note": "no note",  # params.note is not given: the property's default
        "wrapped": {"text": "41"},
    }
    given = await gateway.call("typed", {"n": "200", "note": "hello"})
    assert given.structured_content["note"] == "hello" and given.structured_content["big"] is True
    tool = next(t for t in gateway.list_tools() if t.name == "typed")
    assert tool.output_schema["required"] == ["total", "parsed"]
    assert tool.output_schema["properties"]["total"] == {"type": "integer", "description": "n + 1"}
    assert tool.output_schema["properties"]["note"]["default"] == "no note"


async def test_text_that_cannot_be_coerced_fails_the_step_naming_the_argument(gateway: Gateway) -> None:
    before = len(await inner_records(gateway, "beta__add"))
    result = await gateway.call("typed", {"n": "forty-one"})
    assert result.is_error
    assert "Step 'sum' failed: argument a: expected integer" in texts(result)[0]
    assert "forty-one" not in texts(result)[0].split("Step 'sum' failed:")[1]  # never quotes the value
    assert len(await inner_records(gateway, "beta__add")) == before


async def test_a_required_output_without_a_value_fails_the_workflow(gateway: Gateway) -> None:
    ok = await gateway.call("typed_required", {"note": "n"})
    assert ok.structured_content == {"note": "n"}
    result = await gateway.call("typed_required", {})
    assert result.is_error
    assert texts(result)[0].startswith("Workflow 'typed_required' ran, but its output could not be built: ")
    assert "output.note" in texts(result)[0]
    assert statuses(result) == {"say": "completed"} and meta(result)["status"] == "failed"


# -- the sandbox -----------------------------------------------------------------------------------


async def test_sandbox_escapes_fail_and_call_nothing(gateway: Gateway) -> None:
    before = len(await inner_records(gateway, "alpha__echo"))
    result = await gateway.call("escapes", {"p": {"a": 1}})
    assert result.is_error
    assert set(statuses(result).values()) == {"failed"}
    message = texts(result)[0]
    for step in ("klass", "subclasses", "globals", "mutate", "huge"):
        assert f"Step '{step}' failed: " in message
    assert "__class__" in message and "unsafe" in message.lower()
    assert "Step 'huge' failed: repeating a sequence to more than 100000 items is not allowed" in message
    assert "<class" not in message  # nothing leaked
    assert len(await inner_records(gateway, "alpha__echo")) == before


# -- workflows calling other composites -------------------------------------------------------------


async def test_a_workflow_calls_a_fan_out_and_a_router(gateway: Gateway) -> None:
    result = await gateway.call("via_composites", {"q": "needle", "a": 500})
    assert not result.is_error, texts(result)
    # two fan-out targets → b = 2; a = 500 routes to beta
    assert texts(result) == ["alpha__search,beta__search -> 502"]
    runs = await gateway.runs.list_runs(limit=1000)
    kinds = {r.tool: r.kind for r in runs}
    assert kinds["search_both"] == "fanout" and kinds["pick_adder"] == "router"
    (router_run,) = [r for r in runs if r.tool == "pick_adder" and r.arguments == {"a": 500, "b": 2}]
    assert router_run.operation == "big"
    assert len(await calls_to(gateway, "beta__add", a=500, b=2)) == 1


async def test_a_workflow_calls_a_workflow(gateway: Gateway) -> None:
    result = await gateway.call("nested", {})
    assert not result.is_error, texts(result)
    assert meta(result)["steps"][0]["id"] == "inner"
    inner = (await gateway.runs.list_runs(tool="chain", limit=1000))[0]
    assert inner.kind == "workflow" and inner.status == "completed"


# -- failure modes ---------------------------------------------------------------------------------


async def test_abort_cancels_running_steps(gateway: Gateway) -> None:
    async with asyncio.timeout(4):
        result = await gateway.call("aborting", {})
    assert result.is_error
    assert statuses(result) == {"bad": "failed", "other": "cancelled", "after": "cancelled"}
    assert texts(result)[0] == (
        "Workflow 'aborting' failed.\nStep 'bad' failed: Error executing tool fail: alpha broke\n"
        "Cancelled when the workflow stopped: other, after."
    )


async def test_continue_runs_the_rest_and_keeps_it(gateway: Gateway) -> None:
    result = await gateway.call("continuing", {})
    assert result.is_error
    assert statuses(result) == {"bad": "failed", "other": "completed", "after": "completed"}
    first, *rest = texts(result)
    assert first == (
        "Workflow 'continuing' failed.\nStep 'bad' failed: Error executing tool fail: alpha broke\n"
        "Completed steps: other, after."
    )
    assert rest == ["after saw failed"]


# -- over MCP --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_through_the_mcp_front(mcp_url: str, mode: str) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async with Client(mcp_url, mode=mode) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert listed["chain"].input_schema["properties"]["y"]["default"] == 10
        assert listed["typed"].output_schema["required"] == ["total", "parsed"]
        result = await client.call_tool("chain", {"x": 3, "y": 4}, progress_callback=on_progress)
        assert not result.is_error and result.structured_content == {"sum": 24}
        info = (result.meta or {})["toolweave"]
        assert info["kind"] == "workflow" and info["run_id"]
        assert [s["status"] for s in info["steps"]] == ["completed"] * 4
        assert progress == [
            (1.0, 4.0, "step first completed"),
            (2.0, 4.0, "step second completed"),
            (3.0, 4.0, "step say completed"),
            (4.0, 4.0, "step parsed completed"),
        ]
        typed = await client.call_tool("typed", {"n": "41"})
        assert typed.structured_content["total"] == 42


# -- cycles and unknown dependencies: `toolweave validate` -----------------------------------------


@pytest.mark.usefixtures("in_process_testserver")  # what validate says, not its process or the servers'
async def test_validate_reports_cycles_and_unknown_dependencies(tmp_path: Path) -> None:
    text = (
        stdio_testserver("alpha")
        + """
[[composite_tools]]
name = "looped"
description = "Steps in a circle"
[[composite_tools.steps]]
id = "a"
tool = "alpha/echo"
dependsOn = ["c"]
[[composite_tools.steps]]
id = "b"
tool = "alpha/echo"
dependsOn = ["a"]
[[composite_tools.steps]]
id = "c"
tool = "alpha/echo"
dependsOn = ["b"]

[[composite_tools]]
name = "dangling"
description = "Depends on a step that does not exist"
[[composite_tools.steps]]
id = "only"
tool = "alpha/echo"
dependsOn = ["nonexistent"]

[[composite_tools]]
name = "ping"
description = "Calls pong"
[[composite_tools.steps]]
id = "call"
tool = "pong"

[[composite_tools]]
name = "pong"
description = "Calls ping back"
[[composite_tools.steps]]
id = "call"
tool = "ping"

[[composite_tools]]
name = "all_pings"
description = "A fan-out cannot call a workflow"
tools = ["ping", "alpha/echo"]

[[composite_tools]]
name = "typo"
description = "Calls a tool that does not exist"
[[composite_tools.steps]]
id = "call"
tool = "alpha/ecko"

[[composite_tools]]
name = "early_fanout"
description = "Declared before the workflow it (wrongly) targets"
tools = ["late", "alpha/echo"]

[[composite_tools]]
name = "late"
description = "A workflow"
[[composite_tools.steps]]
id = "call"
tool = "alpha/echo"
arguments = { text = "late" }
"""
    )
    path = write_toml(tmp_path, text)
    done = await toolweave_here_async("validate", "-c", str(path), env={"COLUMNS": "400"})
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1, output
    assert "composite_tools[0].steps[0].dependsOn: dependency cycle: a → c → b → a" in output
    assert "composite_tools[1].steps[0].dependsOn" in output and "'nonexistent'" in output
    assert "composite_tools[2]: composites call each other in a cycle: ping → pong → ping" in output
    assert "composite_tools[3]: composites call each other in a cycle: ping → pong → ping" in output
    assert "composite_tools[4]: calls composites that could not be built: ping" in output
    assert "composite_tools[5].steps[0].tool: unknown tool 'alpha/ecko'" in output
    # a fan-out names what is wrong with its target, wherever the target is declared
    assert (
        "composite_tools[6].tools[0]: 'late' is a workflow: routers and fan-outs target backend tools only"
        in output
    )


# -- seed 003's four complete examples -------------------------------------------------------------


def ops_backend(name: str) -> str:
    lines = [
        "[[backends]]",
        f"name = {toml_value(name)}",
        f"command = {toml_value(PYTHON)}",
        f"args = {toml_value([str(OPSSERVER)])}",
        f"env = {toml_value({'OPS_BACKEND': name})}",
    ]
    return "\n".join(lines) + "\n"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def ops(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    directory = tmp_path_factory.mktemp("toolhive-examples")
    # the four composite definitions; a VirtualMCPServer example (a server, not a tool) sits beside them
    files = [
        p
        for p in sorted(EXAMPLES.glob("*.yaml"))
        if "kind: VirtualMCPCompositeToolDefinition" in p.read_text()
    ]
    assert len(files) == 4, files
    text = (
        "composite_tools = ["
        + ", ".join(f"{{ file = {toml_value(str(path))} }}" for path in files)
        + "]\n\n[gateway]\nrecord_direct_calls = true\n\n"
        + "\n".join(ops_backend(name) for name in OPS_BACKENDS)
    )
    async with Gateway.from_config(write_toml(directory, text)) as gw:
        assert gw.catalog.degraded == {} and gw.catalog.issues == [], gw.catalog.issues
        yield gw


async def sent(gateway: Gateway, tool: str) -> list[dict[str, Any]]:
    records = sorted(await inner_records(gateway, tool), key=lambda r: r.started_at)
    return [r.arguments for r in records]


async def test_example_1_simple_deploy(ops: Gateway) -> None:
    result = await ops.call("deploy_app", {"environment": "staging"})
    assert not result.is_error, texts(result)
    assert result.structured_content == {
        "backend": "kubectl",
        "tool": "apply",
        "namespace": "staging",
        "manifest": "app.yaml",
        "applied": True,
    }
    assert statuses(result) == {"apply": "completed"}
    missing = await ops.call("deploy_app", {})
    assert missing.is_error and "missing required argument 'environment'" in texts(missing)[0]


async def test_example_2_deploy_and_verify(ops: Gateway) -> None:
    result = await ops.call("deploy_and_verify", {"environment": "prod-eu"})
    assert not result.is_error, texts(result)
    assert statuses(result) == dict.fromkeys(
        ["validate_config", "apply_deployment", "wait_for_ready", "notify_success"], "completed"
    )
    assert {"namespace": "prod-eu", "replicas": 3, "manifest": "deployment.yaml"} in await sent(
        ops, "kubectl__apply"
    )  # replicas: the parameter default, as an integer
    waited = await sent(ops, "kubectl__wait")
    assert {
        "namespace": "prod-eu",
        "resource": "deployment/myapp",
        "condition": "available",
        "timeout": "5m",
    } in waited
    assert result.structured_content == {
        "backend": "slack",
        "tool": "send",
        "channel": "#deployments",
        "message": "Deployed to prod-eu successfully",
        "sent": True,
    }


async def test_example_2_retries_apply_with_toolhive_defaults(ops: Gateway) -> None:
    """`maxRetries: 3` and no `retryDelay`: ToolHive's default 1 s before the first retry."""
    namespace = unique("flaky")
    result = await ops.call("deploy_and_verify", {"environment": namespace, "replicas": 2})
    assert not result.is_error, texts(result)
    assert attempts(result)["apply_deployment"] == 2
    assert [a["replicas"] for a in await sent(ops, "kubectl__apply") if a["namespace"] == namespace] == [2, 2]
    assert len([a for a in await sent(ops, "kubectl__wait") if a.get("namespace") == namespace]) == 1


async def test_example_2_aborts_when_validation_fails(ops: Gateway) -> None:
    before = len(await sent(ops, "slack__send"))
    result = await ops.call("deploy_and_verify", {"environment": "invalid"})
    assert result.is_error
    assert statuses(result) == {
        "validate_config": "failed",
        "apply_deployment": "cancelled",
        "wait_for_ready": "cancelled",
        "notify_success": "cancelled",
    }
    assert texts(result)[0].startswith(
        "Workflow 'deploy_and_verify' failed.\nStep 'validate_config' failed: "
        "Error executing tool validate: deployment.yaml is not valid in namespace 'invalid'"
    )
    assert [a for a in await sent(ops, "kubectl__apply") if a["namespace"] == "invalid"] == []
    assert len(await sent(ops, "slack__send")) == before


async def test_example_3_investigate_incident(ops: Gateway) -> None:
    result = await ops.call("investigate_incident", {"service": "checkout", "namespace": "shop"})
    assert not result.is_error, texts(result)
    assert statuses(result) == dict.fromkeys(
        ["get_pod_status", "get_recent_logs", "check_recent_events", "query_metrics", "create_report"],
        "completed",
    )
    assert {"namespace": "shop", "selector": "app=checkout", "since": "1h"} in await sent(
        ops, "kubectl__logs"
    )
    assert {
        "query": 'rate(http_requests_total{service="checkout"}[5m])',
        "time": "now",
    } in await sent(ops, "prometheus__query")
    assert result.structured_content["summary"] == "Incident investigation for checkout"


async def test_example_3_continues_past_a_failed_report(ops: Gateway) -> None:
    result = await ops.call(
        "investigate_incident", {"service": "jira-down", "namespace": "shop", "time_range": "6h"}
    )
    assert not result.is_error, texts(result)  # create_report has onError: continue
    assert statuses(result)["create_report"] == "failed"
    assert texts(result)[0] == (
        "Step 'create_report' failed and was continued past: "
        "Error executing tool create_issue: jira is down (503)"
    )
    assert {"namespace": "shop", "selector": "app=jira-down", "since": "6h"} in await sent(
        ops, "kubectl__logs"
    )


async def test_example_4_canary_deployment(ops: Gateway) -> None:
    result = await ops.call("canary_deployment", {"service": "web", "image": "web:2.0"})
    assert not result.is_error, texts(result)
    assert list(statuses(result).values()) == ["completed"] * 7
    patches = await sent(ops, "kubectl__patch")
    assert {"resource": "deployment/web-canary", "image": "web:2.0", "replicas": 10} in patches
    assert {"resource": "deployment/web", "image": "web:2.0"} in patches
    assert {"success_rate": 0.99, "deployment": "web-canary"} in await sent(ops, "metrics__evaluate")
    assert result.structured_content["message"] == "Canary deployment of web promoted to production"


async def test_example_4_does_not_promote_a_failed_canary(ops: Gateway) -> None:
    result = await ops.call(
        "canary_deployment", {"service": "api", "image": "api:9", "success_threshold": 0.1}
    )
    assert result.is_error
    found = statuses(result)
    assert found["validate_metrics"] == "failed"
    assert found["promote_to_production"] == found["notify_success"] == "cancelled"
    failure = "Step 'validate_metrics' failed: Error executing tool evaluate: success rate threshold 0.1"
    assert failure in texts(result)[0]
    assert {"resource": "deployment/api", "image": "api:9"} not in await sent(ops, "kubectl__patch")


# -- the demo ---------------------------------------------------------------------------------------


async def test_the_demo_research_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = str(Path(PYTHON).parent)
    monkeypatch.setenv("PATH", os.pathsep.join([bin_dir, os.environ.get("PATH", "")]))
    monkeypatch.setenv("TOOLWEAVE_DEMO_DB", str(tmp_path / "demo.db"))
    async with Gateway.from_config(DEMO) as gateway:
        assert gateway.catalog.degraded == {}, gateway.catalog.issues
        result = await gateway.call("research_note", {"topic": "deploy"})
        assert not result.is_error, texts(result)
        assert statuses(result) == {"lookup": "completed", "clock": "completed", "save": "completed"}
        saved = result.structured_content
        assert saved["title"] == "Research: deploy"
        note = await gateway.call("notes__get_note", {"note_id": saved["id"]})
        body = note.structured_content["body"]
        assert body.startswith("Found 2 result sets at ") and "T" in body  # two fan-out targets, a datetime
