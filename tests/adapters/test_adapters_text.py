"""How results become the text a model reads (pure: no backend needed)."""

from __future__ import annotations

import mcp_types as types

from toolweave.adapters import result_text
from toolweave.adapters.openai import output_text


def test_text_items_are_joined() -> None:
    result = types.CallToolResult(
        content=[types.TextContent(type="text", text="one"), types.TextContent(type="text", text="two")],
        structured_content={"ignored": True},
    )
    assert result_text(result) == "one\ntwo"


def test_structured_content_when_there_is_no_text() -> None:
    result = types.CallToolResult(content=[], structured_content={"b": 1, "a": [1, 2]})
    assert result_text(result) == '{"b":1,"a":[1,2]}'


def test_non_text_items_are_summarised() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="see attached"),
            types.ImageContent(type="image", data="aGVsbG8=", mime_type="image/png"),
            types.ResourceLink(type="resource_link", name="report", uri="file:///tmp/report.pdf"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri="test://readme", text="readme text", mime_type="text/plain"
                ),
            ),
        ]
    )
    text = result_text(result)
    assert text.splitlines()[0] == "see attached"
    assert "[image: image/png" in text and "aGVsbG8=" not in text
    assert "[resource link: report <file:///tmp/report.pdf>]" in text
    assert "[resource <test://readme>]\nreadme text" in text


def test_empty_results() -> None:
    assert result_text(types.CallToolResult(content=[])) == ""
    failed = types.CallToolResult(content=[], is_error=True)
    assert output_text(failed) == "Error: the tool failed without a message"
