"""ToolHive import: Go-template translation, untranslatable constructs, and seed 003's four examples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from support.fakes import FakeCalls, FakeCatalog
from support.paths import ROOT
from support.results import meta
from support.workflows import error, statuses
from toolweave.composite.errors import GoTemplateError
from toolweave.composite.workflow.build import build_workflow
from toolweave.composite.workflow.config import WorkflowDef
from toolweave.composite.workflow.gotemplate import translate
from toolweave.composite.workflow.toolhive import translate_toolhive
from toolweave.composite.workflow.validation import workflow_problems
from toolweave.config import ConfigError, load_config, parse_config
from toolweave.templates import compile_template

EXAMPLES = ROOT / "examples" / "toolhive"
EXAMPLE_FILES = [
    "simple-deploy.yaml",
    "deploy-and-verify.yaml",
    "investigate-incident.yaml",
    "canary-deployment.yaml",
]
BACKENDS = ["kubectl", "slack", "prometheus", "jira", "registry", "metrics"]


# -- translating expressions --------------------------------------------------------------


@pytest.mark.parametrize(
    ("go", "jinja"),
    [
        ("{{.params.environment}}", "{{ params.environment }}"),
        ("app={{.params.service}}", "app={{ params.service }}"),
        ("{{ .steps.get_user.output.profile.email }}", "{{ steps.get_user.output.profile.email }}"),
        (
            "{{if .params.production}}true{{else}}false{{end}}",
            "{% if params.production %}true{% else %}false{% endif %}",
        ),
        (
            "{{if .params.a}}x{{else if .params.b}}y{{end}}",
            "{% if params.a %}x{% elif params.b %}y{% endif %}",
        ),
        (
            "{{(fromJson .steps.api_call.output.text).user.name}}",
            "{{ ((steps.api_call.output.text | fromjson)).user.name }}",
        ),
        (
            "{{if ge .steps.get_stats.output.count 10.0}}high{{else}}low{{end}}",
            "{% if (steps.get_stats.output.count >= 10.0) %}high{% else %}low{% endif %}",
        ),
        ("{{json .steps.pkgs.output.packages}}", "{{ (steps.pkgs.output.packages | tojson) }}"),
        ("{{ .steps.pkgs.output.packages | json }}", "{{ (steps.pkgs.output.packages | tojson) }}"),
        ("{{.forEach.pkg.name}}", "{{ forEach.pkg.name }}"),
        ("{{ quote .params.s }}", "{{ (params.s | quote) }}"),
        ("{{ len .params.list }}", "{{ (params.list | length) }}"),
        ('{{ index .steps "get-pods" "output" }}', "{{ (steps)['get-pods']['output'] }}"),
        ('{{ eq .params.a "x" "y" }}', "{{ (params.a == 'x' or params.a == 'y') }}"),
        ("{{ ne .params.a 1 }}", "{{ (params.a != 1) }}"),
        (
            "{{ and .params.a (or .params.b (not .params.c)) }}",
            "{{ (params.a and ((params.b or ((not params.c))))) }}",
        ),
        ('{{ .params.a | eq "x" }}', "{{ ('x' == params.a) }}"),
        ('{{ printf "%s-%d" .params.name .params.n }}', "{{ ('%s-%d' | format(params.name, params.n)) }}"),
        ('{{ printf "%v!" .params.x }}', "{{ ('%s!' | format(params.x)) }}"),
        ("{{- .params.a -}}  b", "{{ params.a }}b"),
        ("a  {{- .params.a }}", "a{{ params.a }}"),
        ("{{/* a comment */}}x", "x"),
        ("{{ .params.x.in }}", "{{ params.x['in'] }}"),
        (
            "{{ true }} {{ nil }} {{ 0x1F }} {{ `raw \\n` }}",
            "{{ true }} {{ none }} {{ 31 }} {{ 'raw \\\\n' }}",
        ),
        ('query{service="{{.params.service}}"}', 'query{service="{{ params.service }}"}'),
        ("100{%} of {#tags}", "{% raw %}100{%} of {#tags}{% endraw %}"),
        ("no templates", "no templates"),
    ],
)
def test_go_templates_translate_to_jinja(go: str, jinja: str) -> None:
    translated = translate(go)
    assert translated == jinja
    compile_template(translated)


@pytest.mark.parametrize(
    ("go", "named"),
    [
        ("{{range .params.items}}{{.}}{{end}}", "'range' loops"),
        ("{{with .params.x}}{{end}}", "'with' blocks"),
        ('{{define "x"}}{{end}}', "'define'"),
        ('{{template "x"}}', "'template'"),
        ("{{ $x := .params.a }}", "template variables ($x)"),
        ("{{ $ }}", "template variables ($)"),
        ("{{ . }}", "the dot ('.') on its own"),
        ("{{ html .params.x }}", "the function 'html'"),
        ("{{ .vars.x }}", "the field .vars"),
        ('{{ printf "%q" .params.a }}', "the printf verb %q"),
        ("{{ 'c' }}", "character constants"),
        ("{{ not eq .params.a 1 }}", "the function 'eq' used as an argument"),
        ("{{if .params.a}}open", "never closed"),
        ("{{end}}", "without {{if}}"),
        ("{{ .params.a", "not closed"),
    ],
)
def test_untranslatable_constructs_are_errors_that_name_them(go: str, named: str) -> None:
    with pytest.raises(GoTemplateError) as caught:
        translate(go)
    assert named in str(caught.value)


def test_a_single_go_action_keeps_its_native_type_after_translation() -> None:
    assert compile_template(translate("{{.params.replicas}}")).render({"params": {"replicas": 3}}) == 3


# -- documents ------------------------------------------------------------------------------------


def toolhive_doc(steps: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "toolhive.stacklok.dev/v1alpha1",
        "kind": "VirtualMCPCompositeToolDefinition",
        "metadata": {"name": "x", "namespace": "default"},
        "spec": {"name": "imported", "description": "Imported from ToolHive", "steps": steps, **spec},
    }


def test_a_document_translates_every_template_field() -> None:
    doc = toolhive_doc(
        [
            {
                "id": "a",
                "tool": "k.get",
                "arguments": {"ns": "{{.params.ns}}", "nested": {"list": ["{{.params.ns}}-x"]}},
            },
            {
                "id": "b",
                "type": "elicitation",
                "message": "Go to {{.params.ns}}?",
                "onDecline": {"action": "skip_remaining"},
            },
            {
                "id": "c",
                "type": "forEach",
                "collection": "{{json .steps.a.output.items}}",
                "itemVar": "pkg",
                "dependsOn": ["a", "b"],
                "condition": "{{ .params.go }}",
                "step": {"type": "tool", "tool": "k.put", "arguments": {"p": "{{.forEach.pkg}}"}},
            },
        ],
        output={
            "properties": {"n": {"type": "integer", "description": "n", "value": "{{.steps.c.output.count}}"}}
        },
        failureMode="continue",
        timeout="1h30m",
    )
    native = translate_toolhive(doc)
    steps = native["steps"]
    assert native["kind"] == "workflow" and native["failureMode"] == "continue"
    assert steps[0]["arguments"] == {"ns": "{{ params.ns }}", "nested": {"list": ["{{ params.ns }}-x"]}}
    assert steps[1]["message"] == "Go to {{ params.ns }}?"
    assert steps[2]["collection"] == "{{ (steps.a.output.items | tojson) }}"
    assert steps[2]["step"]["arguments"] == {"p": "{{ forEach.pkg }}"}
    assert native["output"]["properties"]["n"]["value"] == "{{ steps.c.output.count }}"
    defn = WorkflowDef.model_validate(native)
    assert defn.steps[1].on_decline == "skip_remaining" and defn.timeout == 5400


def test_every_untranslatable_construct_is_reported_with_its_path() -> None:
    doc = toolhive_doc(
        [
            {"id": "a", "tool": "k.get", "arguments": {"x": "{{range .params.l}}{{end}}"}},
            {"id": "b", "tool": "k.get", "condition": "{{ $v }}"},
        ]
    )
    with pytest.raises(ValueError, match="cannot import this ToolHive definition") as caught:
        translate_toolhive(doc)
    message = str(caught.value)
    assert "spec.steps[0].arguments.x" in message and "'range' loops" in message
    assert "spec.steps[1].condition" in message and "$v" in message


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"apiVersion": "v1", "kind": "VirtualMCPCompositeToolDefinition", "spec": {}}, "apiVersion"),
        (
            {"apiVersion": "toolhive.stacklok.dev/v1alpha1", "kind": "VirtualMCPCompositeToolDefinition"},
            "spec",
        ),
    ],
)
def test_documents_without_the_toolhive_shape_are_rejected(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        translate_toolhive(doc)


def test_a_load_error_names_the_construct_and_the_entry() -> None:
    doc = toolhive_doc([{"id": "a", "tool": "k.get", "arguments": {"x": "{{ with .params.a }}{{ end }}"}}])
    with pytest.raises(ConfigError) as caught:
        parse_config({"backends": [{"name": "k", "python": "m"}], "composite_tools": [doc]})
    issue = str(caught.value.issues[0])
    assert issue.startswith("composite_tools[0]:") and "'with' blocks" in issue


def test_imported_definitions_are_validated_like_native_ones() -> None:
    doc = toolhive_doc([{"id": "a", "tool": "k.get", "dependsOn": ["nope"]}])
    with pytest.raises(ConfigError) as caught:
        parse_config({"backends": [{"name": "k", "python": "m"}], "composite_tools": [doc]})
    assert [str(issue) for issue in caught.value.issues] == [
        "composite_tools[0].steps[0].dependsOn[0]: unknown step 'nope'"
    ]


# -- seed 003's four examples ----------------------------------------------------------------------


def example_catalog() -> FakeCatalog:
    catalog = FakeCatalog()
    for reference in [
        "kubectl.apply",
        "kubectl.validate",
        "kubectl.wait",
        "kubectl.get",
        "kubectl.logs",
        "kubectl.events",
        "kubectl.patch",
        "prometheus.query",
        "jira.create_issue",
        "slack.send",
        "registry.inspect",
        "metrics.evaluate",
    ]:
        catalog.add(reference)
    return catalog


def load_examples() -> list[WorkflowDef]:
    raw = {
        "backends": [{"name": name, "python": "m"} for name in BACKENDS],
        "composite_tools": [{"file": f} for f in EXAMPLE_FILES],
    }
    config = parse_config(raw, base_dir=EXAMPLES)
    assert config is not None
    return list(config.composite_tools)


def test_the_four_examples_are_the_seed_documents() -> None:
    for name in EXAMPLE_FILES:
        doc = yaml.safe_load((EXAMPLES / name).read_text())
        assert doc["kind"] == "VirtualMCPCompositeToolDefinition" and doc["apiVersion"].startswith(
            "toolhive.stacklok.dev/"
        )


def test_the_four_examples_load_through_file_entries() -> None:
    definitions = load_examples()
    assert [d.name for d in definitions] == [
        "deploy_app",
        "deploy_and_verify",
        "investigate_incident",
        "canary_deployment",
    ]
    assert all(isinstance(d, WorkflowDef) and workflow_problems(d) == [] for d in definitions)
    assert [len(d.steps) for d in definitions] == [1, 4, 5, 7]
    assert definitions[1].steps[1].on_error is not None and definitions[1].steps[1].on_error.retries == 3


def test_the_examples_load_from_a_config_file(tmp_path: Path) -> None:
    config_file = tmp_path / "toolweave.toml"
    backends = "\n".join(f'[[backends]]\nname = "{name}"\npython = "m"\n' for name in BACKENDS)
    entries = ", ".join(f'{{file = "{EXAMPLES / name}"}}' for name in EXAMPLE_FILES)
    config_file.write_text(f"composite_tools = [{entries}]\n{backends}")
    config = load_config(config_file)
    assert len(config.composite_tools) == 4


def test_every_example_builds_against_backends_with_those_tool_names() -> None:
    catalog = example_catalog()
    for definition in load_examples():
        workflow = build_workflow(definition, catalog)
        assert workflow.tool.name == definition.name


def without_retry_delay(definition: WorkflowDef) -> WorkflowDef:
    """The same definition with retries immediate (the example's 1s default delay only slows the test)."""
    steps = [
        step.model_copy(update={"on_error": step.on_error.model_copy(update={"retry_delay": 0.0})})
        if step.on_error is not None
        else step
        for step in definition.steps
    ]
    return definition.model_copy(update={"steps": steps})


async def test_deploy_and_verify_runs_with_retries_defaults_and_continue() -> None:
    definition = without_retry_delay(load_examples()[1])
    backend = FakeCalls(
        answers={"kubectl__apply": [error("conflict"), {"applied": True}], "slack__send": error("slack down")}
    )
    workflow = build_workflow(definition, example_catalog())
    result = await workflow.run({"environment": "staging"}, backend.context())
    assert backend.calls == [
        ("kubectl__validate", {"namespace": "staging", "manifest": "deployment.yaml"}),
        ("kubectl__apply", {"namespace": "staging", "replicas": 3, "manifest": "deployment.yaml"}),
        ("kubectl__apply", {"namespace": "staging", "replicas": 3, "manifest": "deployment.yaml"}),
        (
            "kubectl__wait",
            {
                "namespace": "staging",
                "resource": "deployment/myapp",
                "condition": "available",
                "timeout": "5m",
            },
        ),
        ("slack__send", {"channel": "#deployments", "message": "Deployed to staging successfully"}),
    ]
    assert not result.is_error and meta(result)["status"] == "completed"
    assert statuses(result) == {
        "validate_config": "completed",
        "apply_deployment": "completed",
        "wait_for_ready": "completed",
        "notify_success": "failed",
    }
    assert meta(result)["steps"][1]["attempts"] == 2


async def test_investigate_incident_fans_out_after_the_first_step() -> None:
    definition = load_examples()[2]
    backend = FakeCalls(delays={"kubectl__logs": 0.02, "kubectl__events": 0.02, "prometheus__query": 0.02})
    result = await build_workflow(definition, example_catalog()).run(
        {"service": "checkout", "namespace": "shop"}, backend.context()
    )
    assert not result.is_error
    assert backend.calls[0] == (
        "kubectl__get",
        {"resource": "pods", "namespace": "shop", "selector": "app=checkout"},
    )
    assert (
        "kubectl__logs",
        {"namespace": "shop", "selector": "app=checkout", "since": "1h"},
    ) in backend.calls
    assert (
        "prometheus__query",
        {"query": 'rate(http_requests_total{service="checkout"}[5m])', "time": "now"},
    ) in backend.calls
    assert backend.overlapped("kubectl__logs", "prometheus__query")
    assert backend.calls[-1][0] == "jira__create_issue"


async def test_canary_deployment_runs_all_seven_steps_in_order() -> None:
    definition = load_examples()[3]
    backend = FakeCalls()
    result = await build_workflow(definition, example_catalog()).run(
        {"service": "api", "image": "api:2"}, backend.context()
    )
    assert not result.is_error and len(backend.calls) == 7
    assert backend.calls[1] == (
        "kubectl__patch",
        {"resource": "deployment/api-canary", "image": "api:2", "replicas": 10},
    )
    assert backend.calls[4] == ("metrics__evaluate", {"success_rate": 0.99, "deployment": "api-canary"})
