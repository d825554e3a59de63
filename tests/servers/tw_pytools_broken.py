"""A python backend module that cannot be imported (for the load-failure test)."""

raise ImportError("this module is broken on purpose")
