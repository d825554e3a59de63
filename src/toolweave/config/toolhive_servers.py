"""ToolHive `VirtualMCPServer` resources as `[[servers]]` entries (and their inline composite tools).

A `[[servers]]` entry `{file = "vmcp.yaml"}` loads the virtual servers of a YAML file (one document
or several); a document of kind `VirtualMCPServer` is translated:

- `metadata.name` → `name`; `spec.aggregation.tools[]`: each `workload` is a backend of that name,
  its `filter` the tools selected (`workload__tool`), no filter the whole backend, its `overrides`
  (`name`, `description`) this server's overrides;
- `spec.compositeTools[]` → composite tools (ToolHive workflows, their Go templates translated as
  `VirtualMCPCompositeToolDefinition`s are), each selected by the server; a parameter map
  (`{x: {type, required}}`) becomes a JSON Schema object;
- `spec.compositeToolRefs[].name` → selected by that name.

What toolweave has no counterpart for is a problem naming it, never silently dropped: a `groupRef`
without `aggregation.tools` (toolweave has no MCPGroups: list the group's workloads there), a
`toolConfigRef`. Settings that belong to the gateway rather than to one server (`incomingAuth`,
`outgoingAuth`, `tokenCache`, `operational`, `podTemplateSpec`) are ignored: the gateway's own
`[auth]`, backends and limits apply.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolweave.composite.workflow.toolhive import API_GROUP, TOOLHIVE_KIND

SERVER_KIND = "VirtualMCPServer"


def is_virtual_server(doc: Any) -> bool:
    return isinstance(doc, Mapping) and doc.get("kind") == SERVER_KIND


def translate_server(doc: Mapping[str, Any], separator: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the `[[servers]]` entry, the composite definitions it brings); ValueError lists every problem."""
    errors: list[str] = []
    api = doc.get("apiVersion")
    if not isinstance(api, str) or not api.startswith(API_GROUP):
        errors.append(f"apiVersion must be {API_GROUP}<version> for a {SERVER_KIND} (got {api!r})")
    metadata = doc.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        errors.append("metadata.name is required (it becomes the server's name)")
    spec = doc.get("spec")
    if not isinstance(spec, Mapping):
        raise ValueError("; ".join([*errors, f"a {SERVER_KIND} needs a 'spec' mapping"]))
    server: dict[str, Any] = {"name": name, "tools": [], "backends": [], "overrides": {}}
    aggregation = spec.get("aggregation") or {}
    workloads = aggregation.get("tools") if isinstance(aggregation, Mapping) else None
    if workloads:
        for index, workload in enumerate(workloads if isinstance(workloads, list) else []):
            _workload(workload, f"spec.aggregation.tools[{index}]", separator, server, errors)
    elif spec.get("groupRef") is not None:
        group = spec["groupRef"].get("name") if isinstance(spec["groupRef"], Mapping) else spec["groupRef"]
        errors.append(
            f"spec.groupRef {group!r}: toolweave has no MCPGroups; list the group's workloads under "
            "spec.aggregation.tools (each workload is the toolweave backend of that name)"
        )
    composites = []
    for index, tool in enumerate(spec.get("compositeTools") or []):
        where = f"spec.compositeTools[{index}]"
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
            errors.append(f"{where}: a composite tool needs a name")
            continue
        composites.append({"apiVersion": api, "kind": TOOLHIVE_KIND, "spec": _with_schema(tool)})
        server["tools"].append(tool["name"])
    for index, ref in enumerate(spec.get("compositeToolRefs") or []):
        ref_name = ref.get("name") if isinstance(ref, Mapping) else None
        if not isinstance(ref_name, str):
            errors.append(f"spec.compositeToolRefs[{index}]: needs a name")
            continue
        server["tools"].append(ref_name)
    if errors:
        raise ValueError("cannot import this VirtualMCPServer: " + "; ".join(errors))
    return {key: value for key, value in server.items() if value}, composites


def _workload(workload: Any, where: str, separator: str, server: dict[str, Any], errors: list[str]) -> None:
    if not isinstance(workload, Mapping) or not isinstance(workload.get("workload"), str):
        errors.append(f"{where}: needs a 'workload' (a backend's name)")
        return
    backend = workload["workload"]
    if workload.get("toolConfigRef") is not None:
        errors.append(
            f"{where}.toolConfigRef: MCPToolConfig resources are not imported; give the tools inline "
            "as 'filter' and 'overrides'"
        )
    tools = workload.get("filter") or []
    if tools:
        server["tools"].extend(f"{backend}{separator}{tool}" for tool in tools)
    else:
        server["backends"].append(backend)
    for tool, override in (workload.get("overrides") or {}).items():
        if not isinstance(override, Mapping):
            errors.append(f"{where}.overrides.{tool}: must be a mapping with name and/or description")
            continue
        kept = {key: override[key] for key in ("name", "description") if override.get(key) is not None}
        server["overrides"][f"{backend}{separator}{tool}"] = kept


def _with_schema(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A ToolHive parameter map (`{x: {type: string, required: true}}`) as the JSON Schema it means."""
    spec = dict(tool)
    parameters = spec.get("parameters")
    if isinstance(parameters, Mapping) and parameters.get("type") != "object":
        properties: dict[str, Any] = {}
        required = []
        for name, param in parameters.items():
            param = dict(param) if isinstance(param, Mapping) else {}
            if param.pop("required", False) is True:
                required.append(name)
            properties[name] = param
        spec["parameters"] = {"type": "object", "properties": properties, "required": required}
    return spec
