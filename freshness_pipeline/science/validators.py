"""Per-host trust in HTTP validators (ETag, Last-Modified), learnt from the fetch history.

A conditional GET is only as good as the server's validators, and servers get them wrong in two
ways that cost very differently:

* **stuck**: the validator stays the same while the content changes (a Last-Modified frozen at
  the template's date, an ETag computed from something that does not cover the text). The server
  then answers 304 to a changed page and we *miss the change*, silently and for as long as we
  keep asking conditionally. The costliest failure, so a little evidence is enough, and it is
  also judged route by route (:func:`stuck_routes`): one application behind a host's name can
  keep its validator while the host's others are honest.
* **useless**: the validator moves while the content does not (an ETag with a timestamp or a
  per-backend inode, a Last-Modified of "now"), or the server ignores a matching validator and
  sends the body anyway. Conditional requests then never save anything; sending the validator
  is harmless, but dropping a useless ETag lets the client fall back to If-Modified-Since, which
  may work on that host. Judged on shares, so that one deploy touching every file (new ETags,
  same content) does not condemn a host whose 304s otherwise work.

The evidence is the sequence of responses per URL: each body (2xx with a fingerprint) is compared
with the previous body of the same URL, where our content fingerprint is the ground truth of
"changed", and each conditional request tells whether its validator was honoured (304) or
ignored (200 with the same validator and the same content). A stuck validator can only show up
on a body, i.e. on an unconditional fetch, which is why :func:`drop_untrusted_validators` makes
the plan's verification sample unconditional by default.

Pure polars, no I/O: the caller passes the history window (e.g. the last 30 days of fetch_log)
and applies the result to the next cycle's requests. The counts add up over cycles, so a crawl
keeps them as running totals per host and cycle (:func:`remember_requests`, with the last
request and body of each URL to judge the next ones against) rather than re-reading a month of
fetch_log every cycle: at 10,000 hosts and four cycles a day that month is over a million files.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import polars as pl

from freshness_pipeline.science.knobs import require
from freshness_pipeline.science.normalize import url_route
from freshness_pipeline.science.timecols import cycles_within

__all__ = [
    "COUNT_COLUMNS",
    "HISTORY_COLUMNS",
    "OPTIONAL_HISTORY_COLUMNS",
    "ROUTES_TYPE",
    "ROUTE_CHANGE_COLUMNS",
    "ROUTE_COUNT_COLUMNS",
    "TRUST_SCHEMA",
    "TrustRules",
    "content_age_trust",
    "drop_untrusted_validators",
    "etag_fails_here",
    "etag_refused_here",
    "is_refused_304",
    "latest_requests",
    "remember_requests",
    "route_of_row",
    "route_sums",
    "routes_listed",
    "stuck_routes",
    "trust_before",
    "trust_from_counts",
    "validator_counts",
    "validator_trust",
]

#: Columns :func:`validator_trust` needs, one row per request sent (fetch_log plus the
#: validators each response carried, as FetchResult reports them).
HISTORY_COLUMNS: tuple[str, ...] = (
    "url",
    "host",
    "fetched_at",  # anything sortable; the cycle's `now`
    "http_status",  # Int, null for transport errors
    "outcome",  # 'new' | 'changed' | 'unchanged' | 'not_modified' | ...
    "conditional",  # Bool: a validator was sent
    "fingerprint",  # content fingerprint of the body (for a 304: the stored one)
    "etag",  # ETag of the response (for a 304 without one: the one we sent)
    "last_modified",  # Last-Modified of the response (likewise)
)
#: Used when present. ``validator`` ('etag' | 'last_modified' | null) is which conditional
#: header went out (FetchResult.validator); without it, it is inferred from the previous row
#: of the URL (If-None-Match when an ETag was known), which is wrong for rows where an
#: untrusted ETag was dropped. ``fingerprint_version``: bodies are compared only within one
#: extractor version, so a new extractor is not read as "the content changed".
OPTIONAL_HISTORY_COLUMNS: tuple[str, ...] = ("validator", "fingerprint_version")

_KINDS = ("honored", "ignored", "stable", "volatile", "tracks", "stuck")
_VALIDATORS = ("etag", "last_modified")

TRUST_SCHEMA: dict[str, pl.DataType] = {
    "host": pl.String(),
    "n_fetches": pl.Int64(),
    "n_body_pairs": pl.Int64(),
    **{f"{v}_{k}": pl.Int64() for v in _VALIDATORS for k in _KINDS},
    "etag_trusted": pl.Boolean(),
    "etag_reason": pl.String(),
    "last_modified_trusted": pl.Boolean(),
    "last_modified_reason": pl.String(),
}

_BODY_OUTCOMES = ("new", "changed", "unchanged")

#: The additive evidence behind :data:`TRUST_SCHEMA`'s verdicts.
COUNT_COLUMNS: tuple[str, ...] = (
    "n_fetches",
    "n_body_pairs",
    *(f"{v}_{k}" for v in _VALIDATORS for k in _KINDS),
)


#: The changed bodies per route (science.normalize.url_route) whose validator moved with the
#: change and those whose validator stayed. A validator stuck on one route of a host whose
#: other routes are honest is a few stuck changes among many tracked ones, under the host's
#: share; counted per route it is every change of its own route.
ROUTE_CHANGE_COLUMNS: tuple[str, ...] = tuple(
    f"{v}_{k}" for v in _VALIDATORS for k in ("tracks", "stuck")
)
#: What each route's entry counts: its compared bodies, its 304s honoured, and its changes
#: (what tells a route whose validators were never tested: science.unproven).
ROUTE_COUNT_COLUMNS: tuple[str, ...] = (
    "n_body_pairs",
    *(f"{v}_honored" for v in _VALIDATORS),
    *ROUTE_CHANGE_COLUMNS,
)
#: The ``routes`` column beside :data:`COUNT_COLUMNS`: one entry per route with 304s or
#: compared bodies in the row's group (null: none). Like the counts, entries add up over
#: cycles.
ROUTES_TYPE = pl.List(
    pl.Struct({"route": pl.String(), **dict.fromkeys(ROUTE_COUNT_COLUMNS, pl.Int64())})
)


@dataclass(frozen=True)
class TrustRules:
    """When a validator stops being trusted on a host.

    Stuck: at least ``min_stuck`` bodies whose content changed under an unchanged validator,
    making up at least ``max_stuck_share`` of the changed bodies seen with that validator.
    Useless: at least ``min_useless`` volatile or ignored observations, making up at least
    ``max_useless_share`` of all observations of the validator with unchanged content
    (304s honoured, stable validators on unchanged bodies, volatile, ignored).

    Content ages (Last-Modified read as "the content last changed then", which feeds the rate
    estimates) ask more than a conditional GET does, and positive proof: at least
    ``min_age_tracks`` changed bodies whose Last-Modified moved with them, at most
    ``max_age_stuck_share`` of changed bodies under an unmoved one, at most
    ``max_age_volatile_share`` of the unchanged checks with one that moved anyway.
    """

    min_stuck: int = 1
    max_stuck_share: float = 0.05
    min_useless: int = 3
    max_useless_share: float = 0.5
    min_age_tracks: int = 3
    max_age_stuck_share: float = 0.1
    max_age_volatile_share: float = 0.1

    def __post_init__(self) -> None:
        # At least one observation: a share of nothing must never condemn a validator.
        if self.min_stuck < 1 or self.min_useless < 1 or self.min_age_tracks < 1:
            raise ValueError("min_stuck, min_useless and min_age_tracks must be at least 1")
        shares = (
            "max_stuck_share",
            "max_useless_share",
            "max_age_stuck_share",
            "max_age_volatile_share",
        )
        require(self, shares, lambda v: 0 <= v <= 1, "be within [0, 1]")


def _norm_etag(expr: pl.Expr) -> pl.Expr:
    # Weak comparison (RFC 9110 8.8.3.2): W/"x" and "x" are the same validator for a GET;
    # nginx weakens its ETag whenever it gzips.
    text = expr.str.strip_chars()
    return text.str.strip_prefix("W/").str.strip_prefix("w/")


def _norm_date(expr: pl.Expr) -> pl.Expr:
    return expr.str.strip_chars()


def _check_columns(frame: pl.DataFrame, needed: Collection[str], what: str) -> None:
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} lacks column(s) {missing}")


def validator_trust(history: pl.DataFrame, rules: TrustRules | None = None) -> pl.DataFrame:
    """One row per host of ``history``: evidence counts and whether to trust each validator.

    Counts per validator ``v`` in ('etag', 'last_modified'):
    ``v_honored`` 304s to a conditional on ``v``; ``v_ignored`` 200s with unchanged content
    and the very validator we sent; ``v_stable`` bodies with unchanged content whose ``v``
    stayed, plus 304s to the other validator that carried ``v`` unmoved; ``v_volatile`` bodies
    with unchanged content whose ``v`` moved; ``v_tracks`` / ``v_stuck`` bodies with changed
    content whose ``v`` moved / stayed. ``v_trusted`` is False on evidence of a stuck or useless
    validator, with the reason in ``v_reason``; no evidence means trusted. Schema:
    :data:`TRUST_SCHEMA`, sorted by host.
    """
    return trust_from_counts(validator_counts(history), rules)


def validator_counts(history: pl.DataFrame, by: Sequence[str] = ("host",)) -> pl.DataFrame:
    """:func:`validator_trust`'s evidence counts (:data:`COUNT_COLUMNS`) per group of ``by``
    columns, each request counted in its own row's group and judged against the rows before it,
    and ``routes`` (:data:`ROUTES_TYPE`): a few of the counts route by route.

    The counts add up: grouped by host and cycle (``fetched_at``), the sum over cycles is the
    count over the whole history, which is what lets a cycle keep running totals
    (:func:`remember_requests`) instead of re-reading a month of fetch_log.
    """
    _check_columns(history, HISTORY_COLUMNS, "fetch history")
    by = list(by)
    _check_columns(history, by, "fetch history")
    if history.height == 0:
        return pl.DataFrame(
            schema={
                **{c: history.schema[c] for c in by},
                **dict.fromkeys(COUNT_COLUMNS, pl.Int64()),
                "routes": ROUTES_TYPE,
            }
        )
    has_validator = "validator" in history.columns
    has_version = "fingerprint_version" in history.columns
    cols = list(dict.fromkeys([*HISTORY_COLUMNS, *by]))
    if has_validator:
        cols.append("validator")
    if has_version:
        cols.append("fingerprint_version")

    df = (
        history.select(cols)
        .with_row_index("_row")
        .with_columns(
            pl.col("etag").cast(pl.String),
            pl.col("last_modified").cast(pl.String),
            pl.col("conditional").cast(pl.Boolean).fill_null(False),
            pl.col("http_status").cast(pl.Int64),
        )
        .sort(["host", "url", "fetched_at", "_row"])
    )
    key = ["host", "url"]
    if has_validator:
        df = df.with_columns(pl.col("validator").cast(pl.String))
    else:
        prev_etag = pl.col("etag").shift(1).over(key)
        prev_lm = pl.col("last_modified").shift(1).over(key)
        df = df.with_columns(
            validator=pl.when(pl.col("conditional") & prev_etag.is_not_null())
            .then(pl.lit("etag"))
            .when(pl.col("conditional") & prev_lm.is_not_null())
            .then(pl.lit("last_modified"))
            .otherwise(pl.lit(None, pl.String))
        )
    df = df.with_columns(
        _etag=_norm_etag(pl.col("etag")),
        _last_modified=_norm_date(pl.col("last_modified")),
        _route=url_route(pl.col("url")),
    )

    # 304s: honoured for the validator that was sent; for the other one, a 304 that carries it
    # unmoved is the server agreeing with itself that nothing changed (without this, a
    # validator we never send would be judged on the rare bodies alone).
    per_row: dict[str, pl.Expr] = {}
    for v in _VALIDATORS:
        is_304 = pl.col("http_status") == 304
        sent = pl.col("conditional") & (pl.col("validator") == v).fill_null(False)
        unmoved = (pl.col(f"_{v}") == pl.col(f"_{v}").shift(1).over(key)).fill_null(False)
        per_row[f"{v}_honored"] = is_304 & sent
        per_row[f"_{v}_still"] = is_304 & ~sent & unmoved
    df = df.with_columns(**per_row)
    honored = df.group_by(by).agg(pl.len().alias("n_fetches"), *(pl.col(c).sum() for c in per_row))
    answered = (
        df.filter(pl.col("_route").is_not_null())
        .group_by([*by, "_route"])
        .agg(pl.col(f"{v}_honored").sum().cast(pl.Int64) for v in _VALIDATORS)
    )

    # Each body against the previous body of the same URL.
    bodies = df.filter(_is_body())
    shifted = [
        pl.col(c).shift(1).over(key).alias(f"_prev{c}")
        for c in ("fingerprint", "_etag", "_last_modified")
    ]
    if has_version:
        shifted.append(pl.col("fingerprint_version").shift(1).over(key).alias("_prevversion"))
    pairs = bodies.with_columns(shifted).filter(pl.col("_prevfingerprint").is_not_null())
    if has_version:
        pairs = pairs.filter(pl.col("fingerprint_version").eq_missing(pl.col("_prevversion")))
    same_content = pl.col("fingerprint") == pl.col("_prevfingerprint")
    kinds: dict[str, pl.Expr] = {}
    for v in _VALIDATORS:
        now, before = pl.col(f"_{v}"), pl.col(f"_prev_{v}")
        both = now.is_not_null() & before.is_not_null()
        kept = both & (now == before)
        moved = both & (now != before)
        sent = pl.col("conditional") & (pl.col("validator") == v).fill_null(False)
        kinds[f"{v}_ignored"] = kept & same_content & sent
        kinds[f"{v}_stable"] = kept & same_content & ~sent
        kinds[f"{v}_volatile"] = moved & same_content
        kinds[f"{v}_tracks"] = moved & ~same_content
        kinds[f"{v}_stuck"] = kept & ~same_content
    pairs = pairs.with_columns(**kinds)
    compared = pairs.group_by(by).agg(pl.len().alias("n_body_pairs"), pl.col(*kinds).sum())
    compared_routes = (
        pairs.filter(pl.col("_route").is_not_null())
        .group_by([*by, "_route"])
        .agg(
            pl.len().cast(pl.Int64).alias("n_body_pairs"),
            pl.col(*ROUTE_CHANGE_COLUMNS).sum().cast(pl.Int64),
        )
    )
    said = [pl.col(c) > 0 for c in ROUTE_COUNT_COLUMNS]
    routes = (
        answered.join(compared_routes, on=[*by, "_route"], how="full", coalesce=True)
        .with_columns(pl.col(*ROUTE_COUNT_COLUMNS).fill_null(0))
        .filter(pl.any_horizontal(*said))
        .rename({"_route": "route"})
        .sort([*by, "route"])
        .group_by(by)
        .agg(routes=pl.struct("route", *ROUTE_COUNT_COLUMNS))
    )

    counts = (
        honored.join(compared, on=by, how="left")
        .with_columns(pl.exclude(by).fill_null(0).cast(pl.Int64))
        .with_columns(
            (pl.col(f"{v}_stable") + pl.col(f"_{v}_still")).alias(f"{v}_stable")
            for v in _VALIDATORS
        )
        .join(routes, on=by, how="left")
    )
    return counts.select(*by, *COUNT_COLUMNS, pl.col("routes").cast(ROUTES_TYPE)).sort(by)


def trust_from_counts(counts: pl.DataFrame, rules: TrustRules | None = None) -> pl.DataFrame:
    """Verdicts on per-host evidence counts (one row per host, :data:`COUNT_COLUMNS`), in
    :data:`TRUST_SCHEMA`, sorted by host."""
    rules = rules or TrustRules()
    _check_columns(counts, ["host", *COUNT_COLUMNS], "validator evidence")
    verdicts = []
    for v in _VALIDATORS:
        trusted, reason = _verdict(v, rules)
        verdicts += [trusted.alias(f"{v}_trusted"), reason.alias(f"{v}_reason")]
    out = counts.with_columns(verdicts)
    return out.select([pl.col(name).cast(dtype) for name, dtype in TRUST_SCHEMA.items()]).sort(
        "host"
    )


def is_refused_304(status: str = "http_status", outcome: str = "outcome") -> pl.Expr:
    """A 304 the fetch did not take as a revalidation (it then says 'error': sent to a request
    without validators, or naming another ETag than the one sent)."""
    return (pl.col(status) == 304) & (pl.col(outcome) == "error")


def _is_body() -> pl.Expr:
    return (
        pl.col("http_status").is_between(200, 299)
        & pl.col("outcome").is_in(_BODY_OUTCOMES)
        & pl.col("fingerprint").is_not_null()
    )


def latest_requests(history: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``history`` a later request is judged against: per URL its last request,
    its last body and its last refused 304 (:func:`etag_refused_here`; one row where they are
    the same). Same columns as ``history``."""
    if history.height == 0:
        return history
    key = ["host", "url"]
    ordered = history.with_row_index("_row").sort([*key, "fetched_at", "_row"])
    last_row = pl.col("_row") == pl.col("_row").last().over(key)
    last_body = pl.col("_row") == pl.col("_row").filter(_is_body()).last().over(key)
    last_refused = pl.col("_row") == pl.col("_row").filter(is_refused_304()).last().over(key)
    kept = last_row | last_body.fill_null(False) | last_refused.fill_null(False)
    return ordered.filter(kept).drop("_row")


def remember_requests(
    evidence: pl.DataFrame,
    latest: pl.DataFrame,
    requests: pl.DataFrame,
    now: datetime,
    window: timedelta,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The running evidence after one cycle: ``evidence`` (per host and ``cycle_at``, the
    :data:`COUNT_COLUMNS` of each cycle's requests) with this cycle's added, and ``latest``
    (:func:`latest_requests` so far) moved on by this cycle's ``requests``, both cut to
    ``window`` before ``now``.

    Each request is judged against the previous requests of its URL at the time it is made, so
    summing a month of cycles gives the counts :func:`validator_trust` finds in that month of
    fetch_log, except for pairs that straddle the month's start (counted here while their first
    half was still within ``window``). A re-run of cycle ``now`` replaces that cycle's counts
    with its own requests'.
    """
    since = now - window
    before = latest.filter((pl.col("fetched_at") >= since) & (pl.col("fetched_at") < now))
    history = pl.concat([before, requests.select(before.columns)], how="vertical_relaxed")
    cycle = (
        validator_counts(history, by=("host", "fetched_at"))
        .filter(pl.col("fetched_at") == now)
        .rename({"fetched_at": "cycle_at"})
    )
    kept = evidence.filter((pl.col("cycle_at") >= since) & (pl.col("cycle_at") != now))
    updated = pl.concat([kept, cycle.select(kept.columns)], how="vertical_relaxed")
    return updated.sort(["host", "cycle_at"]), latest_requests(history)


def trust_before(
    evidence: pl.DataFrame,
    now: datetime,
    window: timedelta,
    rules: TrustRules | None = None,
    *,
    apart: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Verdicts per host from the ``evidence`` of cycles in ``window`` before ``now``.

    ``apart``: routes judged on their own (:func:`stuck_routes`), whose changes then do not
    count against their host where its other routes have shown the validator moving with a
    change: fetched without the validator stuck there, a route's pages go on showing changes
    under an unmoved one, and those alone turned a host whose other routes are honest stuck
    as a whole, every 304 of theirs lost."""
    recent = evidence.filter(cycles_within(now, window))
    counts = recent.group_by("host").agg(pl.col(c).sum() for c in COUNT_COLUMNS)
    if apart is not None and apart.height and "routes" in recent.columns:
        flags = apart.select("host", "route", *(pl.col(f"{v}_stuck").alias(v) for v in _VALIDATORS))
        taken = (
            route_sums(recent)
            .join(flags, on=["host", "route"])
            .group_by("host")
            .agg(
                pl.col(f"{v}_{k}").filter(pl.col(v)).sum().alias(f"_{v}_{k}")
                for v in _VALIDATORS
                for k in ("tracks", "stuck")
            )
        )
        # only where the rest of the host has shown its validator moving with a change: a
        # host stuck on every route stays judged as a whole, its new routes included
        counts = counts.join(taken, on="host", how="left").with_columns(
            pl.when(pl.col(f"{v}_tracks") > pl.col(f"_{v}_tracks").fill_null(0))
            .then(pl.col(f"{v}_{k}") - pl.col(f"_{v}_{k}").fill_null(0))
            .otherwise(pl.col(f"{v}_{k}"))
            .alias(f"{v}_{k}")
            for v in _VALIDATORS
            for k in ("tracks", "stuck")
        )
    return trust_from_counts(counts, rules)


def route_sums(evidence: pl.DataFrame) -> pl.DataFrame:
    """Per host and route, the ``routes`` counts of ``evidence`` summed (an empty frame of
    those columns for evidence without them: files from before the column)."""
    if "routes" not in evidence.columns:
        schema = {"host": pl.String(), "route": pl.String()}
        return pl.DataFrame(schema=schema | dict.fromkeys(ROUTE_COUNT_COLUMNS, pl.Int64()))
    return (
        evidence.select("host", pl.col("routes").cast(ROUTES_TYPE))
        .explode("routes")
        .drop_nulls("routes")
        .unnest("routes")
        .group_by("host", "route")
        .agg(pl.col(*ROUTE_COUNT_COLUMNS).sum())
    )


def stuck_routes(
    evidence: pl.DataFrame, now: datetime, window: timedelta, rules: TrustRules | None = None
) -> pl.DataFrame:
    """The routes whose validator is stuck by :class:`TrustRules`' stuck rule counted on the
    route alone, from the ``evidence`` (its ``routes`` column) of cycles in ``window`` before
    ``now``: columns ``host``, ``route``, ``etag_stuck`` and ``last_modified_stuck`` (bool),
    one row per route with either.

    A host is judged on all its changes, and rightly so for a server that gets its validators
    wrong now and then; but a host is often several applications behind one name, and one of
    them can keep its ETag while its pages change. An honest shop whose /deals/ pages kept
    theirs had their stuck changes under the host's share, and most of the 304s on those pages
    hid a change (found by an outside held-out web). Evidence without the column (files from
    before it) gives none."""
    rules = rules or TrustRules()
    schema: dict[str, pl.DataType] = {"host": pl.String(), "route": pl.String()}
    schema |= {f"{v}_stuck": pl.Boolean() for v in _VALIDATORS}
    sums = route_sums(evidence.filter(cycles_within(now, window)))
    flags = {
        f"{v}_stuck": _is_stuck(pl.col(f"{v}_stuck"), pl.col(f"{v}_tracks"), rules)
        for v in _VALIDATORS
    }
    found = sums.with_columns(**flags).filter(pl.any_horizontal(*flags))
    return found.select(pl.col(name).cast(t) for name, t in schema.items()).sort("host", "route")


def route_of_row() -> pl.Expr:
    """Each row's host and route (columns ``host``, ``url``) as one key: what
    :func:`routes_listed` lists."""
    return pl.concat_str(pl.col("host"), url_route(pl.col("url")), separator="\t")


def routes_listed(routes: pl.DataFrame) -> pl.Series:
    """The keys of :func:`route_of_row` for a frame of ``host`` and ``route``."""
    return routes.select(pl.concat_str("host", "route", separator="\t")).to_series()


def _is_stuck(stuck: pl.Expr, tracks: pl.Expr, rules: TrustRules) -> pl.Expr:
    return (stuck >= rules.min_stuck) & (
        stuck.cast(pl.Float64) / (stuck + tracks).cast(pl.Float64) >= rules.max_stuck_share
    )


def _verdict(v: str, rules: TrustRules) -> tuple[pl.Expr, pl.Expr]:
    stuck, tracks = pl.col(f"{v}_stuck"), pl.col(f"{v}_tracks")
    useless = pl.col(f"{v}_volatile") + pl.col(f"{v}_ignored")
    useful = pl.col(f"{v}_honored") + pl.col(f"{v}_stable")
    is_stuck = _is_stuck(stuck, tracks, rules)
    is_useless = (useless >= rules.min_useless) & (
        useless.cast(pl.Float64) / (useless + useful).cast(pl.Float64) >= rules.max_useless_share
    )
    label = "ETag" if v == "etag" else "Last-Modified"
    reason = (
        pl.when(is_stuck)
        .then(
            pl.format(
                f"stuck: same {label} on changed content in {{}} of {{}} changes",
                stuck,
                stuck + tracks,
            )
        )
        .when(is_useless)
        .then(
            pl.format(
                f"useless: {label} moved without a content change or was ignored "
                "in {} of {} unchanged checks",
                useless,
                useless + useful,
            )
        )
        .otherwise(pl.lit(None, pl.String))
    )
    return ~(is_stuck | is_useless), reason


def content_age_trust(trust: pl.DataFrame, rules: TrustRules | None = None) -> pl.DataFrame:
    """Per host of ``trust`` (:func:`validator_trust`'s output): ``ages_trusted``, whether its
    Last-Modified may date content changes, with the reason when not.

    A Last-Modified that lags (stuck) makes pages look slower than they are and one that moves
    on its own (volatile, "now") makes them look faster, so both must be rare, and the header
    must have been seen moving with real changes: no evidence means *not* trusted here, unlike
    for conditional requests, where a wrong guess costs one body.
    """
    rules = rules or TrustRules()
    _check_columns(trust, TRUST_SCHEMA, "trust")
    tracks, stuck = pl.col("last_modified_tracks"), pl.col("last_modified_stuck")
    volatile = pl.col("last_modified_volatile")
    unchanged = volatile + pl.col("last_modified_stable") + pl.col("last_modified_honored")
    few_tracks = tracks < rules.min_age_tracks
    lags = stuck.cast(pl.Float64) > rules.max_age_stuck_share * (stuck + tracks)
    wanders = volatile.cast(pl.Float64) > rules.max_age_volatile_share * unchanged
    reason = (
        pl.when(pl.col("last_modified_trusted").not_())
        .then(pl.col("last_modified_reason"))
        .when(few_tracks)
        .then(
            pl.format(
                "moved with {} content changes, fewer than " + str(rules.min_age_tracks), tracks
            )
        )
        .when(lags)
        .then(pl.format("stayed on {} of {} content changes", stuck, stuck + tracks))
        .when(wanders)
        .then(pl.format("moved on {} of {} unchanged checks", volatile, unchanged))
        .otherwise(pl.lit(None, pl.String))
    )
    return trust.select("host", ages_trusted=reason.is_null(), ages_reason=reason).sort("host")


def _hosts_where(trust: pl.DataFrame, v: str, *, stuck: bool) -> pl.Series:
    """The hosts whose validator ``v`` is untrusted for being stuck (``stuck``) or for any
    other reason. A trust frame without reasons counts every untrusted one as stuck."""
    untrusted = pl.col(f"{v}_trusted").not_()
    if f"{v}_reason" not in trust.columns:
        return trust.filter(untrusted if stuck else pl.lit(False))["host"]
    is_stuck = pl.col(f"{v}_reason").fill_null("").str.starts_with("stuck")
    return trust.filter(untrusted & (is_stuck if stuck else ~is_stuck))["host"]


def etag_refused_here(latest: pl.DataFrame) -> pl.Series:
    """URLs whose If-None-Match got a 304 naming another ETag within the memory's window (the
    fetch refuses it: it validates nothing of our copy). Such a server answers 304 to any
    If-None-Match and puts a new ETag on every answer, so the ETag of the body fetched next
    is refused in turn: without this memory the URL went error, body, error, body for good,
    its changes seen a cycle late. ``latest``: as remember_requests keeps it."""
    refused = is_refused_304() & (pl.col("validator") == "etag")
    return latest.filter(refused.fill_null(False))["url"].unique()


def etag_fails_here(latest: pl.DataFrame) -> pl.Series:
    """URLs whose own last request says their ETag is no use and If-Modified-Since may be:
    it went out with If-None-Match and a whole body came back unchanged (the server ignored
    it, or the ETag moved with nothing changed), or it went out with If-Modified-Since and got
    a 304 (so it stays on the date). ``latest``: one row per URL, as remember_requests keeps
    it (url, validator, http_status, outcome)."""
    validator, status = pl.col("validator"), pl.col("http_status")
    ignored = (validator == "etag") & (pl.col("outcome") == "unchanged")
    dated = (validator == "last_modified") & (status == 304)
    return latest.filter((ignored | dated).fill_null(False))["url"]


def drop_untrusted_validators(
    requests: pl.DataFrame,
    trust: pl.DataFrame,
    *,
    unconditional_reasons: Collection[str] = ("verify",),
    honoured: pl.Series | None = None,
    by_date: pl.Series | None = None,
    refused: pl.Series | None = None,
    stuck_on_routes: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """``requests`` with the validators a host has not earned set to null, same rows and order.

    ``requests`` needs ``host``, ``etag`` and ``last_modified`` (the revisit plan, just before
    it becomes FetchRequests); ``trust`` is :func:`validator_trust`'s output, where a missing
    host means trusted. The client sends If-None-Match when an ETag is left, else
    If-Modified-Since, else nothing and the fingerprint decides. Rows whose ``reason`` (if the
    column exists) is in ``unconditional_reasons`` lose both validators: the verification
    sample must see bodies, or a stuck validator would never be caught.

    A stuck ETag goes everywhere (its 304s hide changes). A useless one (it moves on
    unchanged content, or is ignored) stays on the URLs in ``honoured``, whose last request
    with it was answered 304: their server does compare it. Judged per host alone, a few
    pages with rotating bytes turned a whole host unconditional and its static pages lost
    their 304s for good (found by an exploratory run).

    The URLs in ``by_date`` (:func:`etag_fails_here`) lose their ETag wherever they have a
    Last-Modified, so that If-Modified-Since goes out instead: a page behind a route that
    ignores If-None-Match but honours If-Modified-Since got a body every time, its host's other
    pages honouring ETags (found by an exploratory run).

    The URLs in ``refused`` (:func:`etag_refused_here`) lose their ETag wherever they are:
    sent, it brings back a 304 that validates nothing.

    The URLs of a route in ``stuck_on_routes`` (:func:`stuck_routes`) lose the validator
    stuck there, whatever their host's verdict.
    """
    _check_columns(requests, ("host", "etag", "last_modified"), "requests")
    _check_columns(trust, ("host", "etag_trusted", "last_modified_trusted"), "trust")
    force = pl.lit(False)
    if unconditional_reasons and "reason" in requests.columns:
        force = pl.col("reason").is_in(list(unconditional_reasons)).fill_null(False)
    bad_lm = trust.filter(pl.col("last_modified_trusted").not_())["host"]
    route_stuck = {v: pl.lit(False) for v in _VALIDATORS}
    if stuck_on_routes is not None and stuck_on_routes.height and "url" in requests.columns:
        for v in _VALIDATORS:
            listed = routes_listed(stuck_on_routes.filter(pl.col(f"{v}_stuck")))
            route_stuck[v] = route_of_row().is_in(listed.implode()).fill_null(False)
    drop_lm = pl.col("host").is_in(bad_lm.implode()) | route_stuck["last_modified"] | force
    stuck_etag = _hosts_where(trust, "etag", stuck=True)
    useless_etag = _hosts_where(trust, "etag", stuck=False)
    proven = (
        pl.col("url").is_in(honoured.implode())
        if honoured is not None and "url" in requests.columns
        else pl.lit(False)
    )
    dated = (
        pl.col("url").is_in(by_date.implode()) & pl.col("last_modified").is_not_null()
        if by_date is not None and "url" in requests.columns
        else pl.lit(False)
    )
    spoilt = (
        pl.col("url").is_in(refused.implode())
        if refused is not None and "url" in requests.columns
        else pl.lit(False)
    )
    drop_etag = (
        pl.col("host").is_in(stuck_etag.implode())
        | (pl.col("host").is_in(useless_etag.implode()) & ~proven)
        | dated
        | spoilt
        | route_stuck["etag"]
        | force
    )
    return requests.with_columns(
        etag=pl.when(drop_etag).then(pl.lit(None, pl.String)).otherwise(pl.col("etag")),
        last_modified=pl.when(drop_lm)
        .then(pl.lit(None, pl.String))
        .otherwise(pl.col("last_modified")),
    )
