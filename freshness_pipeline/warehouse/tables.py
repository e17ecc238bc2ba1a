"""The schemas of every warehouse table, in one place.

Writers cast to these schemas so that every Parquet file of a table has the same column types,
and storage seeds each DuckDB view with a 0-row file of the schema: a view over a glob that
matches nothing would otherwise fail, and a first file with a narrower type would fix the view's
types for everyone after it.
"""

from __future__ import annotations

from typing import TypeAlias

import polars as pl

from freshness_pipeline.science.validators import ROUTES_TYPE

#: A column's type as the schemas write it: a polars type class (pl.String) or an instance
#: (pl.List(pl.String)); polars takes either wherever a schema goes.
ColumnType: TypeAlias = pl.DataType | type[pl.DataType]
Schema: TypeAlias = dict[str, ColumnType]

UTC_TIME = pl.Datetime("us", "UTC")

SEEDS: Schema = {
    "url": pl.String,
    "host": pl.String,
    "value": pl.Float64,
    "url_class": pl.String,
    "source": pl.String,
    "added_at": UTC_TIME,
    #: the URL as the seed file (or a redirect handed over) wrote it, where that is not ``url``
    #: itself: what a fetch asks for (stages.candidates.with_request_spellings)
    "written": pl.String,
}

ROBOTS: Schema = {
    "host": pl.String,
    "robots_url": pl.String,
    "http_status": pl.Int64,
    "mode": pl.String,
    "crawl_delay": pl.Float64,
    "sitemaps": pl.List(pl.String),
    "body": pl.String,
    "error": pl.String,
    "fetched_at": UTC_TIME,
    # a 429/503 Retry-After still running: no request to the host before it (science.retry_after)
    "retry_until": UTC_TIME,
    # /sitemap.xml, asked for only while robots.txt names no sitemap: when it was last asked,
    # its HTTP status (null: no answer) and whether it was a sitemap. It is asked again once
    # that answer is as old as robots.record_ttl says an answer may be, or every cycle while
    # it is a sitemap (web.discovery).
    "sitemap_probed_at": UTC_TIME,
    "sitemap_probe_status": pl.Int64,
    "sitemap_probe_found": pl.Boolean,
    # The last cycle whose sitemap walk was complete (every file read to its end; nothing
    # failed, refused or cut by a cap) and how many distinct URLs it listed. Equal to a cycle's
    # now only if that cycle's walk was complete: only then is a URL it no longer lists news.
    "sitemaps_read_at": UTC_TIME,
    "sitemaps_read_entries": pl.Int64,
    # of the host's files, the most complete reads in a row listing under half the URLs of
    # the file's last complete read (web.sitemaps.reads.shrunk): an emptied or gutted listing
    # is a broken generator far more often than a site's pages gone
    "sitemaps_shrunk_reads": pl.Int64,
    # feeds the host's pages announced (or pages that were feeds or sitemaps: a seeded
    # listing), read beside its sitemaps; one that answers 404 or 410 or lists nothing is
    # dropped (web.discovery)
    "feeds": pl.List(pl.String),
    # Per sitemap file asked for (robots.txt's and index children): when it was last asked for
    # and the <lastmod> its index gave it then, so the next walk reads first what it has not
    # read or what changed; and its last complete read (null: none): when (a 304 to its
    # validators counts as one), the validators, the URLs it listed (an index: its children,
    # listed), and reads in a row since that listed under half as many (web.sitemaps.reads).
    # Files unlisted for 30 days are dropped.
    "sitemap_reads": pl.List(
        pl.Struct(
            {
                "url": pl.String,
                "read_at": UTC_TIME,
                "listed_lastmod": UTC_TIME,
                "complete_at": UTC_TIME,
                "etag": pl.String,
                "last_modified": pl.String,
                "entries": pl.Int64,
                "children": pl.List(pl.String),
                "shrunk_reads": pl.Int64,
            }
        )
    ),
}

URL_INVENTORY: Schema = {
    "url": pl.String,
    "host": pl.String,
    "source": pl.String,
    "value": pl.Float64,
    "url_class": pl.String,
    "lastmod": UTC_TIME,
    "first_seen_at": UTC_TIME,
    "last_seen_at": UTC_TIME,
    # the sitemap or feed file that listed the URL when last seen (null: a seed or a pointer):
    # a 304 from that file lists it again, and that file's next complete read without it is
    # news of the URL (web.sitemaps.reads)
    "listed_in": pl.String,
}

URL_CANDIDATES: Schema = {
    "url": pl.String,
    "host": pl.String,
    "value": pl.Float64,
    "url_class": pl.String,
    "sources": pl.String,
    "n_variants": pl.Int64,
    "lastmod": UTC_TIME,
    "first_seen_at": UTC_TIME,
    # the last cycle a sitemap or feed of the host listed the URL (null: never listed), and
    # the sitemap file that listed it then
    "listed_until": UTC_TIME,
    "listed_in": pl.String,
    "allowed": pl.Boolean,
    "blocked_reason": pl.String,
    # what a fetch asks the server for when no source wrote the key itself (the site's own
    # query order, ``?flag``, ``?/path``); null: the key (stages.candidates.with_request_spellings)
    "request_url": pl.String,
}

REVISIT_PLAN: Schema = {
    "url": pl.String,
    "host": pl.String,
    "planned_at": UTC_TIME,
    "value": pl.Float64,
    "url_class": pl.String,
    "status": pl.String,
    # when the URL was first known: a redirect to a page known before the redirecting page's
    # newest version is a soft 404 (science.redirects)
    "first_seen_at": UTC_TIME,
    "last_fetched_at": UTC_TIME,
    "change_rate": pl.Float64,
    "cost": pl.Float64,
    "age_days": pl.Float64,
    "expected_gain": pl.Float64,
    "expected_change": pl.Float64,
    "priority": pl.Float64,
    "reason": pl.String,
    "selected": pl.Boolean,
    "rank": pl.Int64,
    # the next best buys beyond the budget, in order: what a host's deferred share goes to
    "reserve_rank": pl.Int64,
    "etag": pl.String,
    "last_modified": pl.String,
    "fingerprint": pl.String,
    "crawl_delay": pl.Float64,
    # the host's fetches this cycle allows and the pace it is fetched at (science.capacity)
    "host_capacity": pl.Int64,
    "host_gap_s": pl.Float64,
    "host_concurrency": pl.Int64,
    "lastmod": UTC_TIME,
    "hinted_change": pl.Boolean,
    "lastmod_dates": pl.Boolean,
    "lastmod_age_days": pl.Float64,
    # a complete read of the host's sitemaps no longer lists the page, and it has not been
    # fetched since it was last listed: it may be gone (science.schedule's 'delisted' pass)
    "delisted": pl.Boolean,
    # the URL's last archived original, for a revisit record (archive.ArchivedOriginal JSON),
    # and when its newest version was observed (a changed page's previous version)
    "archived": pl.String,
    "version_observed_at": UTC_TIME,
    # failed fetches in a row before this cycle: such a page is fetched after its host's others
    "consecutive_errors": pl.Int64,
    # the candidate's request_url: the spelling sent (null: the key)
    "request_url": pl.String,
}

#: The outcomes of an answer that says the page is there (fetch_results, fetch_log): a
#: gone page's next one of these brings it back.
SUCCESS_OUTCOMES: tuple[str, ...] = ("not_modified", "unchanged", "changed", "new")

FETCH_RESULTS: Schema = {
    "url": pl.String,
    "host": pl.String,
    "fetched_at": UTC_TIME,
    "http_status": pl.Int64,
    "outcome": pl.String,
    "plan_reason": pl.String,
    "expected_change": pl.Float64,
    "fingerprint": pl.String,
    "fingerprint_version": pl.Int64,
    "etag": pl.String,
    "last_modified": pl.String,
    "content_type": pl.String,
    "bytes": pl.Int64,
    "conditional": pl.Boolean,
    "validator": pl.String,
    "duration_ms": pl.Float64,
    "location": pl.String,
    # the URL a page names as its canonical one, when another than its own (link element or
    # Link header): url_inventory finds it (same host only), url_state keeps it
    "canonical": pl.String,
    # feeds of its host the page announces (<link rel=alternate type=...rss+xml>), or its own
    # URL when it is a feed or a sitemap: the next cycle's discovery reads them
    "feeds": pl.List(pl.String),
    "retry_after_s": pl.Float64,
    "error": pl.String,
    "sent": pl.Boolean,
    "content_age_days": pl.Float64,
    "dates_changes": pl.Boolean,
    # where the archive keeps the request's record (relative to <home>/archive/), and the
    # payload's digest (sha1:BASE32, as in WARC-Payload-Digest); null where nothing was archived
    "warc_filename": pl.String,
    "warc_offset": pl.Int64,
    "warc_length": pl.Int64,
    "payload_digest": pl.String,
    # the URL's last archived original (archive.ArchivedOriginal as JSON): what a later
    # unchanged answer refers to as a revisit record
    "archived": pl.String,
}

FETCH_LOG: Schema = {
    "url": pl.String,
    "host": pl.String,
    "fetched_at": UTC_TIME,
    "http_status": pl.Int64,
    "outcome": pl.String,
    "bytes": pl.Int64,
    "conditional": pl.Boolean,
    "validator": pl.String,
    "duration_ms": pl.Float64,
    "fingerprint": pl.String,
    "fingerprint_version": pl.Int64,
    "etag": pl.String,
    "last_modified": pl.String,
    "error": pl.String,
    "plan_reason": pl.String,
    "expected_change": pl.Float64,
    # a 429/503's Retry-After (seconds from fetched_at), kept in the history for operators
    "retry_after_s": pl.Float64,
    # where the archive keeps the request's record (relative to <home>/archive/), and the
    # payload's digest (sha1:BASE32, as in WARC-Payload-Digest); null where nothing was archived
    "warc_filename": pl.String,
    "warc_offset": pl.Int64,
    "warc_length": pl.Int64,
    "payload_digest": pl.String,
    # a redirect the fetch followed to another spelling of the page (a session or tracking
    # parameter added), or a request lost with the kept-alive connection it went out on and
    # sent again: its place among the fetch's requests, 1 for the first; null for the fetch's
    # last answer, the one fetch_results and url_state keep
    "hop": pl.Int64,
}

#: url_state.status, in the order the metric views and `freshness hosts` count them
URL_STATUSES = ("active", "new", "gone", "blocked", "error")

URL_STATE: Schema = {
    "url": pl.String,
    "host": pl.String,
    "status": pl.String,
    "value": pl.Float64,
    "url_class": pl.String,
    "first_seen_at": UTC_TIME,
    "last_fetched_at": UTC_TIME,
    "last_changed_at": UTC_TIME,
    "last_seen_at": UTC_TIME,
    "change_rate": pl.Float64,
    # the posterior median: the typical rate, closer in log terms on thin evidence
    "change_rate_median": pl.Float64,
    "rate_is_lower_bound": pl.Boolean,
    "next_check_at": UTC_TIME,
    "fingerprint": pl.String,
    "fingerprint_version": pl.Int64,
    "etag": pl.String,
    "last_modified": pl.String,
    "last_outcome": pl.String,
    "last_http_status": pl.Int64,
    "redirect_to": pl.String,
    # the URL the page last named as its canonical one (when another than its own)
    "canonical": pl.String,
    "duplicate_of": pl.String,
    "gone_at": pl.Datetime("us", "UTC"),
    "n_fetches": pl.Int64,
    "n_changes": pl.Int64,
    "n_obs": pl.Int64,
    "n_not_modified": pl.Int64,
    "consecutive_errors": pl.Int64,
    "obs_interval_days": pl.List(pl.Float64),
    "obs_changed": pl.List(pl.Boolean),
    "obs_age_days": pl.List(pl.Float64),
    # the last cycle start at which a trusted sitemap lastmod said the page had not changed
    # since its last fetch (null: none since): a later fetch's interval is quiet up to it
    # (stages.state)
    "hint_quiet_until": UTC_TIME,
    # the content's age at the page's first fetch (server Date minus Last-Modified), kept until
    # its host's Last-Modified is trusted to date changes and it becomes the history's first
    # observation (stages.state.with_first_looks); null then, or when there was none
    "first_look_age_days": pl.Float64,
    # the URL's last archived original (archive.ArchivedOriginal as JSON), and when its newest
    # version in page_versions was observed
    "archived": pl.String,
    "version_observed_at": UTC_TIME,
}

# One row per fetch that graded a sitemap lastmod (did it say "changed" when the page had?).
LASTMOD_EVIDENCE: Schema = {
    "host": pl.String,
    # the series of sitemap files that listed the page (science.hints.listing_of; null: none
    # known, counted for the host only)
    "listing": pl.String,
    "observed_at": UTC_TIME,
    "hint_changed": pl.Boolean,
    "changed": pl.Boolean,
}

# The empirical-Bayes change prior url_state fits each cycle
# (science.prior.table.refit_change_prior): per host and url_class (plus "__global__"), one row
# per fit: the model's components in order (kind and rate) and their weights, with the host's
# pages with a history in that class (what it weighs when runs mix hosts). The newest fit and the
# one before it are kept.
CHANGE_PRIOR: Schema = {
    "host": pl.String,
    "url_class": pl.String,
    "fitted_at": UTC_TIME,
    "n_pages": pl.Int64,
    "component": pl.List(pl.String),
    "rate_per_day": pl.List(pl.Float64),
    "weight": pl.List(pl.Float64),
}

# Running evidence on each host's HTTP validators (science.validators.remember_requests), so
# that no cycle re-reads a month of fetch_log to judge them: per cycle, the counts of its
# requests (validators.COUNT_COLUMNS), kept for VALIDATOR_HISTORY; and per URL the last request
# and the last body, which the next request is judged against.
VALIDATOR_EVIDENCE: Schema = {
    "host": pl.String,
    "cycle_at": UTC_TIME,
    "n_fetches": pl.Int64,
    "n_body_pairs": pl.Int64,
    **{
        f"{v}_{k}": pl.Int64
        for v in ("etag", "last_modified")
        for k in ("honored", "ignored", "stable", "volatile", "tracks", "stuck")
    },
    # the changed bodies' counts route by route (validators.stuck_routes); null: none
    "routes": ROUTES_TYPE,
}

VALIDATOR_LATEST: Schema = {
    "url": pl.String,
    "host": pl.String,
    "fetched_at": UTC_TIME,
    "http_status": pl.Int64,
    "outcome": pl.String,
    "conditional": pl.Boolean,
    "validator": pl.String,
    "fingerprint": pl.String,
    "fingerprint_version": pl.Int64,
    "etag": pl.String,
    "last_modified": pl.String,
}

# What each cycle's requests add up to per host and url_class (science.fetch_totals), for the
# whole history: the metric views and pricing by bytes sum these instead of opening every
# fetch_log file. ``cycles``: how many cycles a row sums (1, or a month's once older than
# fetch_totals.CYCLE_DETAIL).
FETCH_TOTALS: Schema = {
    "host": pl.String,
    "cycle_at": UTC_TIME,
    "url_class": pl.String,
    "cycles": pl.Int64,
    "requests": pl.Int64,
    "conditional": pl.Int64,
    "answered_304": pl.Int64,
    "refetched": pl.Int64,
    "unchanged": pl.Int64,
    "changes": pl.Int64,
    "bytes": pl.Int64,
    "errors": pl.Int64,
    "throttled": pl.Int64,
    "verified": pl.Int64,
    "verify_forecast": pl.Float64,
    "verify_changed": pl.Int64,
    "verify_variance": pl.Float64,
}

# Each inventory URL's canonical form (assets.candidates.normalize_with_cache), so that a cycle
# normalizes only the URLs it has not seen under the same rules.
URL_CANONICAL: Schema = {
    "host": pl.String,
    "url": pl.String,
    "canonical": pl.String,
    "canonical_host": pl.String,
    "error": pl.String,
    "rules": pl.String,
}

# What each host accepts (science.capacity), one row per host, replaced each cycle it fetched:
# the learned pace the next plan caps the host by and the next fetch starts from, and what the
# last cycle planned, sent and deferred there.
HOST_CAPACITY: Schema = {
    "host": pl.String,
    "updated_at": UTC_TIME,
    "gap_s": pl.Float64,
    "concurrency": pl.Int64,
    "latency_s": pl.Float64,
    "crawl_delay_s": pl.Float64,
    "capacity": pl.Int64,
    "accepted_cap": pl.Int64,
    "planned": pl.Int64,
    "sent": pl.Int64,
    "deferred": pl.Int64,
    "throttled": pl.Int64,
    "failures": pl.Int64,
    "pauses": pl.Int64,
    "refilled": pl.Int64,
    "clean_cycles": pl.Int64,
    "last_throttled_at": UTC_TIME,
    # the requests in flight when the host last throttled: kept below for a while
    "throttled_concurrency": pl.Int64,
}

# The crawled copy. One row per observed version of a page (a fetch whose content was new or
# changed, or a re-extraction), with what it said; one file per cycle and host.
PAGE_VERSIONS: Schema = {
    "url": pl.String,
    "host": pl.String,
    "observed_at": UTC_TIME,
    "outcome": pl.String,  # 'new' | 'changed' | 'reextracted'
    "url_class": pl.String,
    "fingerprint": pl.String,
    "fingerprint_version": pl.Int64,
    "title": pl.String,
    "text": pl.String,  # the extracted content, a line per block, whitespace folded
    "fields": pl.String,  # JSON object: field name -> value (by default title and text)
    "content_type": pl.String,
    "warc_filename": pl.String,
    "warc_offset": pl.Int64,
    "warc_length": pl.Int64,
    "payload_digest": pl.String,
}

# One row per detected change: what differs between a version and the one before it.
CHANGES: Schema = {
    "url": pl.String,
    "host": pl.String,
    "changed_at": UTC_TIME,
    "previous_observed_at": UTC_TIME,
    "changed_fields": pl.List(pl.String),
    "old_values": pl.String,  # JSON object of the changed fields' old values (text: see lines)
    "new_values": pl.String,
    "text_lines_added": pl.Int64,
    "text_lines_removed": pl.Int64,
}

# Tables kept as history, one file per cycle and host (storage.append_cycle), with the column
# that holds the cycle's time; the others are replaced per host each cycle.
HISTORY_TABLES = {
    "fetch_log": "fetched_at",
    "page_versions": "observed_at",
    "changes": "changed_at",
}

SCHEMAS: dict[str, Schema] = {
    "seeds": SEEDS,
    "robots": ROBOTS,
    "url_inventory": URL_INVENTORY,
    "url_candidates": URL_CANDIDATES,
    "revisit_plan": REVISIT_PLAN,
    "fetch_results": FETCH_RESULTS,
    "fetch_log": FETCH_LOG,
    "url_state": URL_STATE,
    "lastmod_evidence": LASTMOD_EVIDENCE,
    "change_prior": CHANGE_PRIOR,
    "validator_evidence": VALIDATOR_EVIDENCE,
    "validator_latest": VALIDATOR_LATEST,
    "fetch_totals": FETCH_TOTALS,
    "url_canonical": URL_CANONICAL,
    "host_capacity": HOST_CAPACITY,
    "page_versions": PAGE_VERSIONS,
    "changes": CHANGES,
}

# Tables exposed as DuckDB views; seeds and robots are internal but handy, so they are views too.
VIEW_TABLES = tuple(SCHEMAS)


def empty(table: str) -> pl.DataFrame:
    return pl.DataFrame(schema=SCHEMAS[table])


def conform(table: str, df: pl.DataFrame) -> pl.DataFrame:
    """Exactly the table's columns, in order and type; missing ones are added as nulls.

    Helper columns a stage computed on the way never reach a file. A later version that adds a
    column needs no migration: the views read with union_by_name, so older files show NULL.
    """
    schema = SCHEMAS[table]
    exprs = []
    for name, dtype in schema.items():
        if name in df.columns:
            exprs.append(pl.col(name).cast(dtype))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    return df.select(*exprs)
