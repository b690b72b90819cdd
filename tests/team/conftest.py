"""The team tests' real PostgreSQL server: one throwaway cluster per test process (xdist worker)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.team.pg import PASSWORD, Cluster, running_cluster


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """A running cluster for this process, stopped and removed afterwards even when tests fail."""
    with running_cluster() as server:
        yield server


@pytest.fixture
def team_url(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh database on the cluster, and its password in SWITCH_TEAM_PASSWORD."""
    monkeypatch.setenv("SWITCH_TEAM_PASSWORD", PASSWORD)
    return cluster.new_database()
