"""Time ranges for the reports, shared by the local ledger (SQLite) and the team ledger (PostgreSQL).

A report over [since, until) reads whole buckets (quarter hours locally, UTC days on the team server) from a
rollup table and the partial buckets at its edges from the calls themselves; both stores split a range the
same way and say "low <= column < high" the same way, differing only in the parameter placeholder.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the status line imports this module (through queries): keep `typing` off its path
if TYPE_CHECKING:
    from typing import Any

    Bounds = tuple[float | None, float | None]


def range_conditions(column: str, low: Any, high: Any, placeholder: str = "?") -> tuple[list[str], list[Any]]:
    """SQL conditions (and their parameters) for `low <= column < high`, either bound optional."""
    clauses: list[str] = []
    params: list[Any] = []
    if low is not None:
        clauses.append(f"{column} >= {placeholder}")
        params.append(low)
    if high is not None:
        clauses.append(f"{column} < {placeholder}")
        params.append(high)
    return clauses, params


def split_range(since: float | None, until: float | None, width: int) -> tuple[Bounds | None, list[Bounds]]:
    """The whole buckets of `width` seconds inside [since, until) as (first start, end), None when there is
    none, and the non-empty partial ranges at the edges that only the calls themselves can answer."""
    # Floor division, as rows are bucketed (`rollups.bucket_of`), so a call is never counted on both sides.
    first = None if since is None else float(-(-since // width) * width)
    last = None if until is None else float(until // width * width)
    if first is not None and last is not None and first >= last:
        return None, [(since, until)] if since is not None and until is not None and since < until else []
    edges: list[Bounds] = []
    if since is not None and first is not None and since < first:
        edges.append((since, first))
    if until is not None and last is not None and last < until:
        edges.append((last, until))
    return (first, last), edges
