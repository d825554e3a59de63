"""A federated client written with the Python API, run as its own process by the tests.

`python federated_tools.py GATEWAY_URL NAMESPACE` with the key in $TOOLWEAVE_KEY. Its tools
read this process's environment (its "own credentials", which the gateway never sees).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys

from toolweave import FederatedClient, federated_tool


@federated_tool(toolkit="inventory", read_only=True)
async def stock(sku: str) -> dict[str, object]:
    """How many of an item are in stock, from the local warehouse database.

    Args:
        sku: The item's stock-keeping unit.
    """
    return {"sku": sku, "count": len(sku) * 7, "warehouse": os.environ.get("WAREHOUSE", "local")}


@federated_tool(toolkit="inventory", read_only=True)
async def slow(seconds: float) -> str:
    """Wait, then answer (for calls in flight)."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}s in pid {os.getpid()}"


@federated_tool(toolkit="inventory")
def secret_holder() -> str:
    """Proves where the call ran: reads a secret only this process has."""
    return os.environ.get("LOCAL_SECRET", "(none)")


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    url, namespace = sys.argv[1], sys.argv[2]
    client = FederatedClient(
        url, os.environ.get("TOOLWEAVE_KEY"), {"namespace": namespace, "tools": [stock, slow, secret_holder]}
    )
    asyncio.run(client.run())


if __name__ == "__main__":
    main()
