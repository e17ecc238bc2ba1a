"""When a redirect means the page is gone: the soft 404s of redirects.

Shops answer a discontinued product with a permanent redirect to its category, and many sites
send a removed page to their home page. Taken as a move, the page stayed 'active' for ever:
no tombstone went downstream and its last copy (a price, "in stock") was exported as current,
while the category it pointed at inherited the dead page's class and value (found by an
exploratory run: 0 of 45 such products gone, against 69 of 69 on shops answering 404). Search
engines read such redirects as soft 404s; so does this module, for two kinds of target:

* the site's home page (the root path, no query) of the same site (``www.`` aside), from any
  other page: a moved page goes somewhere of its own;
* a page we already knew when the redirecting page's newest version was observed (or
  before): the two were distinct pages side by side, and now one sends its readers to the
  other. A page that moved goes to a URL that appears with the move, after the last version of
  the old one, and stays a move (its target inherits its value and class).

Only permanent redirects (301, 308) count: a temporary one says the page is coming back. A
redirect to a target that is neither stays a move, as before.

Pure functions over polars frames; no I/O.
"""

from __future__ import annotations

import polars as pl

from freshness_pipeline.science.normalize import normalize_url_column

__all__ = ["PERMANENT_REDIRECTS", "soft_404_redirects"]

#: the statuses that say a page has moved for good
PERMANENT_REDIRECTS = (301, 308)

_HOME = r"^[a-z][a-z0-9+.-]*://[^/?#]+/?$"
_SITE = r"^[a-z][a-z0-9+.-]*://(?:www\.)?([^/?#:]+)"


def soft_404_redirects(results: pl.DataFrame, pages: pl.DataFrame) -> pl.DataFrame:
    """``results`` with each permanent redirect that is a soft 404 answered ``gone``, its
    ``error`` saying why (``location`` kept: where it pointed).

    ``results``: url, outcome, http_status, location (the redirect's absolute target), error.
    ``pages``: url, first_seen_at (when the URL was first known), version_observed_at (when
    its newest version was observed; null: never had one), one row per known URL of the hosts
    fetched: the plan's rows.
    """
    redirect = (pl.col("outcome") == "redirect") & pl.col("http_status").is_in(
        list(PERMANENT_REDIRECTS)
    )
    moved = results.filter(redirect)
    if moved.is_empty():
        return results
    target = normalize_url_column(moved["location"])["url"].alias("_target")
    known = pages.select(
        pl.col("url").alias("_target"), pl.col("first_seen_at").alias("_target_known")
    ).unique("_target")
    own = pages.select("url", pl.col("version_observed_at").alias("_own_version")).unique("url")
    site = pl.col("url").str.extract(_SITE), pl.col("_target").str.extract(_SITE)
    home = (
        pl.col("_target").str.contains(_HOME)
        & ~pl.col("url").str.contains(_HOME)
        & (site[0] == site[1])
    )
    known_before = pl.col("_target_known") <= pl.col("_own_version")
    verdict = (
        moved.select("url", "location")
        .with_columns(target)
        .join(known, on="_target", how="left")
        .join(own, on="url", how="left")
        .filter(pl.col("_target").is_not_null() & (pl.col("_target") != pl.col("url")))
        .with_columns(
            _why=pl.when(home)
            .then(pl.lit("to the site's home page"))
            .when(known_before)
            .then(pl.lit("to a page known since before this one's newest version"))
        )
        .filter(pl.col("_why").is_not_null())
        .select("url", "_why")
        .unique("url")
    )
    if verdict.is_empty():
        return results
    is_soft = redirect & pl.col("_why").is_not_null()
    return (
        results.join(verdict, on="url", how="left", maintain_order="left")
        .with_columns(
            outcome=pl.when(is_soft).then(pl.lit("gone")).otherwise("outcome"),
            error=pl.when(is_soft)
            .then(pl.format("soft 404: HTTP {} {} ({})", "http_status", "_why", "location"))
            .otherwise("error"),
        )
        .drop("_why")
    )
