"""OpenAPI documents → tool specs: loading, local `$ref`s, schema translation, validation. Pure: no calls.

The HTTP side (sending the calls these specs describe) is `toolweave.backends.http`.
"""

from toolweave.backends.errors import DocumentUnusable
from toolweave.backends.openapi.convert import ConvertOptions, convert
from toolweave.backends.openapi.document import (
    MAX_DOCUMENT_BYTES,
    Document,
    is_url,
    parse_document,
    read_file,
)
from toolweave.backends.openapi.spec import BodySpec, Conversion, OperationSpec, ParamSpec, Problem

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "BodySpec",
    "Conversion",
    "ConvertOptions",
    "Document",
    "DocumentUnusable",
    "OperationSpec",
    "ParamSpec",
    "Problem",
    "convert",
    "is_url",
    "parse_document",
    "read_file",
]
