"""An OpenAPI document → one `OperationSpec` (one tool) per operation, or a reasoned skip.

Pure: a parsed document in, specs and problems out. Each operation converts on
its own, so a broken one is skipped (with the pointer and the reason) and the
rest of the document still serves.

Tool names come from `operationId` (else `method_path`), sanitised to
`[a-zA-Z0-9_-]` and cut to the room left by the backend's namespace; names
that collide after that get `_2`, `_3`... in document order.

The input schema is one object: path, query, header and cookie parameters, then
the request body, whose properties are flattened into the arguments when it is
an object (a required body, or an optional one without required properties),
or passed whole as `body` otherwise. Argument names are the parameter names,
made safe for every agent API (`[a-zA-Z0-9_.-]`, 64 characters); when two
collide the later one is suffixed with its location (`id_query`, `id_body`).
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

from toolweave.backends.errors import DocumentError
from toolweave.backends.openapi.document import Document, is_url
from toolweave.backends.openapi.refs import Refs, child
from toolweave.backends.openapi.schemas import SchemaConverter, is_object_schema
from toolweave.backends.openapi.spec import (
    BodyKind,
    BodySpec,
    Conversion,
    OperationSpec,
    ParamSpec,
    Problem,
    ValueShape,
)
from toolweave.common_types import list_at, object_at, str_at

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
MAX_NAME = 64
MAX_DESCRIPTION = 4000
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_PROP_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
"""OpenAPI 3: header parameters with these names SHALL be ignored (the gateway sets them)."""
_STYLES = {
    "path": ("simple", "label", "matrix"),
    "query": ("form", "spaceDelimited", "pipeDelimited", "deepObject"),
    "header": ("simple",),
    "cookie": ("form",),
}
_COLLECTION_FORMATS = {
    "csv": ("form", False, None),
    "ssv": ("spaceDelimited", False, None),
    "tsv": ("form", False, "\t"),
    "pipes": ("pipeDelimited", False, None),
    "multi": ("form", True, None),
}
_SWAGGER_SCHEMA_KEYS = (
    "type",
    "format",
    "items",
    "default",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "enum",
    "multipleOf",
    "x-nullable",
)


@dataclass(frozen=True, slots=True)
class ConvertOptions:
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()
    name_room: int = MAX_NAME
    """The longest tool name that still fits the exposed name (`backend__tool`) in 64 characters."""
    supplied: frozenset[tuple[str, str]] = frozenset()
    """`(in, name)` of parameters the backend's config sends itself (its API key, its fixed `headers`):
    not arguments of any tool. Header names are compared case-insensitively (`supplied_key`)."""
    output_schema: bool = True


def supplied_key(location: str, name: str) -> tuple[str, str]:
    """How a parameter is matched against `ConvertOptions.supplied`: HTTP header names are
    case-insensitive (`X-API-Key` in a config is the document's `x-api-key`); query and cookie
    names are not."""
    return (location, name.lower() if location == "header" else name)


def convert(document: Document, options: ConvertOptions | None = None) -> Conversion:
    options = options or ConvertOptions()
    data = document.data
    refs = Refs(data)
    converter = SchemaConverter(refs, document.version)
    result = Conversion(version=document.version, title=str((data.get("info") or {}).get("title") or ""))
    result.base_url = _base_url(document)
    paths = data.get("paths")
    if not isinstance(paths, dict):
        if paths is not None or "webhooks" not in data:
            result.skipped.append(Problem("/paths", "the document has no paths: no operation to convert"))
        return result
    specs: list[OperationSpec] = []
    for path, item_node in paths.items():
        item_at = child("/paths", path)
        try:
            _, item = refs.follow(item_node, item_at)
        except DocumentError as error:
            result.skipped.append(Problem(error.pointer, error.message, f"* {path}"))
            continue
        if not isinstance(item, dict):
            result.skipped.append(Problem(item_at, "a path item must be an object", f"* {path}"))
            continue
        for method in METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            at = child(item_at, method)
            label = f"{method.upper()} {path}"
            if not isinstance(operation, dict):
                result.skipped.append(Problem(at, "an operation must be an object", label))
                continue
            if not _selected(operation, path, options):
                result.filtered += 1
                continue
            builder = _OperationBuilder(document, refs, converter, options, path, method, item, operation, at)
            try:
                specs.append(builder.build())
            except DocumentError as error:
                result.skipped.append(Problem(error.pointer, error.message, _name_for(operation, label)))
                continue
            result.notes.extend(builder.notes)
    result.operations = _unique_names(specs, options.name_room)
    return result


def _name_for(operation: dict[str, Any], label: str) -> str:
    operation_id = operation.get("operationId")
    return f"{operation_id} ({label})" if isinstance(operation_id, str) and operation_id else label


def _selected(operation: dict[str, Any], path: str, options: ConvertOptions) -> bool:
    if options.include and not any(_matches(f, operation, path) for f in options.include):
        return False
    return not any(_matches(f, operation, path) for f in options.exclude)


def _matches(pattern: str, operation: dict[str, Any], path: str) -> bool:
    kind, colon, glob = pattern.partition(":")
    if colon and kind == "tag":
        tags = list_at(operation, "tags")
        return any(isinstance(t, str) and fnmatch.fnmatchcase(t, glob) for t in tags)
    if colon and kind == "path":
        return fnmatch.fnmatchcase(path, glob)
    if colon and kind == "id":
        pattern = glob
    operation_id = operation.get("operationId")
    return isinstance(operation_id, str) and fnmatch.fnmatchcase(operation_id, pattern)


def _base_url(document: Document) -> str | None:
    """The first server (3.x, variables at their defaults) or scheme + host + basePath (2.0)."""
    data = document.data
    if document.version == "2.0":
        host = data.get("host")
        base_path = str_at(data, "basePath", "")
        schemes = list_at(data, "schemes")
        scheme = "https" if "https" in schemes or not schemes else str(schemes[0])
        if isinstance(host, str) and host:
            return f"{scheme}://{host}{base_path}".rstrip("/")
        url = base_path or "/"
    else:
        servers = data.get("servers")
        server = servers[0] if isinstance(servers, list) and servers and isinstance(servers[0], dict) else {}
        url = str_at(server, "url", "/")
        variables = object_at(server, "variables")
        for name, variable in variables.items():
            default = variable.get("default") if isinstance(variable, dict) else None
            if default is not None:
                url = url.replace("{" + str(name) + "}", str(default))
    if url.startswith(("http://", "https://")):
        return url.rstrip("/")
    if is_url(document.source):
        return urljoin(document.source, url).rstrip("/")
    return None  # relative to a local file: the config's base_url must say where


@dataclass(slots=True)
class _Arguments:
    """The tool's input schema as it is assembled; names are claimed first come, first served."""

    properties: dict[str, Any] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    defs: dict[str, Any] = field(default_factory=dict)

    def claim(self, name: str, location: str) -> str:
        base = _PROP_UNSAFE.sub("_", name)[:MAX_NAME] or location
        if base not in self.properties:
            return base
        candidate = f"{base[: MAX_NAME - len(location) - 1]}_{location}"
        count = 1
        while candidate in self.properties:
            count += 1
            candidate = f"{base[: MAX_NAME - len(location) - 8]}_{location}_{count}"
        return candidate

    def add(self, prop: str, schema: Any, required: bool, defs: dict[str, Any]) -> None:
        self.properties[prop] = schema
        if required:
            self.required.append(prop)
        self.defs.update(defs)

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "object", "properties": self.properties}
        if self.required:
            out["required"] = self.required
        out["additionalProperties"] = False
        if self.defs:
            out["$defs"] = dict(sorted(self.defs.items()))
        return out


class _OperationBuilder:
    def __init__(
        self,
        document: Document,
        refs: Refs,
        converter: SchemaConverter,
        options: ConvertOptions,
        path: str,
        method: str,
        item: dict[str, Any],
        operation: dict[str, Any],
        at: str,
    ) -> None:
        self.document = document
        self.swagger = document.version == "2.0"
        self.refs = refs
        self.converter = converter
        self.options = options
        self.path = path
        self.method = method
        self.item = item
        self.operation = operation
        self.at = at
        self.label = _name_for(operation, f"{method.upper()} {path}")
        self.arguments = _Arguments()
        self.notes: list[Problem] = []
        self.responses: list[tuple[str, Any, str]] = []

    def note(self, pointer: str, message: str) -> None:
        self.notes.append(Problem(pointer, message, self.label))

    def build(self) -> OperationSpec:
        params, swagger_body, form_params = self._parameters()
        specs = [self._parameter(node, at) for node, at in params]
        body = self._swagger_body(swagger_body, form_params) if self.swagger else self._request_body()
        self._check_path_template(specs)
        input_schema = self.arguments.schema()
        self.responses = self._success_responses()
        output_schema = self._output_schema() if self.options.output_schema else None
        operation = self.operation
        summary = str_at(operation, "summary", "")
        return OperationSpec(
            tool=_base_name(operation.get("operationId"), self.method, self.path),
            method=self.method.upper(),
            path=self.path,
            description=_description(operation),
            input_schema=input_schema,
            params=tuple(spec for spec in specs if spec is not None),
            body=body,
            output_schema=output_schema,
            annotations=_annotations(self.method),
            title=summary.strip() or None,
            needs_auth=_needs_auth(operation, self.document.data),
            accept=self._accept(),
            operation_id=operation.get("operationId")
            if isinstance(operation.get("operationId"), str)
            else None,
            pointer=self.at,
        )

    # -- parameters -------------------------------------------------------------

    def _parameters(
        self,
    ) -> tuple[
        list[tuple[dict[str, Any], str]], tuple[dict[str, Any], str] | None, list[tuple[dict[str, Any], str]]
    ]:
        """Path-level then operation-level parameters (the latter win per name + location), resolved."""
        merged: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
        for owner, owner_at in ((self.item, child(self.at.rsplit("/", 1)[0])), (self.operation, self.at)):
            nodes = owner.get("parameters")
            if nodes is None:
                continue
            if not isinstance(nodes, list):
                raise DocumentError(child(owner_at, "parameters"), "parameters must be a list")
            for index, node in enumerate(nodes):
                at = child(owner_at, "parameters", index)
                pointer, param = self.refs.follow(node, at)
                if not isinstance(param, dict):
                    raise DocumentError(pointer, "a parameter must be an object")
                name, location = param.get("name"), param.get("in")
                if not isinstance(name, str) or not name:
                    raise DocumentError(pointer, "a parameter needs a name")
                if location not in ("path", "query", "header", "cookie", "body", "formData"):
                    raise DocumentError(
                        pointer, f"parameter {name!r} has an unknown location 'in: {location}'"
                    )
                merged[(name, location)] = (param, pointer)
        order = {"path": 0, "query": 1, "header": 2, "cookie": 3, "formData": 4, "body": 5}
        ordered = sorted(merged.values(), key=lambda pair: order[pair[0]["in"]])
        plain = [pair for pair in ordered if pair[0]["in"] not in ("body", "formData")]
        bodies = [pair for pair in ordered if pair[0]["in"] == "body"]
        forms = [pair for pair in ordered if pair[0]["in"] == "formData"]
        if len(bodies) > 1:
            raise DocumentError(bodies[1][1], "more than one body parameter")
        return plain, (bodies[0] if bodies else None), forms

    def _parameter(self, param: dict[str, Any], at: str) -> ParamSpec | None:
        name, location = param["name"], param["in"]
        if location == "header" and name.lower() in _IGNORED_HEADERS:
            return None
        if supplied_key(location, name) in self.options.supplied:
            return None  # the gateway sends this one itself (a credential, a fixed header)
        schema, defs, json_content = self._parameter_schema(param, at)
        style, explode, delimiter = self._style(param, at, location)
        resolved = self._resolved_shape(schema, defs)
        if style == "deepObject" and resolved != "object":
            self.note(at, f"parameter {name!r}: style deepObject on a non-object schema; sent in form style")
            style, explode = "form", True
        prop = self.arguments.claim(name, location)
        description = param.get("description")
        if isinstance(description, str) and description.strip() and isinstance(schema, dict):
            schema = {**schema, "description": description.strip()}
        if param.get("deprecated") is True and isinstance(schema, dict):
            schema = {**schema, "deprecated": True}
        if "example" in param and isinstance(schema, dict) and "examples" not in schema:
            schema = {**schema, "examples": [param["example"]]}
        required = location == "path" or param.get("required") is True
        self.arguments.add(prop, schema, required, defs)
        return ParamSpec(
            prop=prop,
            name=name,
            location=location,
            style=style,
            explode=explode,
            shape=resolved,
            allow_reserved=param.get("allowReserved") is True,
            json=json_content,
            delimiter=delimiter,
        )

    def _parameter_schema(self, param: dict[str, Any], at: str) -> tuple[Any, dict[str, Any], bool]:
        if self.swagger:
            node = {key: param[key] for key in _SWAGGER_SCHEMA_KEYS if key in param}
            if param.get("type") == "file":
                raise DocumentError(
                    at, f"parameter {param['name']!r} is a file upload, which a tool call cannot carry"
                )
            schema, defs = self.converter.convert(node, at, "input")
            return schema, defs, False
        if "schema" in param:
            schema, defs = self.converter.convert(param["schema"], child(at, "schema"), "input")
            return schema, defs, False
        content = param.get("content")
        if isinstance(content, dict) and content:
            media, entry = next(iter(content.items()))
            node = entry.get("schema", {}) if isinstance(entry, dict) else {}
            schema, defs = self.converter.convert(node, child(at, "content", media, "schema"), "input")
            return schema, defs, _is_json(media)
        return {"type": "string"}, {}, False

    def _style(self, param: dict[str, Any], at: str, location: str) -> tuple[str, bool, str | None]:
        if self.swagger:
            collection = param.get("collectionFormat", "csv")
            if collection not in _COLLECTION_FORMATS or (
                collection == "multi" and location not in ("query",)
            ):
                raise DocumentError(
                    at, f"parameter {param['name']!r}: collectionFormat {collection!r} is not valid here"
                )
            style, explode, delimiter = _COLLECTION_FORMATS[collection]
            if location in ("path", "header"):
                style = "simple"
            return style, explode, delimiter
        default = {"path": "simple", "query": "form", "header": "simple", "cookie": "form"}[location]
        style = param.get("style", default)
        if style not in _STYLES[location]:
            raise DocumentError(
                at, f"parameter {param['name']!r}: style {style!r} is not valid in {location}"
            )
        explode = param.get("explode", style == "form")
        return style, explode is True, None

    def _resolved_shape(self, schema: Any, defs: dict[str, Any]) -> ValueShape:
        for _ in range(8):
            if not isinstance(schema, dict):
                return "primitive"
            ref = schema.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                schema = defs.get(ref.removeprefix("#/$defs/"))
                continue
            break
        kind = schema.get("type") if isinstance(schema, dict) else None
        kinds = kind if isinstance(kind, list) else [kind]
        if "array" in kinds:
            return "array"
        if "object" in kinds or (isinstance(schema, dict) and kind is None and "properties" in schema):
            return "object"
        return "primitive"

    def _check_path_template(self, specs: list[ParamSpec | None]) -> None:
        declared = {spec.name for spec in specs if spec is not None and spec.location == "path"}
        used = re.findall(r"\{([^{}]+)\}", self.path)
        missing = [name for name in used if name not in declared]
        if missing:
            raise DocumentError(
                self.at, f"path parameter(s) {', '.join(missing)} of {self.path} are not declared"
            )

    # -- request bodies ---------------------------------------------------------

    def _request_body(self) -> BodySpec | None:
        node = self.operation.get("requestBody")
        if node is None:
            return None
        at = child(self.at, "requestBody")
        pointer, body = self.refs.follow(node, at)
        if not isinstance(body, dict):
            raise DocumentError(pointer, "a requestBody must be an object")
        required = body.get("required") is True
        content = body.get("content")
        if not isinstance(content, dict) or not content:
            return None
        chosen = _choose_media(content)
        if chosen is None:
            types = ", ".join(sorted(str(key) for key in content))
            message = (
                f"request body type(s) {types} are not supported (JSON, form, multipart and text/plain are)"
            )
            if required:
                raise DocumentError(child(pointer, "content"), message)
            self.note(child(pointer, "content"), message + "; the optional body was left out")
            return None
        media, kind = chosen
        entry = content[media] if isinstance(content[media], dict) else {}
        schema_node = entry.get("schema", {})
        description = str_at(body, "description", None)
        return self._body(
            kind, media, schema_node, child(pointer, "content", media, "schema"), required, description
        )

    def _swagger_body(
        self, body: tuple[dict[str, Any], str] | None, forms: list[tuple[dict[str, Any], str]]
    ) -> BodySpec | None:
        consumes = self.operation.get("consumes", self.document.data.get("consumes"))
        consumes = [c for c in consumes if isinstance(c, str)] if isinstance(consumes, list) else []
        if body is not None:
            param, at = body
            json_ok = not consumes or any(_is_json(c) or c == "*/*" for c in consumes)
            if not json_ok:
                message = f"body type(s) {', '.join(consumes)} are not supported (JSON is)"
                if param.get("required") is True:
                    raise DocumentError(at, message)
                self.note(at, message + "; the optional body was left out")
                return None
            media = next((c for c in consumes if _is_json(c)), "application/json")
            description = str_at(param, "description", None)
            return self._body(
                "json",
                media,
                param.get("schema", {}),
                child(at, "schema"),
                param.get("required") is True,
                description,
            )
        if not forms:
            return None
        multipart = "multipart/form-data" in consumes or any(p.get("type") == "file" for p, _ in forms)
        kind: BodyKind = "multipart" if multipart else "form"
        media = "multipart/form-data" if multipart else "application/x-www-form-urlencoded"
        fields: dict[str, str] = {}
        for param, at in forms:
            if param.get("type") == "file":
                if param.get("required") is True:
                    raise DocumentError(
                        at, f"form field {param['name']!r} is a file upload, which a tool call cannot carry"
                    )
                self.note(
                    at,
                    f"the optional file field {param['name']!r} was left out (a tool call cannot carry a file)",
                )
                continue
            schema, defs, _ = self._parameter_schema(param, at)
            if isinstance(param.get("description"), str) and isinstance(schema, dict):
                schema = {**schema, "description": param["description"]}
            prop = self.arguments.claim(param["name"], "body")
            self.arguments.add(prop, schema, param.get("required") is True, defs)
            fields[prop] = param["name"]
        return BodySpec(
            kind=kind,
            media_type=media,
            fields=fields,
            required=any(p.get("required") is True for p, _ in forms),
        )

    def _body(
        self, kind: BodyKind, media: str, node: Any, at: str, required: bool, description: str | None
    ) -> BodySpec:
        schema, defs = self.converter.convert(node, at, "input")
        if kind == "text":
            schema = {"type": "string", **({"description": description} if description else {})}
            prop = self.arguments.claim("body", "body")
            self.arguments.add(prop, schema, required, {})
            return BodySpec(kind="text", media_type=media, prop=prop, required=required)
        if kind == "multipart":
            schema = self._without_files(schema, defs, at)
        flat = _flattenable(schema) and (required or not schema.get("required"))
        if not flat:
            if kind != "json" and not _object_like(schema):
                raise DocumentError(
                    at, f"a {media} body must be an object schema (its fields are the form's)"
                )
            if description and isinstance(schema, dict) and "description" not in schema:
                schema = {**schema, "description": description}
            prop = self.arguments.claim("body", "body")
            self.arguments.add(prop, schema, required, defs)
            return BodySpec(kind=kind, media_type=media, prop=prop, required=required)
        fields: dict[str, str] = {}
        inner_required = set(schema.get("required") or []) if required else set()
        for name, prop_schema in (schema.get("properties") or {}).items():
            prop = self.arguments.claim(name, "body")
            self.arguments.add(prop, prop_schema, name in inner_required, {})
            fields[prop] = name
        self.arguments.defs.update(defs)
        return BodySpec(kind=kind, media_type=media, fields=fields, required=required)

    def _without_files(self, schema: Any, defs: dict[str, Any], at: str) -> Any:
        """A multipart schema minus its optional file fields (a required one skips the operation)."""
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(properties, dict):
            return schema
        required = set(schema.get("required") or [])
        kept = {}
        for name, prop in properties.items():
            if not _is_file(prop, defs):
                kept[name] = prop
            elif name in required:
                raise DocumentError(
                    at, f"multipart field {name!r} is a file upload, which a tool call cannot carry"
                )
            else:
                self.note(
                    at, f"the optional file field {name!r} was left out (a tool call cannot carry a file)"
                )
        return {**schema, "properties": kept} if len(kept) != len(properties) else schema

    # -- responses ---------------------------------------------------------------

    def _success_responses(self) -> list[tuple[str, Any, str]]:
        responses = self.operation.get("responses")
        if not isinstance(responses, dict):
            return []
        out = []
        for code in sorted(str(c) for c in responses):
            if code.startswith("2"):
                at = child(self.at, "responses", code)
                try:
                    pointer, response = self.refs.follow(
                        responses.get(code, responses.get(int(code) if code.isdigit() else code)), at
                    )
                except DocumentError as error:
                    self.note(error.pointer, f"response {code}: {error.message}")
                    continue
                out.append((code, response, pointer))
        return out

    def _response_media(self, response: Any) -> list[tuple[str, Any]]:
        """(media type, schema node) pairs of a response."""
        if not isinstance(response, dict):
            return []
        if self.swagger:
            if "schema" not in response:
                return []
            produces = self.operation.get("produces", self.document.data.get("produces"))
            produces = [p for p in produces if isinstance(p, str)] if isinstance(produces, list) else []
            return [(media, response["schema"]) for media in (produces or ["application/json"])]
        content = response.get("content")
        if not isinstance(content, dict):
            return []
        return [
            (str(media), (entry or {}).get("schema") if isinstance(entry, dict) else None)
            for media, entry in content.items()
        ]

    def _accept(self) -> str:
        medias: list[str] = []
        for _code, response, _at in self.responses:
            for media, _ in self._response_media(response):
                if media not in medias:
                    medias.append(media)
        if not medias:
            return "application/json, */*;q=0.5"
        if any(_is_json(m) for m in medias):
            return "application/json, */*;q=0.5"
        return ", ".join(medias[:8])

    def _output_schema(self) -> dict[str, Any] | None:
        """The 2xx JSON response schema when it is an object and every 2xx response returns it."""
        found: dict[str, Any] | None = None
        for code, response, pointer in self.responses:
            json_schemas = [
                (m, s) for m, s in self._response_media(response) if _is_json(m) and s is not None
            ]
            if not json_schemas or found is not None:
                return None  # a 2xx without a JSON body (204...) or a second 2xx shape: no single schema
            media, node = json_schemas[0]
            at = child(pointer, "schema") if self.swagger else child(pointer, "content", media, "schema")
            try:
                schema, defs = self.converter.convert(node, at, "output")
            except DocumentError as error:
                self.note(error.pointer, f"response {code}: {error.message}; no outputSchema")
                return None
            if not is_object_schema(schema):
                return None
            found = {**schema, "type": "object"}
            if defs:
                found["$defs"] = defs
        return found


def _flattenable(schema: Any) -> bool:
    if not is_object_schema(schema) or not schema.get("properties"):
        return False
    if any(key in schema for key in ("allOf", "anyOf", "oneOf", "patternProperties", "if", "not", "$ref")):
        return False
    extra = schema.get("additionalProperties")
    return extra is None or extra is False


def _object_like(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    return kind is None or kind == "object" or (isinstance(kind, list) and "object" in kind)


def _is_file(schema: Any, defs: dict[str, Any]) -> bool:
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        schema = defs.get(schema["$ref"].removeprefix("#/$defs/"), {})
    if not isinstance(schema, dict):
        return False
    if schema.get("type") == "array":
        return _is_file(schema.get("items"), defs)
    return schema.get("format") in ("binary", "base64") or "contentMediaType" in schema


_OTHER_MEDIA: tuple[tuple[str, BodyKind], ...] = (
    ("application/x-www-form-urlencoded", "form"),
    ("multipart/form-data", "multipart"),
    ("text/plain", "text"),
)


def _choose_media(content: dict[str, Any]) -> tuple[str, BodyKind] | None:
    medias = [str(m) for m in content]
    for media in medias:
        if _is_json(media):
            return media, "json"
    for media, kind in _OTHER_MEDIA:
        for candidate in medias:
            if candidate.split(";")[0].strip().lower() == media:
                return candidate, kind
    if "*/*" in medias:
        return "*/*", "json"
    return None


def _is_json(media: str) -> bool:
    base = media.split(";")[0].strip().lower()
    return base == "application/json" or base.endswith("+json") or base == "text/json"


def _description(operation: dict[str, Any]) -> str:
    parts = [
        operation[key].strip()
        for key in ("summary", "description")
        if isinstance(operation.get(key), str) and operation[key].strip()
    ]
    if len(parts) == 2 and parts[1].startswith(parts[0]):
        parts = parts[1:]
    text = "\n\n".join(parts)
    if operation.get("deprecated") is True:
        text = "Deprecated. " + text
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


def _annotations(method: str) -> dict[str, Any]:
    """MCP hints from the HTTP method's own semantics (RFC 9110)."""
    if method in ("get", "head", "options", "trace"):
        return {"readOnlyHint": True, "openWorldHint": True}
    if method == "delete":
        return {"destructiveHint": True, "idempotentHint": True, "openWorldHint": True}
    if method == "put":
        return {"idempotentHint": True, "openWorldHint": True}
    return {"openWorldHint": True}


def _needs_auth(operation: dict[str, Any], data: dict[str, Any]) -> bool:
    """False only for an operation that says `security: []` (explicitly public)."""
    security = operation.get("security", data.get("security"))
    return not (isinstance(security, list) and not security)


def _base_name(operation_id: Any, method: str, path: str) -> str:
    raw = operation_id if isinstance(operation_id, str) and operation_id.strip() else f"{method}_{path}"
    return re.sub("_{2,}", "_", _NAME_UNSAFE.sub("_", raw)).strip("_") or method


def _unique_names(specs: list[OperationSpec], room: int) -> list[OperationSpec]:
    """Cut names to `room` (keeping them apart with a short hash) and suffix the rest of each collision."""
    from dataclasses import replace

    taken: set[str] = set()
    out: list[OperationSpec] = []
    for spec in specs:
        name = _fit(spec.tool, room)
        count = 1
        while name in taken:
            count += 1
            suffix = f"_{count}"
            name = _fit(spec.tool, room - len(suffix)) + suffix
        taken.add(name)
        out.append(replace(spec, tool=name) if name != spec.tool else spec)
    return out


def _fit(name: str, room: int) -> str:
    if len(name) <= room:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return f"{name[: room - 9]}_{digest}"
