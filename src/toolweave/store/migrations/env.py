"""Alembic environment: runs on the connection `Database.start()` hands over.

There is no URL here on purpose: migrations only run inside the gateway (or a
test), in the transaction that already holds the migration lock.
"""

from __future__ import annotations

from alembic import context

from toolweave.store.tables import metadata


def _run() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError(
            "toolweave migrations run through toolweave.store.Database.start(); "
            "there is no database URL in the Alembic config"
        )
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


_run()
