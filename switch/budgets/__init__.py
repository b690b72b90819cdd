"""Budgets that act: caps in USD per period on a scope, each threshold with an action.

`rules` (the `[[budgets]]` tables of config.toml, validated), `periods` (calendar periods in local
time), `book` (the proxy's in-memory state: O(1) checks per call, updated by the ledger's writer
thread), `status` (the same state read from the ledger, for the CLI, doctor and the dashboard).
"""
