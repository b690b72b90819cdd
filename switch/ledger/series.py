"""Spend and latency over time, per local time bucket, for the dashboard's charts (read-only SQL)."""

from __future__ import annotations

import math
import sqlite3

from switch.ledger.migrations import BUCKET_SECONDS
from switch.ledger.queries import GROUPS, sample, where_clause
from switch.ledger.times import local_bucket_start


def series(
    connection: sqlite3.Connection,
    since: float | None,
    until: float | None,
    bucket_seconds: int,
    by: str = "model",
) -> list[tuple[float, str, int]]:
    """Spend per local time bucket and group: (bucket start, group, micro-USD), oldest first.

    `bucket_seconds` divides a day; buckets start at local midnight, so a day bucket is a local day.
    """
    if bucket_seconds <= 0 or 86400 % bucket_seconds:
        raise ValueError(f"a series bucket must divide a day, not {bucket_seconds} s")
    # SQLite sums per UTC slot with plain arithmetic (no time zone lookup per call); every local
    # bucket edge falls on a slot edge (zones are whole quarter hours from UTC), so each slot is
    # then placed in its local bucket here, one time zone lookup per slot.
    slot_seconds = math.gcd(bucket_seconds, BUCKET_SECONDS)
    where, params = where_clause(since, until)
    sql = f"""
        SELECT CAST(started_at / ? AS INTEGER) * ?, {GROUPS[by]}, SUM(COALESCE(cost_micros, 0))
        FROM calls {where} GROUP BY 1, 2
    """
    totals: dict[tuple[int, str], int] = {}
    bucket_of_slot: dict[int, int] = {}
    for slot, group, micros in connection.execute(sql, [slot_seconds, slot_seconds, *params]):
        if group is None:  # refused before any provider: no model, and nothing spent
            continue
        bucket = bucket_of_slot.get(slot)
        if bucket is None:
            bucket = bucket_of_slot[slot] = local_bucket_start(slot, bucket_seconds)
        totals[(bucket, group)] = totals.get((bucket, group), 0) + micros
    ordered = sorted(totals.items(), key=lambda item: (item[0][0], str(item[0][1])))
    return [(bucket, group, micros) for (bucket, group), micros in ordered]


def latency_series(
    connection: sqlite3.Connection, since: float | None, until: float | None, bucket_seconds: int
) -> list[tuple[int, str, int, float | None, float | None]]:
    """Median TTFT (ms) and median output tokens/s per local time bucket and served model:
    (bucket start, model, calls counted, TTFT, tokens/s), oldest first.

    Like the medians of `spend` (`queries.sample`), exact up to MEDIAN_SAMPLE calls and above that computed over
    MEDIAN_SAMPLE calls picked evenly by id across the range, so a million-row ledger answers at once.
    """
    import statistics

    if bucket_seconds <= 0 or 86400 % bucket_seconds:
        raise ValueError(f"a series bucket must divide a day, not {bucket_seconds} s")
    where, params = where_clause(since, until)
    # A call refused before any provider has no served model to time.
    routed = f"{where} AND provider != ''" if where else "WHERE provider != ''"
    sampled = sample(connection, routed, params)
    if sampled is None:
        return []
    condition, sample_params = sampled
    slot_seconds = math.gcd(bucket_seconds, BUCKET_SECONDS)
    bucket_of_slot: dict[int, int] = {}
    samples: dict[tuple[int, str], tuple[list[float], list[float], list[int]]] = {}
    for started_at, model, ttft, tps in connection.execute(
        f"SELECT started_at, served_model, ttft_ms, output_tps FROM calls {condition}", sample_params
    ):
        slot = int(started_at // slot_seconds) * slot_seconds
        bucket = bucket_of_slot.get(slot)
        if bucket is None:
            bucket = bucket_of_slot[slot] = local_bucket_start(slot, bucket_seconds)
        ttfts, rates, counted = samples.setdefault((bucket, str(model)), ([], [], [0]))
        counted[0] += 1
        if ttft is not None:
            ttfts.append(ttft)
        if tps is not None:
            rates.append(tps)
    return [
        (
            bucket,
            model,
            counted[0],
            statistics.median(ttfts) if ttfts else None,
            statistics.median(rates) if rates else None,
        )
        for (bucket, model), (ttfts, rates, counted) in sorted(samples.items())
    ]
