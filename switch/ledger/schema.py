"""The call row, defined once: the SQLModel class from which the DDL, the insert and the spill checks derive.

The types are portable (the team ledger on PostgreSQL reuses this class as it is): 64-bit integers and
double precision there, and on SQLite exactly the INTEGER, REAL and TEXT the shipped migrations created,
so a ledger migrated from any version has the schema this class describes (a test checks it).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.schema import CreateIndex, CreateTable
from sqlmodel import Field, SQLModel

_INTEGER = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_REAL: sa.types.TypeEngine[float] = sa.Double[float]().with_variant(sa.REAL(), "sqlite")
# SQLite has no boolean: the shipped schema stores 0/1 in INTEGER columns.
_BOOLEAN = sa.Boolean().with_variant(sa.Integer(), "sqlite")


def _text(nullable: bool = False, default: str | None = None) -> Any:
    if default is not None:
        return Field(default=default, sa_type=sa.Text, sa_column_kwargs={"server_default": default})
    return Field(default=None, sa_type=sa.Text) if nullable else Field(sa_type=sa.Text)


def _integer(default: int | None = None, description: str | None = None) -> Any:
    if default is None:
        return Field(default=None, sa_type=_INTEGER, description=description)
    return Field(default=default, sa_type=_INTEGER, sa_column_kwargs={"server_default": sa.text(str(default))})


def _real(default: float | None = None, description: str | None = None) -> Any:
    if default is None:
        return Field(default=None, sa_type=_REAL, description=description)
    return Field(default=default, sa_type=_REAL, sa_column_kwargs={"server_default": sa.text(f"{default:g}")})


class Call(SQLModel, table=True):
    """One call attempt. Costs are integer micro-USD; None means unpriced, never free."""

    __tablename__ = "calls"
    __table_args__ = (
        sa.Index("ix_calls_started_at", "started_at"),
        sa.Index("ix_calls_session", "session_id", "started_at"),
        sa.Index("ix_calls_model", "served_model", "started_at"),
        sa.Index("ix_calls_role", "role", "started_at"),
        sa.Index("ix_calls_harness", "harness", "started_at"),
        sa.Index("ix_calls_outcome", "outcome", "started_at"),
    )

    id: int | None = Field(default=None, primary_key=True, sa_type=_INTEGER)
    started_at: float = Field(sa_type=_REAL, description="Unix time the call arrived")
    harness: str = _text()
    session_id: str | None = _text(nullable=True)
    agent_id: str | None = _text(nullable=True)
    role: str = _text()
    preset: str = _text()
    requested_model: str = _text()
    provider: str = _text()
    served_model: str = _text()
    inbound_api: str = _text()
    upstream_api: str = _text()
    streamed: bool = Field(sa_type=_BOOLEAN)
    outcome: str = _text()
    http_status: int = Field(sa_type=_INTEGER)
    stop_reason: str | None = _text(nullable=True)
    input_tokens: int = _integer(0)
    output_tokens: int = _integer(0)
    cache_read_tokens: int = _integer(0)
    cache_write_tokens: int = _integer(0)
    reasoning_tokens: int = _integer(0)
    usage_reported: bool = Field(default=True, sa_type=_BOOLEAN, sa_column_kwargs={"server_default": sa.true()})
    cost_micros: int | None = _integer()
    native_cost_micros: int | None = _integer(
        description="the same tokens at the price of the model asked for (or the baseline)"
    )
    cache_savings_micros: int | None = _integer()
    price_source: str | None = _text(nullable=True)
    native_price_source: str | None = _text(nullable=True)
    price_input: float | None = _real(description="USD per million uncached input tokens")
    price_cached_input: float | None = _real()
    price_cache_write: float | None = _real()
    price_output: float | None = _real()
    ttft_ms: float | None = _real()
    duration_ms: float = _real(0.0)
    output_tps: float | None = _real()
    fallback_attempt: int = _integer(0)
    fallback_trigger: str | None = _text(nullable=True)
    request_bytes: int = _integer(0)
    response_bytes: int = _integer(0)
    error: str | None = _text(nullable=True)
    budget: str | None = _text(nullable=True)
    budget_action: str | None = _text(nullable=True)
    request_kind: str | None = _text(nullable=True)
    parent_agent_id: str | None = _text(nullable=True)
    transport: str = _text(default="http")


CALLS: sa.Table = Call.__table__  # type: ignore[attr-defined]
_KINDS: dict[type, tuple[type, ...]] = {str: (str,), int: (int,), bool: (int,), float: (int, float)}


def derived_columns() -> tuple[tuple[str, ...], dict[str, tuple[tuple[type, ...], bool]], str]:
    """What `columns.py` must hold: the written columns in order, what each accepts, and the insert."""
    columns = [column for column in CALLS.columns if not column.primary_key]
    names = tuple(column.name for column in columns)
    kinds = {column.name: (_KINDS[column.type.python_type], not column.nullable) for column in columns}
    insert = f"INSERT INTO calls ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})"
    return names, kinds, insert


def render_columns_module() -> str:
    """The text of `columns.py`, from the class (then `ruff format` it)."""
    names, kinds, _insert = derived_columns()
    kind_lines = "".join(
        f"    {name!r}: (({', '.join(t.__name__ for t in types)},), {required}),\n"
        for name, (types, required) in kinds.items()
    )
    return (
        '"""The calls table\'s columns as plain constants, generated from `schema.Call` (do not edit).\n\n'
        "Regenerate with `python -m switch.ledger.schema`; a test fails when this file and the class differ.\n"
        "The proxy's writer reads these instead of the class, so serving never imports SQLModel.\n"
        '"""\n\n'
        f"COLUMNS: tuple[str, ...] = {names!r}\n"
        '"""Every column the writer fills, in the class\'s order (the database assigns the id)."""\n'
        f"COLUMN_KINDS: dict[str, tuple[tuple[type, ...], bool]] = {{\n{kind_lines}}}\n"
        '"""What each column accepts and whether it is required: checks rows read back from outside."""\n'
        "INSERT = f\"INSERT INTO calls ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})\"\n"
    )


def sqlite_ddl() -> list[str]:
    """The CREATE TABLE and CREATE INDEX statements for the calls table on SQLite, from the class."""
    dialect = sqlite.dialect()
    indexes = sorted(CALLS.indexes, key=lambda index: str(index.name))
    return [str(CreateTable(CALLS).compile(dialect=dialect))] + [
        str(CreateIndex(index).compile(dialect=dialect)) for index in indexes
    ]


if __name__ == "__main__":
    from pathlib import Path

    target = Path(__file__).with_name("columns.py")
    target.write_text(render_columns_module(), encoding="utf-8")
    print(f"wrote {target}")
