"""What one fetch of a page costs, relative to an average fetch: the divisor of its priority.

The budget counts fetches (``--budget N``), but fetches are not alike to whoever pays for them:
a crawler on a metered link pays by the byte, one behind a rendering or proxy API by the
credit, and a product page may cost ten times an article. Dividing each page's gain by its
type's cost sends the budget to the freshness that is cheapest to keep, so three bases:

* ``"fetches"`` (default): every fetch costs 1.
* ``"bytes"``: the mean bytes a request of that (host, URL class) transferred over the recent
  fetch log, plus a fixed overhead per request (headers, connection), over the same for an
  average request. A class that mostly answers 304 is cheap, because it is. Means from a few
  requests are shrunk towards the host's mean, and a host's towards the global one, so one
  huge page does not make a whole type look expensive.
* ``"credits"``: what the operator says a fetch of each URL class costs (``[planning.credits]``
  in freshness.toml), with ``default`` for unlisted classes.

Host health and a URL's own failures multiply on top (stages.plan).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

import polars as pl

from freshness_pipeline.science.estimate import DEFAULT_CLASS, by_class, class_key

__all__ = [
    "COST_BASES",
    "REQUEST_OVERHEAD_BYTES",
    "SHRINK_REQUESTS",
    "BYTES_HISTORY",
    "bytes_cost",
    "credits_cost",
]

COST_BASES = ("fetches", "bytes", "credits")

#: How far back the bytes of a page type's requests are averaged.
BYTES_HISTORY = timedelta(days=30)

#: Bytes every request costs whatever its body: request and response headers, TLS records.
REQUEST_OVERHEAD_BYTES = 800.0

#: Pseudo-requests at the parent mean (host for a type, all hosts for a host) added to every
#: group's mean: a type seen 5 times is half its own mean, half its host's.
SHRINK_REQUESTS = 5.0


def credits_cost(url_class: pl.Expr, credits: Mapping[str, float]) -> pl.Expr:
    """Credits per fetch of each row's URL class; ``credits["default"]`` (else 1) otherwise."""
    table = {k.strip().lower(): float(v) for k, v in credits.items()}
    return by_class(url_class, table, table.get(DEFAULT_CLASS, 1.0))


def bytes_cost(candidates: pl.DataFrame, log: pl.DataFrame) -> pl.Series:
    """Relative cost of a fetch of each candidate (``host``, ``url_class``) from ``log``.

    ``log``: with ``host``, ``url_class`` and ``bytes`` (body bytes received; null rows are
    skipped), either one row per request sent or totals with their number of ``requests``
    (science.fetch_totals). 1.0 for every candidate when the log is empty.
    """
    per_row = "requests" not in log.columns
    sent = log.filter(pl.col("bytes").is_not_null() & (pl.col("bytes") >= 0)).select(
        pl.col("host").cast(pl.String),
        class_key(pl.col("url_class")).alias("_class"),
        pl.col("bytes").cast(pl.Float64),
        (pl.lit(1) if per_row else pl.col("requests")).cast(pl.Float64).alias("_n"),
    )
    n_requests = float(sent["_n"].sum()) if sent.height else 0.0
    if n_requests <= 0:
        return pl.Series("cost", [1.0] * candidates.height, dtype=pl.Float64)
    overall = float(sent["bytes"].sum()) / n_requests
    k = SHRINK_REQUESTS
    hosts = sent.group_by("host").agg(
        ((pl.col("bytes").sum() + k * overall) / (pl.col("_n").sum() + k)).alias("_host_mean")
    )
    types = sent.group_by("host", "_class").agg(
        pl.col("bytes").sum().alias("_sum"), pl.col("_n").sum()
    )
    keyed = candidates.select(
        pl.col("host").cast(pl.String), class_key(pl.col("url_class")).alias("_class")
    )
    means = (
        keyed.join(hosts, on="host", how="left", maintain_order="left")
        .join(types, on=["host", "_class"], how="left", maintain_order="left")
        .select(
            pl.col("_host_mean").fill_null(overall).alias("_parent"),
            pl.col("_sum").fill_null(0.0),
            pl.col("_n").fill_null(0.0),
        )
        .select(((pl.col("_sum") + k * pl.col("_parent")) / (pl.col("_n") + k)).alias("mean"))
    )
    overhead = REQUEST_OVERHEAD_BYTES
    return ((means["mean"] + overhead) / (overall + overhead)).alias("cost")
