"""HTTP APIs as backends: an OpenAPI document (`openapi = ...`) or declared actions (`http = ...`).

One `httpx2.AsyncClient` per backend (keep-alive, at most `max_concurrency`
connections, default 64) serves every call of every session and tenant.

Start-up loads and converts the document off the event loop, publishes the
tools, and then validates the document in a child process (the validator is
CPU-heavy on large documents) and logs what it finds; `toolweave validate`
waits for that verdict. A document URL that cannot be fetched is tried again
with backoff, like an MCP server that is down.

A call: arguments → request (`encoding`), credentials (`auth`) for the caller,
send with a deadline of the tool's timeout, retry idempotent methods after a
connection failure or a 502/503/504, follow same-origin redirects only (the
credentials never go to another host), read at most `max_response_bytes`, and
turn the response into a result (`results`). Messages name the operation
(`GET /pets/{petId}`), never the final URL, which may carry a query API key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import orjson
from jsonschema.protocols import Validator
from mcp.client.auth import OAuthFlowError

from toolweave import tracing
from toolweave.backends.base import Backend, TokenAuth, unavailable_result
from toolweave.backends.errors import ArgumentError, AuthorizationRequired, AuthUnavailable
from toolweave.backends.http.actions import action_spec
from toolweave.backends.http.auth import (
    AuthPlan,
    Credentials,
    TokenCache,
    apply_auth,
    config_credentials,
    missing_fields,
    missing_message,
    plan_auth,
    supplied_parameters,
)
from toolweave.backends.http.encoding import RequestParts, build_request
from toolweave.backends.http.naming import name_room
from toolweave.backends.http.oauth import ApiAuthServer, api_auth_server
from toolweave.backends.http.results import error_response, excerpt, scrub, success_response
from toolweave.backends.openapi import (
    MAX_DOCUMENT_BYTES,
    ConvertOptions,
    Document,
    DocumentUnusable,
    OperationSpec,
    Problem,
    convert,
    is_url,
    parse_document,
    read_file,
    validation,
)
from toolweave.bounded import read_bounded
from toolweave.config.models import BackendConfig
from toolweave.results import error_result
from toolweave.schemas.validate import compile_validator

logger = logging.getLogger("toolweave.backends.http")

DEFAULT_CONNECTIONS = 64
MAX_KEEPALIVE = 32
MAX_REDIRECTS = 5
INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 60.0
VALIDATION_TIMEOUT = 600.0
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})
_RETRY_STATUS = frozenset({502, 503, 504})


class HttpApiBackend(Backend):
    """The tools of one HTTP API; calls go out on one shared keep-alive client."""

    def __init__(self, config: BackendConfig, **_options: Any) -> None:
        super().__init__(config)
        self._ops: dict[str, OperationSpec] = {}
        self._validators: dict[str, Validator | None] = {}
        self._client: httpx2.AsyncClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._validation: asyncio.Task[list[Problem]] | None = None
        self._semaphore = asyncio.Semaphore(config.max_concurrency) if config.max_concurrency else None
        self.base_url: str | None = None
        self.plan: AuthPlan | None = None
        self.credentials = config_credentials(config.auth, config.headers)
        self.tokens = TokenCache()
        self.skipped: list[Problem] = []
        self.notes: list[Problem] = []
        self.document: Document | None = None
        self.oauth_server: ApiAuthServer | None = None
        """`[backends.oauth]`: the API's authorization server (from the document or the issuer)."""

    # -- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        if self._task is not None:
            return
        connections = self.config.max_concurrency or DEFAULT_CONNECTIONS
        self._client = httpx2.AsyncClient(
            limits=httpx2.Limits(
                max_connections=connections, max_keepalive_connections=min(connections, MAX_KEEPALIVE)
            ),
            timeout=httpx2.Timeout(self.config.timeout, connect=self.config.connect_timeout),
            follow_redirects=False,
            headers={"User-Agent": "toolweave"},
        )
        self._task = asyncio.create_task(self._load_until_ready(), name=f"backend:{self.name}")

    async def stop(self) -> None:
        for task in (self._task, self._validation):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        self._set_status("stopped")
        self._ready.set()

    def _prepare_restart(self) -> None:
        self._task = None

    async def _load_until_ready(self) -> None:
        backoff = INITIAL_BACKOFF
        while True:
            try:
                await self._load()
            except DocumentUnusable as error:
                message = str(error)
            except ValueError as error:  # a config that does not fit the document (auth, base_url)
                message = str(error)
                self._fail(message)
                return
            else:
                self._ready.set()
                return
            self._fail(message)
            if not (self.config.openapi and is_url(self.config.openapi)):
                return  # a local file does not change by waiting
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    def _fail(self, message: str) -> None:
        logger.error("backend %s: %s", self.name, message)
        self._set_status("failed" if not self._ready.is_set() else "reconnecting", message)
        self._ready.set()

    async def _load(self) -> None:
        if self.config.http:
            specs = [action_spec(action, self.config.http) for action in self.config.actions]
            self.base_url = self.config.http
            self.plan = plan_auth(self.config.auth, None)
            await self._find_auth_server(None)
            self._publish(specs)
            return
        document = await self._read_document()
        self.plan = plan_auth(self.config.auth, document.data)
        await self._find_auth_server(document.data)
        options = ConvertOptions(
            include=self.config.include,
            exclude=self.config.exclude,
            name_room=name_room(self.config),
            supplied=supplied_parameters(self.plan, self.config.headers),
            output_schema=self.config.output_schema,
        )
        conversion = await asyncio.to_thread(convert, document, options)
        base = self.config.base_url or conversion.base_url
        if not base:
            raise ValueError(
                f"the document {self.config.openapi} names no absolute server URL; set base_url on the backend"
            )
        self.document, self.base_url = document, base.rstrip("/")
        self.skipped, self.notes = conversion.skipped, conversion.notes
        for problem in conversion.skipped:
            logger.warning("backend %s: operation skipped: %s", self.name, problem)
        self._publish(conversion.operations)
        self._validation = asyncio.create_task(self._validate(document), name=f"validate:{self.name}")

    async def _find_auth_server(self, document: dict[str, Any] | None) -> None:
        if self.config.oauth is None:
            return
        assert self._client is not None
        self.oauth_server = await api_auth_server(self.config.oauth, document, self._client)
        logger.info(
            "backend %s: users authorize at %s (%s)",
            self.name,
            self.oauth_server.metadata.authorization_endpoint,
            self.oauth_server.source,
        )

    async def _read_document(self) -> Document:
        source = self.config.openapi or ""
        if not is_url(source):
            raw, where = await asyncio.to_thread(read_file, source, Path.cwd())
            return await asyncio.to_thread(parse_document, raw, where)
        assert self._client is not None
        try:
            async with self._client.stream(
                "GET", source, headers={"Accept": "application/json, */*"}
            ) as response:
                if response.status_code != 200:
                    raise DocumentUnusable(
                        f"cannot fetch the OpenAPI document {source}: HTTP {response.status_code}"
                    )
                fetched = await read_bounded(response, MAX_DOCUMENT_BYTES)
        except httpx2.HTTPError as error:
            raise DocumentUnusable(
                f"cannot fetch the OpenAPI document {source}: {_transport_reason(error)}"
            ) from None
        if fetched is None:
            raise DocumentUnusable(
                f"the OpenAPI document {source} is over {MAX_DOCUMENT_BYTES} bytes; refused"
            )
        return await asyncio.to_thread(parse_document, fetched, source)

    def _publish(self, specs: list[OperationSpec]) -> None:
        self._ops = {spec.tool: spec for spec in specs}
        self._validators = {}
        self.tools = [_tool(spec) for spec in specs]
        self._set_status("connected")

    async def _validate(self, document: Document) -> list[Problem]:
        """The validator's verdict, from a child process; logged once, kept for `problems()`."""
        problems = await _validate_in_child(document.data)
        for problem in problems[:20]:
            logger.warning("backend %s: document problem %s", self.name, problem)
        if len(problems) > 20:
            logger.warning(
                "backend %s: %d more document problems (toolweave validate lists them)",
                self.name,
                len(problems) - 20,
            )
        return problems

    async def problems(self) -> list[str]:
        """What `toolweave validate` reports: the document's problems (waits for the validator)."""
        if self._validation is None:
            return []
        return [f"{self.config.openapi}{problem}" for problem in await self._validation]

    def warnings(self) -> list[str]:
        """Operations skipped or converted with something left out (reported, not failed)."""
        return [f"skipped {problem}" for problem in self.skipped] + [
            f"note {problem}" for problem in self.notes
        ]

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info["skipped_operations"] = len(self.skipped)
        return info

    # -- tenants -------------------------------------------------------------------

    def connection_view(self, connection: Mapping[str, str], owner: str) -> Backend:
        """This backend with a tenant's connection laid over the config's credentials (same client)."""
        return _TenantView(self, self.credentials.over(connection, self.plan, owner))

    def public(self, name: str) -> bool:
        """Whether tool `name` is an operation that needs no credential (`security: []`)."""
        op = self._ops.get(name)
        return op is not None and not op.needs_auth

    def grant_view(self, token_auth: TokenAuth) -> Backend:
        """This backend as one OAuth grant's owner calls it (`[backends.oauth]`): their token flow."""
        return _TenantView(self, self.credentials, token_auth)

    # -- calls ---------------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None = None,
        progress: Any = None,
    ) -> types.CallToolResult:
        return await self.call_with(name, arguments, timeout, self.credentials)

    async def call_with(
        self,
        name: str,
        arguments: dict[str, Any],
        timeout: float | None,
        creds: Credentials,
        token_auth: TokenAuth | None = None,
    ) -> types.CallToolResult:
        """`token_auth`: the caller's OAuth grant (`[backends.oauth]`), for operations that need one."""
        op = self._ops.get(name)
        if self.status != "connected" or self._client is None:
            return unavailable_result(self.name, self.status, self.last_error)
        if op is None:
            return error_result(f"backend {self.name!r} has no tool {name!r}")
        if self.config.oauth is not None and op.needs_auth and token_auth is None:
            return error_result(
                f"backend {self.name!r}: {op.label} needs the caller's own authorization, and this call "
                "carries none. Nothing was called."
            )
        limit = timeout if timeout is not None else self.config.timeout
        try:
            async with asyncio.timeout(limit):
                if self._semaphore is None:
                    return await self._send(op, arguments, creds, limit, token_auth)
                async with self._semaphore:
                    return await self._send(op, arguments, creds, limit, token_auth)
        except TimeoutError:
            return error_result(
                f"{op.label} on backend {self.name!r} timed out after {limit:g}s: the API did not answer in time"
                + ("" if op.method in _IDEMPOTENT else "; it may or may not have acted on the request")
            )

    async def _send(
        self,
        op: OperationSpec,
        arguments: Mapping[str, Any],
        creds: Credentials,
        limit: float,
        token_auth: TokenAuth | None = None,
    ) -> types.CallToolResult:
        """One call: retries (idempotent methods), an OAuth2 refresh after a 401, same-origin redirects.
        With `token_auth` (a user's grant) the token flow refreshes, or says a person must authorize."""
        assert self._client is not None and self.base_url is not None
        try:
            parts = build_request(op, arguments)
        except ArgumentError as error:
            return error_result(f"{op.label}: {error}. Nothing was called.")
        plan = self.plan if op.needs_auth else None
        if plan is not None and (missing := missing_fields(plan, creds)):
            return error_result(missing_message(self.name, plan, creds, missing))
        secrets = creds.secrets
        auth = token_auth.auth if token_auth is not None and op.needs_auth else None
        token: str | None = None
        refreshed = False
        attempt = redirects = 0
        redirect_to: str | None = None
        while True:
            try:
                url, headers, token = await self._authorized(
                    op, parts, plan, creds, token if refreshed else None
                )
            except AuthUnavailable as error:
                return error_result(f"{op.label}: {scrub(str(error), secrets)}. Nothing was called.")
            if token:
                secrets = [*secrets, token]
            try:
                status, reason, response_headers, body = await self._exchange(
                    op, redirect_to or url, headers, parts, limit, auth
                )
            except httpx2.TimeoutException:
                raise TimeoutError from None
            except (AuthorizationRequired, OAuthFlowError) as error:
                return error_result(f"backend {self.name!r}: {scrub(str(error), secrets)}")
            except httpx2.TransportError as error:
                if op.method in _IDEMPOTENT and attempt < self.config.retries and _retryable(error):
                    attempt += 1
                    await _backoff(attempt)
                    continue
                reason_text = scrub(_transport_reason(error), secrets)
                return error_result(
                    f"{op.label} on backend {self.name!r}: cannot reach the API ({reason_text})"
                )
            if token_auth is not None and (bearer := token_auth.bearer()):
                secrets = [*secrets, bearer.removeprefix("Bearer ")]
            if body is None:
                return error_result(
                    f"{op.label}: the response is larger than {self.config.max_response_bytes} bytes "
                    "(the backend's max_response_bytes); ask for less (filters, pagination)"
                )
            if status == 401 and plan is not None and plan.type == "oauth2" and not refreshed:
                refreshed = True  # the token was revoked or expired early: fetch a new one, once
                continue
            if status in _RETRY_STATUS and op.method in _IDEMPOTENT and attempt < self.config.retries:
                attempt += 1
                await _backoff(attempt)
                continue
            target = self._same_origin_redirect(op, status, response_headers)
            if target is not None and redirects < MAX_REDIRECTS:
                redirects += 1
                redirect_to = target
                continue
            return self._result(op, parts.path, status, reason, response_headers, body, secrets)

    async def _authorized(
        self,
        op: OperationSpec,
        parts: RequestParts,
        plan: AuthPlan | None,
        creds: Credentials,
        stale: str | None,
    ) -> tuple[str, dict[str, str], str | None]:
        """(URL, headers, OAuth2 token used) of one attempt, the credential added where it goes."""
        assert self._client is not None and self.base_url is not None
        headers = {**creds.headers, "Accept": op.accept, **parts.headers}
        traced = tracing.outgoing()
        if traced is not None:
            headers.update(traced)
        query, cookies = list(parts.query), list(parts.cookies)
        token = None
        if plan is not None:
            token = await apply_auth(
                plan, creds, headers, query, cookies, self.tokens, self._client, stale=stale
            )
        if cookies:
            headers["Cookie"] = "; ".join(f"{name}={value}" for name, value in cookies)
        url = self.base_url + parts.path + ("?" + "&".join(f"{k}={v}" for k, v in query) if query else "")
        return url, headers, token

    def _result(
        self,
        op: OperationSpec,
        path: str,
        status: int,
        reason: str,
        headers: httpx2.Headers,
        body: bytes,
        secrets: list[str],
    ) -> types.CallToolResult:
        assert self.base_url is not None
        if 200 <= status < 300:
            uri = self.base_url + path
            return success_response(
                op, status, headers.get("content-type"), body, uri, self._validator(op), secrets
            )
        extra = ""
        if 300 <= status < 400 and headers.get("location"):
            extra = f"Redirect to {scrub(headers['location'], secrets)} not followed (only same-origin redirects are)"
        elif status == 429 and headers.get("retry-after"):
            extra = f"Retry-After: {headers['retry-after'][:40]}"
        return error_response(op, status, reason, body, secrets, extra)

    async def _exchange(
        self,
        op: OperationSpec,
        url: str,
        headers: dict[str, str],
        parts: RequestParts,
        limit: float,
        auth: httpx2.Auth | None = None,
    ) -> tuple[int, str, httpx2.Headers, bytes | None]:
        assert self._client is not None
        request = self._client.build_request(
            op.method,
            url,
            headers=headers,
            content=parts.content,
            files=parts.files,
            timeout=httpx2.Timeout(limit, connect=min(self.config.connect_timeout, limit)),
        )
        response = await self._client.send(request, stream=True, auth=auth)
        try:
            body = await read_bounded(response, self.config.max_response_bytes)
        finally:
            await response.aclose()
        return response.status_code, response.reason_phrase, response.headers, body

    def _same_origin_redirect(self, op: OperationSpec, status: int, headers: httpx2.Headers) -> str | None:
        location = headers.get("location")
        if not location or self.base_url is None:
            return None
        if status in (301, 302, 303) and op.method not in ("GET", "HEAD"):
            return None
        if status not in (301, 302, 303, 307, 308):
            return None
        base = httpx2.URL(self.base_url)
        target = base.join(location)
        if (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port):
            return None
        return str(target)

    def _validator(self, op: OperationSpec) -> Validator | None:
        """The response check of an operation's declared JSON object (built once, by `schemas`).

        None when nothing is declared, or when the declared schema is not a valid JSON Schema:
        then the response is passed through unchecked rather than making the tool uncallable.
        """
        if op.output_schema is None:
            return None
        if op.tool not in self._validators:
            self._validators[op.tool] = compile_validator(op.output_schema)
        return self._validators[op.tool]


class _TenantView(Backend):
    """A backend as one tenant's connection sees it: its credentials, the shared client and tools."""

    def __init__(
        self, parent: HttpApiBackend, credentials: Credentials, token_auth: TokenAuth | None = None
    ) -> None:
        super().__init__(parent.config)
        self._parent = parent
        self._credentials = credentials
        self.token_auth = token_auth
        self.tools = parent.tools
        self.status = parent.status
        self._ready.set()

    async def start(self) -> None:
        self._ready.set()

    async def stop(self) -> None:
        """Nothing to close: the client belongs to the shared backend."""

    async def wait_ready(self, timeout: float) -> bool:
        return self._parent.status == "connected"

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None = None,
        progress: Any = None,
    ) -> types.CallToolResult:
        return await self._parent.call_with(name, arguments, timeout, self._credentials, self.token_auth)


def _tool(spec: OperationSpec) -> types.Tool:
    annotations = spec.annotations
    return types.Tool(
        name=spec.tool,
        title=spec.title,
        description=spec.description or spec.label,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=annotations.get("readOnlyHint"),
            destructive_hint=annotations.get("destructiveHint"),
            idempotent_hint=annotations.get("idempotentHint"),
            open_world_hint=annotations.get("openWorldHint"),
        ),
    )


def _retryable(error: httpx2.TransportError) -> bool:
    return isinstance(
        error, httpx2.ConnectError | httpx2.RemoteProtocolError | httpx2.ReadError | httpx2.WriteError
    )


def _transport_reason(error: Exception) -> str:
    detail = str(error).strip()
    return f"{type(error).__name__}: {detail}" if detail else type(error).__name__


async def _backoff(attempt: int) -> None:
    await asyncio.sleep(min(0.1 * 2 ** (attempt - 1), 2.0) * (0.5 + random.random() / 2))


async def _validate_in_child(data: dict[str, Any]) -> list[Problem]:
    """Run the validator in a child process (off this process's GIL), as a script that imports no toolweave."""
    payload = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-P",  # the script's folder is not put on sys.path: its sibling modules shadow nothing
        validation.__file__,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(VALIDATION_TIMEOUT):
            out, err = await process.communicate(payload)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        with contextlib.suppress(Exception):
            await process.wait()
        raise
    if process.returncode != 0:
        reason = excerpt(err, [], 300) or f"exit status {process.returncode}"
        return [Problem("", f"the validator failed: {reason}")]
    return [Problem(p["pointer"], p["message"], p["operation"]) for p in orjson.loads(out)]
