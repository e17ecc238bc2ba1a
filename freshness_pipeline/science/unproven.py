"""Which hosts and routes have validators that nothing has tested yet.

A validator that has only ever answered 304 may be honest on pages that did not change, or
stuck on pages that did: only a body tells, and the verification sample (fetched without
validators) is where bodies come from. Drawn uniformly, it reached a small host's pages, or one
route of a large host, about once in many cycles, while every 304 there might hide a change.
So the plan's verification pass looks first at one page of each host, and of each route of an
otherwise tested host, whose validators are unproven
(:func:`freshness_pipeline.science.schedule.build_plan`, its ``unproven_scope`` column).

Pure polars on the validator evidence (science.validators), no I/O.
"""

from __future__ import annotations

import polars as pl

from freshness_pipeline.science.validators import (
    ROUTE_CHANGE_COLUMNS,
    ROUTE_COUNT_COLUMNS,
    route_of_row,
    route_sums,
    routes_listed,
)

__all__ = [
    "UNPROVEN_COLUMNS",
    "UNPROVEN_MAX_UNCHANGED_BODIES",
    "unproven_hosts",
    "unproven_routes",
    "unproven_scope",
]

#: bodies with unchanged content after which a host whose validators never saw a change is no
#: longer unproven (:func:`unproven_hosts`): its pages hardly change, and a stuck validator on
#: them costs little
UNPROVEN_MAX_UNCHANGED_BODIES = 8
#: the evidence counts :func:`unproven_hosts` reads: those each route's entry keeps too
UNPROVEN_COLUMNS: tuple[str, ...] = ROUTE_COUNT_COLUMNS


def unproven_hosts(
    counts: pl.DataFrame, max_unchanged_bodies: int = UNPROVEN_MAX_UNCHANGED_BODIES
) -> pl.Series:
    """Hosts whose validators have answered 304 but have never been seen to move with a change,
    sorted: nothing yet tells an honest validator on quiet pages from a stuck one that hides
    every change behind a 304, which only a body can show. An honest host proves itself the
    first time a conditional request meets a change (a 200 under a new validator); a stuck
    host never does, so its first re-fetches are where it is found or never. The verification
    sample looks at one page of each such host first
    (:func:`freshness_pipeline.science.schedule.build_plan`), until ``max_unchanged_bodies``
    bodies compared with the URL's previous one showed nothing changed.

    ``counts``: ``host`` and :data:`UNPROVEN_COLUMNS`, one row or several per host (validator
    evidence of the cycles to judge, summed here, or :func:`validator_trust`'s rows)."""
    missing = [c for c in ["host", *UNPROVEN_COLUMNS] if c not in counts.columns]
    if missing:
        raise ValueError(f"validator evidence lacks column(s) {missing}")
    summed = counts.group_by("host").agg(pl.col(c).sum() for c in UNPROVEN_COLUMNS)
    return summed.filter(_untested(max_unchanged_bodies)).sort("host")["host"]


def unproven_routes(
    evidence: pl.DataFrame, max_unchanged_bodies: int = UNPROVEN_MAX_UNCHANGED_BODIES
) -> pl.DataFrame:
    """Routes (``host``, ``route``: science.normalize.url_route) whose validators have answered
    304 but have never been seen to move with a change, by :func:`unproven_hosts`' rule
    applied to each route's own counts (the ``routes`` column of the validator evidence of
    the cycles to judge), sorted. A host is often several applications behind one name, and
    a route whose pages kept their ETag while they changed was taken for honest beside its
    host's honest routes: every request there went conditional and came back 304, changes
    hidden, and no body showed it for cycles on end (found by an outside held-out web)."""
    sums = route_sums(evidence)
    return (
        sums.filter(_untested(max_unchanged_bodies)).select("host", "route").sort("host", "route")
    )


def unproven_scope(hosts: pl.Series, routes: pl.DataFrame) -> pl.Expr:
    """Per row (columns ``host``, ``url``), what its validators are unproven as: its host when
    the host is in ``hosts`` (:func:`unproven_hosts`), else its host and route (joined by a tab)
    when they are in ``routes`` (:func:`unproven_routes`), else null. The verification pass
    looks first at one page of each such scope."""
    route = route_of_row()
    keys = routes_listed(routes)
    return (
        pl.when(pl.col("host").is_in(hosts.implode()))
        .then(pl.col("host"))
        .when(route.is_in(keys.implode()))
        .then(route)
        .otherwise(pl.lit(None, pl.String))
    )


def _untested(max_unchanged_bodies: int) -> pl.Expr:
    """Summed counts (:data:`UNPROVEN_COLUMNS`) that say: 304s, never a change, few bodies."""
    honored = pl.col("etag_honored") + pl.col("last_modified_honored")
    seen = sum((pl.col(c) for c in ROUTE_CHANGE_COLUMNS), pl.lit(0))
    return (honored > 0) & (seen == 0) & (pl.col("n_body_pairs") < max_unchanged_bodies)
