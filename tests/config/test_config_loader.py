"""Loading config files: TOML and YAML, `${VAR}` expansion, and EVERY problem reported at once with its path."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.fixtures import WriteConfig
from toolweave.config import ConfigError, load_config, parse_config

TOML = """
[gateway]
separator = "__"
tool_exposure = "search"
pinned = ["github__search"]

[[backends]]
name = "github"
command = "python"
args = ["-m", "some_mcp_server"]
timeout = "30s"
max_concurrency = 8
hide = ["delete_*"]
read_only_only = false

[backends.tools.search]
name = "gh_search"
keep_original = true
description = "Search GitHub issues"
timeout = "500ms"

[[backends]]
name = "docs"
url = "http://127.0.0.1:9001/mcp"
headers = { Authorization = "Bearer ${TW_TEST_DOCS_TOKEN}" }
connect_timeout = "1m"

[[backends]]
name = "local"
python = "mypkg.tools"

[policy]
deny = ["re:.*__delete_.*"]

[[composite_tools]]
name = "search_all"
description = "Search across all knowledge sources"
tools = ["github/search", "docs/search"]
strategy = "parallel"
"""

YAML = """
gateway:
  separator: "__"
  tool_exposure: search
  pinned: [github__search]
backends:
  - name: github
    command: python
    args: ["-m", some_mcp_server]
    timeout: 30s
    max_concurrency: 8
    hide: ["delete_*"]
    read_only_only: false
    tools:
      search: {name: gh_search, keep_original: true, description: Search GitHub issues, timeout: 500ms}
  - name: docs
    url: http://127.0.0.1:9001/mcp
    headers: {Authorization: "Bearer ${TW_TEST_DOCS_TOKEN}"}
    connect_timeout: 1m
  - name: local
    python: mypkg.tools
policy:
  deny: ["re:.*__delete_.*"]
composite_tools:
  - name: search_all
    description: Search across all knowledge sources
    tools: [github/search, docs/search]
    strategy: parallel
"""


def problems(error: ConfigError) -> dict[str, str]:
    return {issue.path: issue.message for issue in error.issues}


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TW_TEST_DOCS_TOKEN", "s3cret")


def test_toml_config_loads_with_every_section(write_config: WriteConfig) -> None:
    cfg = load_config(write_config(TOML, ".toml"))
    github, docs, local = cfg.backends
    assert (github.transport, docs.transport, local.transport) == ("stdio", "http", "python")
    assert github.timeout == 30.0 and github.max_concurrency == 8 and github.hide == ["delete_*"]
    override = github.tools["search"]
    assert (override.name, override.keep_original, override.timeout) == ("gh_search", True, 0.5)
    assert docs.headers == {"Authorization": "Bearer s3cret"} and docs.connect_timeout == 60.0
    assert cfg.gateway.tool_exposure == "search" and cfg.gateway.pinned == ["github__search"]
    assert cfg.policy.deny == ["re:.*__delete_.*"]
    assert [c.name for c in cfg.composite_tools] == ["search_all"]
    assert cfg.composite_tools[0].kind == "fanout"


def test_yaml_and_toml_give_the_same_config(write_config: WriteConfig) -> None:
    from_toml = load_config(write_config(TOML, ".toml"))
    from_yaml = load_config(write_config(YAML, ".yaml"))
    assert from_toml.model_dump(exclude={"source"}) == from_yaml.model_dump(exclude={"source"})
    assert load_config(write_config(YAML, ".yml")).backends == from_yaml.backends


def test_env_expansion_with_defaults(write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TW_TEST_CMD", "my-server")
    monkeypatch.setenv("TW_TEST_EMPTY", "")
    monkeypatch.delenv("TW_TEST_UNSET", raising=False)
    path = write_config(
        {
            "backends": [
                {
                    "name": "a",
                    "command": "${TW_TEST_CMD}",
                    "args": [
                        "--level=${TW_TEST_UNSET:-info}",
                        "${TW_TEST_EMPTY:-fallback}",
                        "x${TW_TEST_EMPTY}y",
                    ],
                    "timeout": "${TW_TEST_UNSET:-5s}",
                }
            ]
        }
    )
    backend = load_config(path).backends[0]
    assert backend.command == "my-server"
    # an empty variable takes the default when one is given, and stays empty when none is
    assert backend.args == ["--level=info", "fallback", "xy"]
    assert backend.timeout == 5.0


def test_unset_variable_without_default_is_an_error_at_its_path(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TW_TEST_UNSET", raising=False)
    path = write_config(
        {
            "backends": [
                {"name": "a", "url": "http://h/mcp", "headers": {"Authorization": "Bearer ${TW_TEST_UNSET}"}}
            ]
        }
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    found = problems(caught.value)
    assert list(found) == ["backends[0].headers.Authorization"]
    assert "TW_TEST_UNSET is not set" in found["backends[0].headers.Authorization"]
    assert "${TW_TEST_UNSET:-default}" in found["backends[0].headers.Authorization"]


def test_a_shared_federated_namespace_must_name_its_tenant(write_config: WriteConfig) -> None:
    """Before, `shared = true` alone was accepted, and whoever registered the namespace first received
    every tenant's calls of it."""
    path = write_config({"federation": {"namespaces": [{"name": "crm", "shared": True}]}})
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    found = problems(caught.value)
    assert list(found) == ["federation.namespaces[0]"], found
    assert "shared namespace 'crm' needs 'tenant'" in found["federation.namespaces[0]"]
    named = write_config({"federation": {"namespaces": [{"name": "crm", "shared": True, "tenant": "acme"}]}})
    assert load_config(named).federation.namespaces[0].tenant == "acme"


def test_every_problem_is_reported_at_once_with_its_path(write_config: WriteConfig) -> None:
    path = write_config(
        """
gatway: {}
gateway:
  separator: ""
  tool_exposure: some
  port: 70000
backends:
  - name: ok
    command: python
  - name: Bad Name
    command: python
  - name: both
    command: python
    url: http://127.0.0.1:1/mcp
  - name: none
  - name: typo
    comand: python
  - name: slow
    command: python
    timeout: soon
    max_concurrency: 0
    hide: ["re:(unclosed"]
    tools:
      echo: {name: "not valid!", nmae: x}
  - name: ok
    url: ftp://example.com/mcp
policy:
  deny: ["re:[z-a]"]
  rules:
    - {tenant: acme, allow: ["re:(?!x)"]}
composite_tools:
  - name: no_targets
    tools: []
  - name: what
    description: cannot tell
  - name: search_all
    description: search
    tools: [ok/search, ghost/search]
  - name: search_all
    description: again
    tools: [ok/search]
"""
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    found = problems(caught.value)
    expected = {
        "gatway": "unknown key",
        "gateway.separator": "separator",
        "gateway.tool_exposure": "'all' or 'search'",
        "gateway.port": "65535",
        "backends[1].name": "must match",
        "backends[2]": "found command, url",
        "backends[3]": "found none",
        "backends[4].comand": "unknown key",
        "backends[5].timeout": "invalid duration 'soon'",
        "backends[5].max_concurrency": "greater than or equal to 1",
        "backends[5].hide[0]": "invalid regular expression 're:(unclosed'",
        "backends[5].tools.echo.name": "alias 'not valid!'",
        "backends[5].tools.echo.nmae": "unknown key",
        "backends[6].url": "must start with http:// or https://",
        "backends[6].name": "duplicate backend name 'ok' (also backends[0])",
        "policy.deny[0]": "invalid character class range",
        "policy.rules[0].allow[0]": "invalid regular expression",
        "composite_tools[0]": "at least one target",
        "composite_tools[1].kind": "cannot tell the kind",
        "composite_tools[2].tools[1]": "unknown backend 'ghost'",
        "composite_tools[3].name": "duplicate composite tool name 'search_all' (also composite_tools[2])",
    }
    for where, fragment in expected.items():
        assert where in found, f"{where} not reported; got {sorted(found)}"
        assert fragment in found[where], f"{where}: {found[where]!r} lacks {fragment!r}"
    assert len(caught.value.issues) == len(expected), sorted(found)
    # the exception's text lists them all, one per line, with the file name
    message = str(caught.value)
    assert message.startswith(f"{len(expected)} problem(s) in {path}")
    assert all(f"  {issue}" in message for issue in caught.value.issues)


def test_a_valid_document_beside_a_bad_one_is_not_blamed(write_config: WriteConfig) -> None:
    path = write_config({"backends": [{"name": "good", "command": "python"}, {"name": "bad", "command": 3}]})
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert [issue.path for issue in caught.value.issues] == ["backends[1].command"]


@pytest.mark.parametrize(
    ("suffix", "content", "fragment"),
    [
        (".toml", "[[backends]\nname = 'x'", "invalid TOML"),
        (".toml", "name = 'x'\nname = 'y'", "invalid TOML"),
        (".yaml", "backends: [unclosed", "invalid YAML"),
        (".yaml", "- just\n- a list", "must be a table/mapping at the top level"),
        (".yaml", "a: 1\n---\nb: 2", "holds 2 YAML documents"),
        (".yaml", "backends: {name: x}", "backends: Input should be a valid list"),
    ],
)
def test_malformed_files_get_a_specific_message(
    write_config: WriteConfig, suffix: str, content: str, fragment: str
) -> None:
    path = write_config(content, suffix)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert fragment in str(caught.value)
    assert caught.value.source == str(path)


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config file not found: .*nope\.toml"):
        load_config(tmp_path / "nope.toml")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(binary)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path)  # a directory


def test_an_empty_file_is_an_empty_gateway(write_config: WriteConfig) -> None:
    cfg = load_config(write_config("", ".yaml"))
    assert cfg.backends == [] and cfg.composite_tools == [] and cfg.gateway.separator == "__"
    assert load_config(write_config("", ".toml")).backends == []


def test_default_path_from_environment_then_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "toolweave.toml").write_text('[[backends]]\nname = "cwd"\ncommand = "x"\n')
    other = tmp_path / "other.yaml"
    other.write_text("backends: [{name: env, command: x}]\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLWEAVE_CONFIG", raising=False)
    assert load_config().backends[0].name == "cwd"
    monkeypatch.setenv("TOOLWEAVE_CONFIG", str(other))
    assert load_config().backends[0].name == "env"
    assert load_config().source == str(other)


def test_composite_file_include_resolves_against_the_config_folder(
    tmp_path: Path, write_config: WriteConfig
) -> None:
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "fanouts.yaml").write_text(
        "composite_tools:\n"
        "  - {name: all_echo, description: echo everywhere, tools: [a/echo, b/echo]}\n"
        "  - {name: all_add, description: add everywhere, tools: [a/add, b/add]}\n"
    )
    backends = [{"name": "a", "command": "x"}, {"name": "b", "command": "x"}]
    cfg = load_config(
        write_config({"backends": backends, "composite_tools": [{"file": "defs/fanouts.yaml"}]})
    )
    assert [c.name for c in cfg.composite_tools] == ["all_echo", "all_add"]

    with pytest.raises(ConfigError) as caught:
        load_config(write_config({"backends": backends, "composite_tools": [{"file": "defs/missing.yaml"}]}))
    (issue,) = caught.value.issues
    assert issue.path == "composite_tools[0].file" and "missing.yaml" in issue.message


def test_unknown_backend_in_a_reference_names_the_known_ones() -> None:
    raw = {
        "backends": [{"name": "ts", "command": "x"}, {"name": "docs", "command": "x"}],
        "composite_tools": [
            {
                "name": "f",
                "description": "d",
                "tools": ["ts/echo", "docs.search", "nope/search", "gone.search"],
            },
            {
                "name": "r",
                "description": "d",
                "operations": [{"slug": "a", "tool": "ts/echo"}, {"slug": "b", "tool": "ghost/x"}],
                "default_operation": "a",
            },
        ],
    }
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    found = problems(caught.value)
    assert found == {
        "composite_tools[0].tools[2]": "'nope/search' names unknown backend 'nope' (known backends: docs, ts)",
        "composite_tools[0].tools[3]": "'gone.search' names unknown backend 'gone' (known backends: docs, ts)",
        "composite_tools[1].operations[1].tool": "'ghost/x' names unknown backend 'ghost' (known backends: docs, ts)",
    }


def test_exposed_names_with_dots_are_not_mistaken_for_unknown_backends() -> None:
    raw = {
        "backends": [{"name": "ts", "command": "x"}],
        "composite_tools": [{"name": "f", "description": "d", "tools": ["ts__search.v2", "ts/search.v2"]}],
    }
    assert parse_config(raw) is not None


def test_reference_problems_are_reported_even_when_a_backend_is_invalid() -> None:
    raw = {
        "backends": [{"name": "ts", "command": "x", "timeout": "never"}, {"name": "ts", "command": "y"}],
        "composite_tools": [{"name": "f", "description": "d", "tools": ["ts/echo", "nope/echo"]}],
    }
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert set(problems(caught.value)) == {
        "backends[0].timeout",
        "backends[1].name",
        "composite_tools[0].tools[1]",
    }


def test_parse_config_collects_into_a_given_list() -> None:
    issues: list = []
    assert parse_config({"backends": [{"name": "x"}], "extra": 1}, issues=issues) is None
    assert {issue.path for issue in issues} == {"backends[0]", "extra"}


def test_a_missing_file_says_how_to_name_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "toolweave.toml")
    message = str(caught.value)
    assert "-c/--config FILE" in message and "TOOLWEAVE_CONFIG" in message and "examples/demo.toml" in message


def test_an_unquoted_variable_in_toml_says_to_quote_it(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config("[gateway]\nport = ${TW_PORT:-18120}\n", ".toml")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert 'quote it, port = "${TW_PORT:-18120}"' in str(caught.value)
    quoted = write_config('[gateway]\nport = "${TW_PORT:-18120}"\n', ".toml")
    monkeypatch.delenv("TW_PORT", raising=False)
    assert load_config(quoted).gateway.port == 18120  # a number is still read as one
