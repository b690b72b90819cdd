"""The team ledger: ships this machine's ledger rows to a team PostgreSQL server and reads the team reports.

Optional and off the request path. Without a `[team]` table in config.toml nothing here runs, and
psycopg is never imported: `config` and `local` import only the standard library and switch's own modules
(the `[team]` table is a plain dataclass, no pydantic); `server`, `shipper` and `reports` import psycopg
inside their functions.
"""
