"""Demo backends bundled with toolweave: they run offline, on a fresh machine."""
