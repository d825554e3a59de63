"""forEach steps: iteration output, item variables, limits, failures and bounded parallelism (ToolHive's scenarios)."""

from __future__ import annotations

from typing import Any

from support.fakes import FakeCalls
from support.results import meta, texts
from support.workflows import build, catalog_for, error, statuses

PACKAGES = [
    {"name": "openssl", "version": "1.1.1"},
    {"name": "curl", "version": "7.80"},
    {"name": "zlib", "version": "1.2"},
]
CATALOG = catalog_for("oci/get_image_config", "osv/query_vulnerability", "reporter/summarize")


def check_vulns(**fields: Any) -> dict[str, Any]:
    step = {
        "id": "check_vulns",
        "type": "forEach",
        "collection": "{{ steps.get_packages.output.packages }}",
        "itemVar": "pkg",
        "dependsOn": ["get_packages"],
        "step": {"tool": "osv.query_vulnerability", "arguments": {"package_name": "{{ pkg.name }}"}},
    }
    step.update(fields)
    return step


GET_PACKAGES = {"id": "get_packages", "tool": "oci.get_image_config", "arguments": {"image": "test:latest"}}


async def test_each_item_runs_the_inner_step_and_the_output_counts_them() -> None:
    backend = FakeCalls(
        answers={"oci__get_image_config": {"packages": PACKAGES}, "osv__query_vulnerability": {"vulns": []}}
    )
    result = await build([GET_PACKAGES, check_vulns()], CATALOG).run({}, backend.context())
    assert not result.is_error
    assert [args for name, args in backend.calls if name == "osv__query_vulnerability"] == [
        {"package_name": "openssl"},
        {"package_name": "curl"},
        {"package_name": "zlib"},
    ]
    output = result.structured_content
    assert output is not None and (output["count"], output["completed"], output["failed"]) == (3, 3, 0)
    assert output["iterations"][1] == {
        "index": 1,
        "item": PACKAGES[1],
        "status": "completed",
        "output": {"vulns": []},
        "error": None,
    }


async def test_item_index_and_toolhive_style_for_each_context_are_available() -> None:
    backend = FakeCalls(answers={"oci__get_image_config": {"packages": ["alpha", "beta"]}})
    inner = {
        "tool": "osv/query_vulnerability",
        "arguments": {"v": "{{ item }}", "i": "{{ index }}", "th": "{{ forEach.item }}-{{ forEach.index }}"},
    }
    step = check_vulns(itemVar="item", step=inner)
    await build([GET_PACKAGES, step], CATALOG).run({}, backend.context())
    assert [args for _, args in backend.calls[1:]] == [
        {"v": "alpha", "i": 0, "th": "alpha-0"},
        {"v": "beta", "i": 1, "th": "beta-1"},
    ]


async def test_an_empty_collection_completes_with_zero_counts() -> None:
    backend = FakeCalls(answers={"oci__get_image_config": {"packages": []}})
    result = await build([GET_PACKAGES, check_vulns()], CATALOG).run({}, backend.context())
    assert result.structured_content == {"iterations": [], "count": 0, "completed": 0, "failed": 0}


async def test_a_json_array_string_is_accepted_as_the_collection() -> None:
    backend = FakeCalls(answers={"oci__get_image_config": {"items": '["a", "b", "c"]'}})
    step = check_vulns(
        collection="{{ steps.get_packages.output.items }}",
        step={"tool": "osv/query_vulnerability", "arguments": {"v": "{{ pkg }}"}},
    )
    result = await build([GET_PACKAGES, step], CATALOG).run({}, backend.context())
    assert result.structured_content is not None and result.structured_content["count"] == 3


async def test_toolhive_json_idiom_for_the_collection_works() -> None:
    backend = FakeCalls(answers={"oci__get_image_config": {"packages": PACKAGES}})
    step = check_vulns(collection="{{ steps.get_packages.output.packages | tojson }}")
    result = await build([GET_PACKAGES, step], CATALOG).run({}, backend.context())
    assert result.structured_content is not None and result.structured_content["completed"] == 3


async def test_a_literal_list_collection_works() -> None:
    backend = FakeCalls()
    step = {
        "id": "each",
        "type": "forEach",
        "collection": ["x", "{{ params.extra }}"],
        "step": {"tool": "osv/query_vulnerability", "arguments": {"v": "{{ item }}"}},
    }
    await build([step], CATALOG, parameters={"type": "object", "properties": {"extra": {}}}).run(
        {"extra": "y"}, backend.context()
    )
    assert [args for _, args in backend.calls] == [{"v": "x"}, {"v": "y"}]


async def test_a_collection_that_is_not_an_array_fails_the_step() -> None:
    backend = FakeCalls(answers={"oci__get_image_config": {"items": "not-json"}})
    step = check_vulns(collection="{{ steps.get_packages.output.items }}")
    result = await build([GET_PACKAGES, step], CATALOG).run({}, backend.context())
    assert result.is_error and "collection must resolve to an array" in texts(result)[0]


async def test_more_items_than_max_iterations_fails_before_any_call() -> None:
    backend = FakeCalls(answers={"oci__get_image_config": {"packages": [1, 2, 3, 4, 5, 6]}})
    result = await build([GET_PACKAGES, check_vulns(maxIterations=5)], CATALOG).run({}, backend.context())
    assert result.is_error and "6 items, more than maxIterations (5)" in texts(result)[0]
    assert backend.called() == ["oci__get_image_config"]


async def test_a_failed_iteration_aborts_the_step_by_default() -> None:
    backend = FakeCalls(
        answers={
            "oci__get_image_config": {"packages": PACKAGES},
            "osv__query_vulnerability": error("network error"),
        }
    )
    result = await build([GET_PACKAGES, check_vulns(maxParallel=1)], CATALOG).run({}, backend.context())
    assert result.is_error and statuses(result)["check_vulns"] == "failed"
    assert backend.called().count("osv__query_vulnerability") == 1
    assert "iteration 0 failed: network error" in texts(result)[0]


async def test_on_error_continue_runs_every_iteration_and_counts_failures() -> None:
    answers = [error("network error"), {"vulns": []}, {"vulns": ["CVE-1"]}]
    backend = FakeCalls(
        answers={"oci__get_image_config": {"packages": PACKAGES}, "osv__query_vulnerability": answers}
    )
    step = check_vulns(maxParallel=1, onError={"action": "continue"})
    result = await build([GET_PACKAGES, step], CATALOG).run({}, backend.context())
    assert not result.is_error and statuses(result)["check_vulns"] == "completed"
    output = result.structured_content
    assert output is not None and (output["count"], output["completed"], output["failed"]) == (3, 2, 1)
    assert output["iterations"][0]["error"] == "network error" and output["iterations"][0]["output"] is None


async def test_the_inner_step_retries_on_its_own() -> None:
    answers = [error("503"), {"vulns": []}]
    backend = FakeCalls(
        answers={"oci__get_image_config": {"packages": PACKAGES[:1]}, "osv__query_vulnerability": answers}
    )
    inner = {
        "tool": "osv/query_vulnerability",
        "arguments": {"p": "{{ pkg.name }}"},
        "onError": {"action": "retry", "retryCount": 1, "retryDelay": 0},
    }
    result = await build([GET_PACKAGES, check_vulns(step=inner)], CATALOG).run({}, backend.context())
    assert not result.is_error and backend.called().count("osv__query_vulnerability") == 2


async def test_parallelism_is_bounded_by_max_parallel() -> None:
    items = [{"name": f"pkg-{i}"} for i in range(7)]
    backend = FakeCalls(
        answers={"oci__get_image_config": {"packages": items}}, delays={"osv__query_vulnerability": 0.01}
    )
    result = await build([GET_PACKAGES, check_vulns(maxParallel=3)], CATALOG).run({}, backend.context())
    assert result.structured_content is not None and result.structured_content["completed"] == 7
    assert backend.max_active == 3


async def test_downstream_steps_read_the_for_each_output() -> None:
    backend = FakeCalls(answers={"oci__get_image_config": {"packages": PACKAGES}})
    summarize = {
        "id": "summarize",
        "tool": "reporter/summarize",
        "dependsOn": ["check_vulns"],
        "arguments": {
            "total": "{{ steps.check_vulns.output.count }}",
            "first": "{{ steps.check_vulns.output.iterations[0].item.name }}",
        },
    }
    result = await build([GET_PACKAGES, check_vulns(), summarize], CATALOG).run({}, backend.context())
    assert backend.calls[-1] == ("reporter__summarize", {"total": 3, "first": "openssl"})
    assert meta(result)["steps"][1]["attempts"] == 1
