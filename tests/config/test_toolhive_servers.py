"""ToolHive `VirtualMCPServer` resources load as virtual servers (`[[servers]] file = ...`): workloads
and their filters, overrides, inline composite tools (Go templates translated), and a problem naming
every construct toolweave has no counterpart for."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.configs import python_backend
from support.fixtures import OpenGateway
from support.paths import ROOT
from toolweave.config import ConfigError, parse_config

VMCP = """\
apiVersion: toolhive.stacklok.dev/v1alpha1
kind: VirtualMCPServer
metadata: {name: greeters}
spec:
  groupRef: {name: team}
  aggregation:
    tools:
      - workload: py
        filter: [greet, multiply]
        overrides:
          greet: {name: hello, description: Say hello.}
  compositeTools:
    - name: greet_twice
      description: Greet someone, then greet them again.
      parameters:
        who: {type: string, required: true}
      steps:
        - id: first
          tool: py.greet
          arguments: {name: "{{.params.who}}"}
        - id: second
          tool: py.greet
          arguments: {name: "{{.params.who}} again"}
          dependsOn: [first]
"""


async def test_a_virtual_mcp_server_is_served(open_gateway: OpenGateway, tmp_path: Path) -> None:
    (tmp_path / "vmcp.yaml").write_text(VMCP)
    config = parse_config(
        {"backends": [python_backend()], "servers": [{"file": "vmcp.yaml"}]}, base_dir=tmp_path
    )
    assert config is not None
    gateway = await open_gateway(config)
    server = gateway.servers.get("greeters")
    assert server is not None
    listed = {tool.name: tool for tool in server.list_tools()}
    assert sorted(listed) == ["greet_twice", "hello", "py__multiply"]
    assert listed["hello"].description == "Say hello."
    assert listed["greet_twice"].input_schema["required"] == ["who"]
    result = await server.gateway.executor().call("greet_twice", {"who": "Ada"})
    assert not result.is_error, result.content


def test_what_has_no_counterpart_is_a_problem_naming_it(tmp_path: Path) -> None:
    (tmp_path / "vmcp.yaml").write_text(
        "apiVersion: toolhive.stacklok.dev/v1alpha1\nkind: VirtualMCPServer\nmetadata: {name: x}\n"
        "spec:\n  groupRef: {name: team}\n---\nkind: MCPServer\n"
    )
    with pytest.raises(ConfigError) as error:
        parse_config({"backends": [python_backend()], "servers": [{"file": "vmcp.yaml"}]}, base_dir=tmp_path)
    shown = [str(issue) for issue in error.value.issues]
    assert any(
        s.startswith("servers[0].file(vmcp.yaml)[0]: ")
        and "spec.groupRef 'team': toolweave has no MCPGroups" in s
        for s in shown
    ), shown
    assert any("servers[0].file(vmcp.yaml)[1]: not a VirtualMCPServer document" in s for s in shown), shown


def test_the_example_loads() -> None:
    config = parse_config(
        {
            "backends": [
                {"name": "notes", "python": "toolweave.demo.notes"},
                {"name": "docs", "command": "x"},
            ],
            "servers": [{"file": "examples/toolhive/support-vmcp.yaml"}],
        },
        base_dir=ROOT,
    )
    assert config is not None
    assert config.servers[0].tools == ["notes__search", "notes__add_note", "docs__search", "answer_and_log"]
    assert [c.name for c in config.composite_tools] == ["answer_and_log"]
