"""Sitemap ``<lastmod>`` as a change hint, trusted per host and sitemap file only while it proves
accurate.

A lastmod newer than our last fetch says "changed since you looked" without a fetch; a lastmod
older than it says "unchanged". Either saves budget, but only on hosts whose lastmod tells the
truth: many sites stamp every URL with the sitemap's build time, bump it for a new footer, or
never update it. So every hint is checked against what our fetches saw, per host:

* *precision* P(changed | lastmod said changed): how often a "changed" hint was right. A host
  with low precision wastes fetches on its hints; a "changed" hint is acted on only above
  ``min_precision``.
* *recall* P(lastmod said changed | changed): how often lastmod moved when the content did. A
  host with low recall hides changes; an "unchanged" hint is acted on only above
  ``min_recall`` (set higher: believing a wrong "unchanged" leaves a stale copy unnoticed).
* *false alarm* P(lastmod said changed | unchanged): how often lastmod moved when the content
  did not. Below ``min_precision`` a "changed" hint is not taken at its word but still weighed:
  recall over false alarm is how much likelier a moved lastmod is on a changed page than on an
  unchanged one (``hint_likelihood``). A shop whose lastmod also moves on stock-count saves has
  precision 0.5 and recall 1, and its moved lastmods are where its flash-sale price changes are:
  ignored below the gate, they went to fetches the model chose blind, which caught 41 % of
  the sale's price edges where following the lastmods caught 99 % (found by an exploratory
  run). A lastmod stamped with the build time moves on every page alike: the ratio is 1 and
  the hint changes nothing.

Both are Beta-smoothed, recency-weighted counts (half-life ``half_life_days``), so a host that
starts lying loses trust within weeks and a host that mends its sitemap earns it back; with
fewer than ``min_evidence`` weighted checks a host is not trusted at all.

A host's sitemap files are graded apart (``listing_of``: the file's path without its digits,
so that ``post-sitemap.xml``, ``post-sitemap2.xml`` and a month's ``sitemap-2026-11.xml`` are one
series), each starting from the host's pooled figures worth ``pooling`` checks. A news site
stamps its home page with a fixed date and its section fronts with their newest post's date,
while its article files date every edit exactly: graded as one host, the fronts, fetched every
cycle, held the host's recall at 0.44-0.55 and the articles' exact dates went unused, those
that tell a finished live blog from a running one among them (found by an exploratory run). A
file with no evidence of its own is trusted as its host is.

A host trusted both ways also dates changes: a lastmod after our previous fetch, on a page the
fetch then finds changed, says the content changed then and not since, as a trusted
Last-Modified header does (``lastmod_age_days``; science.estimate reads such ages). The sitemap
is read before the fetch, so only the quiet time up to ``now`` (the cycle's start, before the
read) is known; a change between the read and the fetch is left open, never denied.

Lastmod values are compared with care: a date-only lastmod (midnight exactly, the common
``YYYY-MM-DD`` form) means "some time that day", so a fetch made on that day cannot be ordered
against it and gives no hint; a lastmod in the future (clock skew, placeholder dates) is not
evidence of anything.

Pure functions over polars frames; no I/O and no clock (``now`` is passed in).
"""

from __future__ import annotations

import math
from datetime import datetime

import polars as pl

from freshness_pipeline.science.gains import capture_gain
from freshness_pipeline.science.timecols import duration_days, utc_column, utc_literal

__all__ = [
    "LASTMOD_TRUST_SCHEMA",
    "changed_hint_odds",
    "hint_evidence",
    "lastmod_age_days",
    "lastmod_hints",
    "lastmod_says",
    "lastmod_trust",
    "listing_of",
    "unchanged_hint_odds",
]

#: one row per host (``listing`` null: the host's pooled figures) and per sitemap file series
#: of the host that has evidence of its own
LASTMOD_TRUST_SCHEMA = {
    "host": pl.String,
    "listing": pl.String,
    "evidence": pl.Float64,
    "host_evidence": pl.Float64,
    "precision": pl.Float64,
    "recall": pl.Float64,
    "false_alarm": pl.Float64,
    "trust": pl.Float64,
}


def listing_of(listed_in: pl.Expr) -> pl.Expr:
    """The series of sitemap files a listing file belongs to: its path without scheme, host,
    query, digits or a ``.gz`` suffix. Sites split one kind of page over numbered or dated
    files (Yoast's ``post-sitemap2.xml``, WordPress's ``wp-sitemap-posts-post-3.xml``,
    Shopify's ``sitemap_products_1.xml?from=..``, monthly archives, some of them gzipped),
    which stamp lastmod alike; a new month's file then inherits its series' record instead of
    starting from nothing, and the evidence is not split thinner than the site splits its
    stamping. Null for a page no file listed."""
    path = listed_in.str.replace(r"^[^:/?#]+://[^/?#]*", "").str.replace(r"[?#].*$", "")
    return path.str.replace(r"(?i)\.gz$", "").str.replace_all(r"[0-9]+", "")


def _latest_instant(lastmod: pl.Expr) -> pl.Expr:
    """A date-only stamp (midnight exactly) covers [lastmod, lastmod + 1 day): its latest
    possible instant; any other stamp is its own."""
    date_only = lastmod.dt.time() == pl.time(0, 0, 0)
    return pl.when(date_only).then(lastmod + pl.duration(days=1)).otherwise(lastmod)


def lastmod_says(lastmod: pl.Expr, since: pl.Expr, now: pl.Expr) -> pl.Expr:
    """'changed' / 'unchanged' / null: what a lastmod claims about the time after ``since``.

    Null when there is no lastmod or no ``since``, when the lastmod lies in the future, and when
    a date-only lastmod falls on the same day as ``since`` (the order is unknown).
    """
    latest = _latest_instant(lastmod)
    return (
        pl.when(lastmod.is_null() | since.is_null() | (lastmod > now))
        .then(pl.lit(None, dtype=pl.String))
        .when(lastmod > since)
        .then(pl.lit("changed"))
        .when(latest <= since)
        .then(pl.lit("unchanged"))
        .otherwise(pl.lit(None, dtype=pl.String))
    )


def lastmod_age_days(lastmod: pl.Expr, since: pl.Expr, now: pl.Expr) -> pl.Expr:
    """Days the content has been quiet by ``now``, where the lastmod says "changed" since
    ``since``: from the lastmod's latest possible instant (the end of its day, date-only) to
    ``now``. Null where it says nothing or "unchanged", and where that instant is not before
    ``now`` (no quiet time is known)."""
    return _dated(lastmod_says(lastmod, since, now), lastmod, now)


def _dated(says: pl.Expr, lastmod: pl.Expr, now: pl.Expr) -> pl.Expr:
    """:func:`lastmod_age_days` given what the lastmod says (computed once by callers that
    have it already)."""
    quiet = duration_days(now - _latest_instant(lastmod))
    return pl.when((says == "changed") & (quiet > 0)).then(quiet)


def hint_evidence(observations: pl.DataFrame) -> pl.DataFrame:
    """One row per fetch that can grade a hint: host, listing, observed_at, hint_changed,
    changed.

    ``observations``: url, host, fetched_at, prev_fetched_at (the fetch before it), changed
    (what our fingerprints saw between the two), lastmod (the sitemap lastmod as known *at*
    fetched_at; a lastmod read afterwards would grade the hint with hindsight) and, if known,
    listed_in (the file that listed it; its series is the ``listing``). Fetches whose lastmod
    gives no hint are dropped.
    """
    says = lastmod_says(
        utc_column(observations, "lastmod"),
        utc_column(observations, "prev_fetched_at"),
        utc_column(observations, "fetched_at"),
    )
    return (
        observations.select(
            pl.col("host").cast(pl.String),
            _listing_column(observations),
            utc_column(observations, "fetched_at").alias("observed_at"),
            says.alias("_says"),
            pl.col("changed").cast(pl.Boolean),
        )
        .filter(pl.col("_says").is_not_null() & pl.col("changed").is_not_null())
        .drop_nulls("observed_at")
        .select(
            "host",
            "listing",
            "observed_at",
            (pl.col("_says") == "changed").alias("hint_changed"),
            "changed",
        )
    )


def _listing_column(frame: pl.DataFrame) -> pl.Expr:
    """``listing`` of a frame's rows: from its listed_in, null without one."""
    if "listed_in" not in frame.columns:
        return pl.lit(None, dtype=pl.String).alias("listing")
    return listing_of(pl.col("listed_in").cast(pl.String)).alias("listing")


def lastmod_trust(
    evidence: pl.DataFrame,
    *,
    now: datetime,
    half_life_days: float = 30.0,
    prior_right: float = 1.0,
    prior_wrong: float = 1.0,
    pooling: float = 2.0,
) -> pl.DataFrame:
    """Per host, and per series of its sitemap files: weighted evidence count, precision,
    recall, false_alarm and trust = min(precision, recall).

    ``evidence`` as from :func:`hint_evidence` (possibly accumulated over many cycles; rows
    without a ``listing`` count for their host only). Each row weighs 2^(−age/half_life). A
    host's precision, recall and false alarm rate are Beta(prior_right, prior_wrong)
    posterior means of its weighted counts (a false alarm is a wrong answer), so a host with no evidence sits at the prior, not at 1; a file series'
    are its own counts with the host's figures added as ``pooling`` checks' worth, so that a
    few checks of its own outweigh its host's record.
    """
    if half_life_days <= 0 or prior_right < 0 or prior_wrong < 0 or pooling < 0:
        raise ValueError("need half_life_days > 0 and non-negative priors and pooling")
    if evidence.height == 0:
        return pl.DataFrame(schema=LASTMOD_TRUST_SCHEMA)
    age = duration_days(utc_literal(now) - utc_column(evidence, "observed_at"))
    weight = (2.0 ** (-(age.clip(lower_bound=0.0)) / half_life_days)).alias("_w")
    hinted, changed = pl.col("hint_changed"), pl.col("changed")
    listing = pl.col("listing") if "listing" in evidence.columns else pl.lit(None)
    counted = ["evidence", "_tp", "_fp", "_fn", "_tn"]
    counts = (
        evidence.with_columns(weight, listing.cast(pl.String).alias("listing"))
        .group_by("host", "listing")
        .agg(
            pl.col("_w").sum().alias("evidence"),
            pl.col("_w").filter(hinted & changed).sum().alias("_tp"),
            pl.col("_w").filter(hinted & ~changed).sum().alias("_fp"),
            pl.col("_w").filter(~hinted & changed).sum().alias("_fn"),
            pl.col("_w").filter(~hinted & ~changed).sum().alias("_tn"),
        )
        .with_columns(pl.col("host").cast(pl.String))
    )
    tp, fp, fn, tn = pl.col("_tp"), pl.col("_fp"), pl.col("_fn"), pl.col("_tn")
    a, b, m = prior_right, prior_wrong, pooling
    hosts = (
        counts.group_by("host")
        .agg(pl.col(c).sum() for c in counted)
        .select(
            "host",
            pl.lit(None, dtype=pl.String).alias("listing"),
            "evidence",
            pl.col("evidence").alias("host_evidence"),
            ((tp + a) / (tp + fp + a + b)).alias("precision"),
            ((tp + a) / (tp + fn + a + b)).alias("recall"),
            ((fp + b) / (fp + tn + a + b)).alias("false_alarm"),
        )
    )
    pooled = hosts.select(
        "host",
        "host_evidence",
        pl.col("precision").alias("_hp"),
        pl.col("recall").alias("_hr"),
        pl.col("false_alarm").alias("_hf"),
    )
    series = (
        counts.filter(pl.col("listing").is_not_null())
        .join(pooled, on="host", how="left")
        .select(
            "host",
            "listing",
            "evidence",
            "host_evidence",
            ((tp + m * pl.col("_hp")) / (tp + fp + m)).alias("precision"),
            ((tp + m * pl.col("_hr")) / (tp + fn + m)).alias("recall"),
            ((fp + m * pl.col("_hf")) / (fp + tn + m)).alias("false_alarm"),
        )
    )
    return (
        pl.concat([hosts, series])
        .with_columns(pl.min_horizontal("precision", "recall").alias("trust"))
        .sort("host", "listing", nulls_last=False)
        .select(list(LASTMOD_TRUST_SCHEMA))
    )


def lastmod_hints(
    pages: pl.DataFrame,
    trust: pl.DataFrame,
    *,
    now: datetime,
    min_precision: float = 0.8,
    min_recall: float = 0.9,
    min_evidence: float = 5.0,
) -> pl.DataFrame:
    """``pages`` plus ``lastmod_says``, ``lastmod_trust``, ``hinted_change``, ``hint_recall``,
    ``lastmod_dates`` and ``lastmod_age_days``.

    ``pages``: host, lastmod (sitemap lastmod, null if none), last_fetched_at (null if never)
    and, if known, listed_in (the file that listed it). ``trust``: as from
    :func:`lastmod_trust`; a page is judged by its file series' figures, or its host's where
    the series has no evidence of its own (or the page no file), once its host has
    ``min_evidence`` weighted checks. ``hinted_change`` is True (trusted "changed since our
    last fetch"), False (trusted "unchanged") or null (no hint, or no trust earned for this
    kind of hint). ``lastmod_trust`` is the trust score the page is judged by (null: no
    evidence). ``hint_recall``: on a trusted "unchanged", the recall, how often the lastmod
    moved when a page changed (how far the hint may be believed: science.schedule).
    ``hint_likelihood``: on a "changed" not trusted at its word (precision below
    ``min_precision``) where the evidence is enough, recall over false alarm (at least 1): how
    many times likelier the moved lastmod makes a change than the model thought
    (:func:`changed_hint_odds`); null elsewhere.
    ``lastmod_dates``: trust is earned for both kinds, so the lastmod may date a change (a
    lastmod that moves with every change and only then); ``lastmod_age_days``, where it does,
    :func:`lastmod_age_days` of the page (null elsewhere).
    """
    if not (0 <= min_precision <= 1 and 0 <= min_recall <= 1) or min_evidence < 0:
        raise ValueError("min_precision and min_recall in [0, 1], min_evidence >= 0")
    if math.isnan(min_evidence):
        raise ValueError("min_evidence must be a number")
    figures = ("_ev", "_prec", "_rec", "_fa", "_trust")
    t = trust.select(
        pl.col("host").cast(pl.String).alias("_host"),
        pl.col("listing").cast(pl.String).alias("_listing"),
        pl.col("host_evidence").cast(pl.Float64).alias("_ev"),
        pl.col("precision").cast(pl.Float64).alias("_prec"),
        pl.col("recall").cast(pl.Float64).alias("_rec"),
        pl.col("false_alarm").cast(pl.Float64).alias("_fa"),
        pl.col("trust").cast(pl.Float64).alias("_trust"),
    )
    by_host = t.filter(pl.col("_listing").is_null()).drop("_listing").unique("_host")
    by_series = t.filter(pl.col("_listing").is_not_null()).unique(["_host", "_listing"])
    lastmod, since, at = (
        utc_column(pages, "lastmod"),
        utc_column(pages, "last_fetched_at"),
        utc_literal(now),
    )
    added = (
        "lastmod_says",
        "lastmod_trust",
        "hinted_change",
        "hint_recall",
        "hint_likelihood",
        "lastmod_dates",
        "lastmod_age_days",
    )
    base = pages.drop([c for c in added if c in pages.columns])
    enough = pl.col("_ev").fill_null(0.0) >= min_evidence
    dates = enough & (pl.col("_prec") >= min_precision) & (pl.col("_rec") >= min_recall)
    return (
        base.with_columns(
            lastmod_says(lastmod, since, at).alias("lastmod_says"),
            pl.col("host").cast(pl.String).alias("_host"),
            _listing_column(pages).alias("_listing"),
        )
        .with_columns(_dated(pl.col("lastmod_says"), lastmod, at).alias("_age"))
        .join(by_host, on="_host", how="left", maintain_order="left")
        .join(
            by_series.rename({c: f"{c}_s" for c in figures}),
            on=["_host", "_listing"],
            how="left",
            maintain_order="left",
        )
        .with_columns(
            pl.when(pl.col("_ev_s").is_not_null()).then(f"{c}_s").otherwise(c).alias(c)
            for c in figures
        )
        .with_columns(
            pl.when(
                enough & (pl.col("lastmod_says") == "changed") & (pl.col("_prec") >= min_precision)
            )
            .then(pl.lit(True))
            .when(enough & (pl.col("lastmod_says") == "unchanged") & (pl.col("_rec") >= min_recall))
            .then(pl.lit(False))
            .otherwise(pl.lit(None, dtype=pl.Boolean))
            .alias("hinted_change"),
            dates.fill_null(False).alias("lastmod_dates"),
            pl.col("_trust").alias("lastmod_trust"),
        )
        .with_columns(
            lastmod_age_days=pl.when(pl.col("lastmod_dates")).then("_age").cast(pl.Float64),
            hint_recall=pl.when(~pl.col("hinted_change")).then("_rec"),
            hint_likelihood=pl.when(
                enough
                & (pl.col("lastmod_says") == "changed")
                & pl.col("hinted_change").is_null()
                & (pl.col("_fa") > 0)
            )
            .then((pl.col("_rec") / pl.col("_fa")).clip(lower_bound=1.0))
            .cast(pl.Float64),
        )
        .drop("_host", "_listing", "_age", *figures, *(f"{c}_s" for c in figures))
    )


def changed_hint_odds(likelihood: pl.Expr, rate: pl.Expr, age_days: pl.Expr) -> pl.Expr:
    """How much a page's gain grows when its lastmod moved on a host whose moved lastmods are
    right too seldom to be taken at their word: the chance of a change given the moved lastmod
    over the chance the model gave it. With ``likelihood`` L (recall over false alarm, see
    :func:`lastmod_hints`) and p the model's chance of a change since the last fetch (Poisson
    at ``rate`` over ``age_days``), Bayes gives L / (L p + 1 - p): up to L for a page the model
    thought quiet, nothing added where the model was already sure. A freshness index grows more
    slowly than the chance of a change, so the grown gain stays below that of a page known to
    have changed. Without a likelihood the gain is left as it was."""
    changed = capture_gain(rate, age_days)
    odds = likelihood / (likelihood * changed + 1.0 - changed)
    return odds.fill_nan(1.0).fill_null(1.0).clip(lower_bound=1.0)


def unchanged_hint_odds(recall: pl.Expr, rate: pl.Expr, age_days: pl.Expr) -> pl.Expr:
    """What is left of a page's gain when its host's trusted lastmod says "unchanged": the
    chance it changed all the same over the chance the model gave it. With ``recall`` r (how
    often the host's lastmod moved when a page changed) and p the model's chance of a change
    since the last fetch (Poisson at ``rate`` over ``age_days``), Bayes gives (1 - r) p /
    ((1 - r) p + 1 - p), a small share for most pages and most of the gain where the model is
    all but sure of a change. Taken as zero, a host that froze its lastmods after earning trust
    hid changes for days: the pages it wronged were the ones never fetched, and only their
    fetches could say so (found by an exploratory run). Without a recall (an older plan's
    inputs), the hint is taken at its word: nothing is left."""
    miss = (1.0 - recall).clip(0.0, 1.0)
    changed = capture_gain(rate, age_days)
    odds = miss / (miss * changed + 1.0 - changed)
    return pl.when(changed < 1.0).then(odds).otherwise(1.0).fill_null(0.0).fill_nan(0.0)
