"""The shared template module: native types, text, filters, sandbox, limits, secrets."""

from __future__ import annotations

from typing import Any

import pytest

from toolweave.schemas.coerce import CoercionError
from toolweave.secrets import REDACTED, secret_values
from toolweave.secrets import redact_text as redact
from toolweave.secrets import secret_fields as secret_names
from toolweave.templates import (
    TemplateError,
    TemplateLimitError,
    TemplateRenderError,
    TemplateSyntaxError,
    check_syntax,
    compile_template,
    compile_value,
    iter_template_strings,
    render_text,
    render_value,
    template_names,
    template_paths,
)

CTX: dict[str, Any] = {
    "params": {"n": 3, "env": "prod", "tags": ["a", "b"], "cfg": {"x": 1}, "flag": True, "none": None},
    "steps": {
        "fetch": {"status": "completed", "output": {"text": '{"user": {"name": "Ann"}}', "items": [1, 2]}}
    },
}


# -- native values and text ---------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{ params.n }}", 3),
        ("{{ params.tags }}", ["a", "b"]),
        ("{{ params.cfg }}", {"x": 1}),
        ("{{ params.flag }}", True),
        ("{{ params.none }}", None),
        ("  {{ params.n }}\n", 3),
        ("{{- params.n -}}", 3),
        ("{{ params.n + 1 }}", 4),
        ("{{ params.tags | length }}", 2),
        ("{{ range(3) }}", [0, 1, 2]),
        ("{{ params.tags | map('upper') }}", ["A", "B"]),
    ],
)
def test_a_single_expression_keeps_its_native_type(source: str, expected: Any) -> None:
    assert compile_template(source).render(CTX) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("n={{ params.n }}", "n=3"),
        ("{{ params.n }}{{ params.n }}", "33"),
        ("{{ params.env }} and {{ params.n }}", "prod and 3"),
        ("{% if params.flag %}yes{% else %}no{% endif %}", "yes"),
        ("plain text", "plain text"),
    ],
)
def test_other_strings_render_to_text(source: str, expected: str) -> None:
    assert compile_template(source).render(CTX) == expected


def test_render_text_always_gives_text() -> None:
    assert render_text("{{ params.n }}", CTX) == "3"


def test_render_value_walks_dicts_and_lists() -> None:
    value = {"a": "{{ params.n }}", "b": ["x-{{ params.env }}", 5, None], "c": {"d": "{{ params.tags }}"}}
    assert render_value(value, CTX) == {"a": 3, "b": ["x-prod", 5, None], "c": {"d": ["a", "b"]}}


def test_compile_value_renders_repeatedly_and_never_shares_static_parts() -> None:
    compiled = compile_value({"fixed": {"list": [1, 2]}, "n": "{{ params.n }}"})
    first = compiled.render(CTX)
    first["fixed"]["list"].append(3)
    assert compiled.render(CTX) == {"fixed": {"list": [1, 2]}, "n": 3}
    assert not compiled.is_static and compiled.sources == ("{{ params.n }}",)
    static = compile_value({"a": [1]})
    assert static.is_static and static.render(CTX) is not static.render(CTX)


def test_templates_are_compiled_once_and_cached() -> None:
    assert compile_template("{{ params.env }}!") is compile_template("{{ params.env }}!")


def test_dot_access_prefers_the_data_over_dict_methods() -> None:
    assert compile_template("{{ steps.fetch.output.items }}").render(CTX) == [1, 2]


# -- errors ------------------------------------------------------------------------------


def test_undefined_names_are_errors() -> None:
    with pytest.raises(TemplateRenderError, match="nope"):
        compile_template("{{ params.nope }}").render(CTX)
    with pytest.raises(TemplateRenderError, match="nope"):
        compile_template("x {{ params.nope }}").render(CTX)


def test_defined_tests_and_default_filter_still_work_with_strict_undefined() -> None:
    assert compile_template("{{ params.nope | default('d') }}").render(CTX) == "d"
    assert compile_template("{{ params.nope is defined }}").render(CTX) is False


def test_syntax_errors_are_clear_and_raised_at_compile_time() -> None:
    with pytest.raises(TemplateSyntaxError, match="template syntax error") as caught:
        compile_template("{{ params.n ")
    assert "params.n" in str(caught.value)
    assert check_syntax("{% if x %}") is not None
    assert check_syntax("{{ x }}") is None


def test_all_template_errors_share_one_base_class() -> None:
    for kind in (TemplateSyntaxError, TemplateRenderError, TemplateLimitError, CoercionError):
        assert issubclass(kind, TemplateError)
    assert issubclass(TemplateError, ValueError)


# -- filters -----------------------------------------------------------------------------


def test_tojson_is_compact_json() -> None:
    assert compile_template("{{ params.cfg | tojson }}").render(CTX) == '{"x":1}'
    assert compile_template("{{ '<a>' | tojson }}").render(CTX) == '"<a>"'


def test_fromjson_parses_text_and_lets_fields_be_read() -> None:
    source = "{{ (steps.fetch.output.text | fromjson).user.name }}"
    assert compile_template(source).render(CTX) == "Ann"


def test_fromjson_of_bad_json_is_a_clear_error() -> None:
    with pytest.raises(TemplateRenderError, match="not valid JSON"):
        compile_template("{{ params.env | fromjson }}").render(CTX)


def test_quote_makes_a_string_literal() -> None:
    assert compile_template('{{ "say \\"hi\\"" | quote }}').render(CTX) == '"say \\"hi\\""'
    assert compile_template("{{ params.n | quote }}").render(CTX) == '"3"'


# -- the sandbox ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "x{{ ''.__class__ }}",
        "{{ params.__class__ }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ params.tags.append(1) }}",
        "{{ params.cfg.update({'y': 2}) }}",
        "{{ params.cfg.pop('x') }}",
        "{{ (1).__class__.__base__.__subclasses__() }}",
        "{{ lipsum.__globals__['os'] }}",
    ],
)
def test_sandbox_escapes_fail(source: str) -> None:
    with pytest.raises(TemplateRenderError):
        compile_template(source).render(CTX)
    assert CTX["params"]["tags"] == ["a", "b"] and CTX["params"]["cfg"] == {"x": 1}


@pytest.mark.parametrize(
    "source",
    [
        "{{ 'a' * 10000000 }}",
        "{{ [1] * 10000000 }}",
        "{{ 9 ** 999999 }}",
        "{{ range(10000000) | list }}",
        "{% for i in range(99999) %}{{ 'xxxxxxxxxxxxxxxxxxxx' }}{% endfor %}",
    ],
)
def test_limits_stop_runaway_templates(source: str) -> None:
    with pytest.raises(TemplateLimitError):
        compile_template(source).render(CTX)


def test_render_value_has_a_depth_limit() -> None:
    deep: Any = "{{ params.n }}"
    for _ in range(100):
        deep = [deep]
    with pytest.raises(TemplateLimitError):
        render_value(deep, CTX)


# -- references -------------------------------------------------------------------------------


def test_template_names_are_the_context_names_read() -> None:
    source = "{% for t in params.tags %}{{ t }}{% endfor %}{{ steps.a.output | tojson }}{{ range(2) }}"
    assert template_names(source) == {"params", "steps"}
    assert template_names("plain") == set()


def test_template_paths_report_the_longest_constant_chains() -> None:
    source = (
        "{{ steps.a.output.text }} {{ steps['b'].output.n + params.x }} {{ (steps.c.output.t | fromjson).u }}"
    )
    assert template_paths(source) == {
        ("steps", "a", "output", "text"),
        ("steps", "b", "output", "n"),
        ("params", "x"),
        ("steps", "c", "output", "t"),
    }
    assert template_paths("{{ steps[name].output }}") == {("steps",), ("name",)}


def test_iter_template_strings_gives_paths() -> None:
    value = {"a": "{{ x }}", "b": ["lit", "{{ y }}"], "c": {"d": "{% if z %}1{% endif %}"}}
    assert list(iter_template_strings(value, "arguments")) == [
        ("arguments.a", "{{ x }}"),
        ("arguments.b[1]", "{{ y }}"),
        ("arguments.c.d", "{% if z %}1{% endif %}"),
    ]


# -- secrets ----------------------------------------------------------------------------------------


def test_secret_values_are_redacted_from_messages() -> None:
    schema = {
        "type": "object",
        "properties": {
            "token": {"type": "string", "writeOnly": True},
            "password": {"type": "string", "format": "password"},
            "user": {"type": "string"},
        },
    }
    names = secret_names(schema)
    assert names == {"token", "password"}
    values = secret_values(names, {"token": "tok-123456", "password": "pa55word", "user": "ann"})
    message = "login as ann with pa55word failed (token tok-123456)"
    assert redact(message, values) == f"login as ann with {REDACTED} failed (token {REDACTED})"
