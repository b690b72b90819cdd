"""The call ledger: records, SQLite storage, pricing and the queries the CLI and TUI read."""
