"""Taking a plan's rows host by host, each host within its room: the greedy pass every share of
:func:`freshness_pipeline.science.schedule.build_plan` is filled by, and the place of each row
among its host's rows that breaks the ties of such a pass (hosts in turn, not URL order).

Pure polars over the planner's working frame (``_idx``, ``_host``, ``_url``, ``_new``,
``_turn``); no I/O.
"""

from __future__ import annotations

import polars as pl

from freshness_pipeline.science.timecols import utc_column

__all__ = ["fill", "host_rooms", "host_turn", "share_of_rooms"]


def host_turn(candidates: pl.DataFrame, now_lit: pl.Expr) -> pl.Expr:
    """A row's place among its host's rows, the tie-break that takes hosts in turn (:func:`fill`).

    URLs the crawl found (``discovered``: a sitemap, a feed, a redirect) go the most recently
    announced and the longest waiting by turns (newest, oldest, second newest, second oldest,
    ...), then by URL. Announced: the date a sitemap or feed gave the entry (``lastmod``; one in
    the future says nothing), else when the crawl first saw it (``first_seen_at``). In URL order
    a feed or sitemap with a backlog of a thousand old entries kept every new article waiting
    until the backlog was fetched, two weeks at 20 fetches a cycle; newest first alone, a
    sitemap that lists new URLs on every read (a calendar) kept the host's older pages waiting
    for ever (both found by exploratory runs).

    Seeds (``discovered`` false) go oldest lastmod first, then undated ones by URL. A seed's
    lastmod dates its last change, and how long a page has been quiet is the one thing known
    of a page never fetched: the longer, the slower it is likely to change and the longer a
    first copy stays fresh (for a Poisson page the quiet time is exponential at its rate, so
    this is the posterior's order under any prior over Poisson rates). Taken newest first by
    turns, a cold start on seeds listed in a sitemap fetched the fastest-changing pages first,
    whose copies went stale soonest, and lost to round robin at a 2 % budget (found by an
    exploratory run).

    Without a ``discovered`` column every row is taken as announced. Never-fetched pages tie
    on everything else, which is where this order decides."""
    cols = set(candidates.columns)
    none = pl.lit(None, dtype=pl.Datetime("us", "UTC"))
    lastmod = utc_column(candidates, "lastmod") if "lastmod" in cols else none
    lastmod = pl.when(lastmod <= now_lit).then(lastmod)
    first_seen = utc_column(candidates, "first_seen_at") if "first_seen_at" in cols else none
    seed = (
        ~pl.col("discovered").cast(pl.Boolean).fill_null(False)
        if "discovered" in cols
        else pl.lit(False)
    )
    host = pl.col("host").cast(pl.String)
    group = [host, seed]
    by_url = pl.col("url").cast(pl.String).rank("ordinal").cast(pl.Int64)
    announced = pl.coalesce(lastmod, first_seen)
    newest_first = announced.rank("dense", descending=True).cast(pl.Int64).fill_null(pl.len() + 1)
    # undated rows (neither date known) come after the dated ones, in URL order
    place = (newest_first * (pl.len() + 1) + by_url).rank("ordinal").over(group).cast(pl.Int64)
    dated = announced.is_not_null()
    from_oldest = dated.sum().over(group).cast(pl.Int64) + 1 - place
    interleaved = pl.when(place <= from_oldest).then(2 * place - 1).otherwise(2 * from_oldest)
    oldest_first = lastmod.rank("dense").cast(pl.Int64).fill_null(pl.len() + 1)
    quietest = (oldest_first * (pl.len() + 1) + by_url).rank("ordinal").over(group).cast(pl.Int64)
    return pl.when(seed).then(quietest).when(dated).then(interleaved).otherwise(place)


def host_rooms(host_capacity: pl.DataFrame) -> pl.DataFrame:
    """Each host's room this cycle (``_host``, ``_room``) from host_capacity rows: a host
    listed twice gets the stricter limit, a null capacity none."""
    return (
        host_capacity.select(
            pl.col("host").cast(pl.String).alias("_host"),
            pl.col("capacity").cast(pl.Int64).fill_null(0).clip(lower_bound=0).alias("_room"),
        )
        .drop_nulls("_host")
        .group_by("_host")
        .agg(pl.col("_room").min())  # duplicates: the stricter limit wins
    )


def share_of_rooms(room: pl.DataFrame, rooms_at_start: pl.DataFrame, share: float) -> pl.DataFrame:
    """``room`` with each host's cut to ``share`` of its room at the cycle's start (rounded up,
    so a host of any room gets one): what one pass may take of a host, whatever the passes
    before it left."""
    cap = (pl.col("_room_at_start") * share).ceil().cast(pl.Int64).fill_null(0)
    return room.join(
        rooms_at_start.rename({"_room": "_room_at_start"}), on="_host", how="left"
    ).select("_host", pl.min_horizontal("_room", cap).alias("_room"))


def fill(
    pool: pl.DataFrame,
    room: pl.DataFrame,
    order: list[str],
    descending: list[bool],
    quota: int | None,
    taken: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Greedy pass over ``pool`` in ``order``: take a row if its host has room, stop at quota.

    Rows that tie on every key of ``order`` are taken host by host in turn (by ``_turn``,
    each row's place among its host's rows in this pass's pool, the newest and the longest
    waiting by turns: every host's first before any host's second), not in URL order:
    never-fetched pages all tie at the index's cap, and in URL order one host's thousands of
    sitemap URLs would take every slot before another host's seeds got one. The order of
    places is computed once by :func:`host_turn` and numbered again within the pool: numbered among
    all of a host's candidates, a host whose fetched pages held the first places lost every tie
    to a host whose new URLs did, and a sitemap trap took a whole budget.

    Places are numbered within each group of rows that tie (the host's rows with the same
    ``order`` keys), after what the host already got this cycle (``taken``: ``_host``,
    ``_taken``, from the passes before). A row of another group held one of its host's places
    otherwise: a page never fetched whose first request was throttled sorts below the tie of
    pages never fetched, yet it took its host's first place in it, and each such page cost its
    host a fetch a cycle; and numbered from one again in every pass, the hosts whose URLs sort
    first took the new pass's few fetches and then the priority pass's first round too (both
    found by an exploratory run).

    Vectorized: within the sorted pool a row fits iff its rank among its host's rows is within
    the host's remaining room (rows that do not fit consume nothing), and the pass takes the
    first ``quota`` fitting rows. Returns ``_idx``, ``_host`` and ``_pos`` of the taken rows.
    """
    if pool.height == 0 or (quota is not None and quota <= 0):
        return pl.DataFrame(schema={"_idx": pl.Int64, "_host": pl.String, "_pos": pl.Int64})
    # never-fetched pages first: they tie with each other at the index's cap, and numbered
    # after a host's fetched pages they lost every tie to a host with more new URLs
    fresh_first = pl.when(pl.col("_new")).then(0).otherwise(1 << 40)
    pool = pool.with_columns(
        (pl.col("_turn") + fresh_first).rank("ordinal").over(["_host", *order]).cast(pl.Int64)
    )
    if taken is not None and taken.height:
        pool = pool.join(
            taken.select("_host", "_taken"), on="_host", how="left", maintain_order="left"
        ).with_columns(pl.col("_turn") + pl.col("_taken").fill_null(0))
    ranked = (
        pool.sort(
            [*order, "_turn", "_url", "_idx"],
            descending=[*descending, False, False, False],
            nulls_last=True,
        )
        .join(room, on="_host", how="left", maintain_order="left")
        .with_columns(
            (pl.int_range(pl.len(), dtype=pl.Int64).over("_host") + 1).alias("_host_rank"),
        )
        .filter(pl.col("_host_rank") <= pl.col("_room").fill_null(0))
    )
    if quota is not None:
        ranked = ranked.head(quota)
    return ranked.select("_idx", "_host", pl.int_range(pl.len(), dtype=pl.Int64).alias("_pos"))
