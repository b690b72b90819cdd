"""Pure translation between the wire APIs and the internal model (no I/O, no clock, no config)."""
