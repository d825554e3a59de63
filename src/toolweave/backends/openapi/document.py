"""Reading an OpenAPI document: bytes (from a file or a URL) → a parsed, size-bounded mapping.

JSON is parsed with orjson, anything else as YAML (safe loader; aliases are
shared objects, and the schema converter's node budget bounds their cost).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from toolweave.backends.errors import DocumentUnusable

MAX_DOCUMENT_BYTES = 64 << 20
"""GitHub's full REST description is ~13 MB; a larger document is refused, not parsed."""


@dataclass(frozen=True, slots=True)
class Document:
    data: dict[str, Any]
    version: str
    """`2.0`, `3.0`, `3.1` (or `3.2`)."""
    source: str
    """The path or URL it came from (relative server URLs resolve against a URL)."""
    raw: bytes
    """The bytes as read (handed to the validator)."""


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def read_file(source: str, base_dir: Path) -> tuple[bytes, str]:
    """The bytes of a local document (relative paths resolve against the config file's folder)."""
    path = Path(source).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    try:
        size = path.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            raise DocumentUnusable(
                f"{path} is {size} bytes; documents over {MAX_DOCUMENT_BYTES} bytes are refused"
            )
        return path.read_bytes(), str(path)
    except OSError as error:
        raise DocumentUnusable(f"cannot read {path}: {error.strerror or error}") from None


def parse_document(raw: bytes, source: str) -> Document:
    """Parse and identify a document; raise `DocumentUnusable` naming what is wrong."""
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise DocumentUnusable(f"{source} is over {MAX_DOCUMENT_BYTES} bytes; refused")
    data = _parse(raw, source)
    if not isinstance(data, dict):
        raise DocumentUnusable(f"{source} is not an OpenAPI document (its top level is not a mapping)")
    return Document(data=data, version=_version(data, source), source=source, raw=raw)


def _parse(raw: bytes, source: str) -> Any:
    text = raw.lstrip()
    if text.startswith((b"{", b"[")):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as error:
            raise DocumentUnusable(f"{source} is not valid JSON: {error}") from None
    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return yaml.load(raw, Loader=loader)
    except yaml.YAMLError as error:
        raise DocumentUnusable(f"{source} is neither JSON nor valid YAML: {_first_line(error)}") from None
    except RecursionError:
        raise DocumentUnusable(f"{source} nests too deeply to parse") from None


def _version(data: dict[str, Any], source: str) -> str:
    swagger, openapi = data.get("swagger"), data.get("openapi")
    if swagger is not None:
        if str(swagger).strip() != "2.0":
            raise DocumentUnusable(f"{source}: swagger {swagger!r} is not supported (2.0 is)")
        return "2.0"
    if openapi is None:
        raise DocumentUnusable(f"{source} has neither an 'openapi' nor a 'swagger' version field")
    text = str(openapi).strip()
    for version in ("3.0", "3.1", "3.2"):
        if text == version or text.startswith(version + "."):
            return version
    raise DocumentUnusable(f"{source}: openapi {openapi!r} is not supported (3.0, 3.1 and Swagger 2.0 are)")


def _first_line(error: Exception) -> str:
    return " ".join(str(error).split())[:300]
