"""Local `$ref`s (`#/components/...`): JSON pointers into the document itself, nothing else.

A reference to another file or URL is never fetched: it is a problem of the
operation that uses it, which is then skipped with that reason.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from toolweave.backends.errors import DocumentError


def escape(token: str | int) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def child(pointer: str, *tokens: str | int) -> str:
    """`child("/paths", "/pets", "get")` → `/paths/~1pets/get`."""
    return pointer + "".join("/" + escape(token) for token in tokens)


class Refs:
    """Resolves the document's own references."""

    def __init__(self, document: Any) -> None:
        self.document = document

    def resolve(self, ref: Any, at: str) -> tuple[str, Any]:
        """`(pointer, node)` of a `$ref` found at pointer `at`."""
        if not isinstance(ref, str):
            raise DocumentError(at, "$ref must be a string")
        if not ref.startswith("#"):
            raise DocumentError(
                at,
                f"$ref {ref!r} points outside the document; other files and URLs are never fetched "
                "(bundle the document into one file first)",
            )
        pointer = unquote(ref[1:])
        if pointer and not pointer.startswith("/"):
            raise DocumentError(at, f"$ref {ref!r} is not a JSON pointer (anchors are not supported)")
        node = self.document
        for token in pointer.split("/")[1:] if pointer else ():
            key = unescape(token)
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                raise DocumentError(at, f"$ref {ref!r} does not resolve: nothing at {key!r}")
        return pointer, node

    def follow(self, node: Any, at: str) -> tuple[str, Any]:
        """Follow a chain of references to the node that is not one; a chain that loops is an error."""
        pointer = at
        seen: list[str] = []
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if ref in seen:
                raise DocumentError(at, f"$ref loop: {' -> '.join([*seen, str(ref)])}")
            seen.append(ref)
            pointer, node = self.resolve(ref, pointer)
        return pointer, node
