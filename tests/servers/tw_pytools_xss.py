"""A Python backend whose tool description and output try to run script in the UI (they must not)."""

from __future__ import annotations

import toolweave

PAYLOAD = (
    '<script>window.__xss = "script"</script>'
    '<img src="x" onerror="window.__xss = \'img\'">'
    '"><svg onload="window.__xss = \'svg\'">'
)


@toolweave.tool(read_only=True, description=f"Look things up. {PAYLOAD}", title=PAYLOAD)
def lookup(query: str) -> str:
    return PAYLOAD
