"""The metrics users watch, as DuckDB SQL over the table views: `freshness report` runs it, and
the views `host_metrics` and `class_metrics` hold it so anyone can query it in their own session.

- share_304: of the conditional requests, how many the server answered 304 (validators work);
- unchanged_share: of the bodies fetched again (outcome 'changed' or 'unchanged'), how many had
  the same content fingerprint: the downloads a working 304 would have saved. A first fetch
  ('new') can be neither, so it is not counted;
- requests_per_change / bytes_per_change: the cost of one detected change;
- median_rate_per_day: over the active pages fetched at least twice (a page seen once only
  carries its class prior's mean, which early in a crawl would be every page's figure);
- expected_age_h: the value-weighted expected time our copies have been stale, from each page's
  rate and the time since we last saw it (Cho and Garcia-Molina's age metric): the freshness lag,
  over the active pages, the copies we have;
- copied_share: the share by value of the pages to keep (all but gone and blocked) that are
  active, i.e. what expected_age_h covers: after a first cycle that fetched a few of many pages
  the age read 0.0 as if the crawl were perfect (found by a newcomer), and this says of how much;
- errors, throttled (429/503 answers);
- per host only, from host_capacity (science.capacity), the host's last fetching cycle:
  cycle_planned, cycle_sent, cycle_deferred (its share of the plan, what went out, what it left
  unfetched), capacity (the fetches its learned pace allowed), gap_s and concurrency (that pace);
- verified, verify_forecast, verify_observed, verify_z, verify_verdict: on the random
  verification sample (the fetches the planner made whatever the model thought of the pages),
  the model's mean forecast that a page changed since its last fetch against the share that
  had, and the standardized difference (science.calibration): near 0 when the change model is
  right, beyond ±3 when its rates are off (positive: pages change more than it thinks). z is
  shown only where the forecast count's variance reaches science.calibration's
  MIN_VERIFY_VARIANCE (a handful of pages makes it meaningless); the verdict then says
  "too few to judge".

The request metrics are sums over fetch_totals (science.fetch_totals: the counts of each cycle's
requests per host and url_class, the class a page had when fetched), not over fetch_log, whose
one file per host and cycle made them slower the longer a crawl ran; and they cover the whole
crawl even where fetch_log was pruned. Only fixed SQL lives here; no URL or host text is ever put
into it.
"""

from __future__ import annotations

from freshness_pipeline.science.calibration import MIN_VERIFY_VARIANCE
from freshness_pipeline.warehouse.tables import URL_STATUSES

FETCH_METRICS = f"""
    sum(requests)::BIGINT AS requests,
    sum(conditional)::BIGINT AS conditional,
    round(sum(answered_304) / nullif(sum(conditional), 0), 3) AS share_304,
    round(sum(unchanged) / nullif(sum(refetched), 0), 3) AS unchanged_share,
    sum(changes)::BIGINT AS changes,
    round(sum(requests) / nullif(sum(changes), 0), 2) AS requests_per_change,
    round(sum(bytes) / nullif(sum(changes), 0)) AS bytes_per_change,
    sum(errors)::BIGINT AS errors,
    sum(throttled)::BIGINT AS throttled,
    sum(verified)::BIGINT AS verified,
    round(sum(verify_forecast) / nullif(sum(verified), 0), 3) AS verify_forecast,
    round(sum(verify_changed) / nullif(sum(verified), 0), 3) AS verify_observed,
    round(CASE WHEN sum(verify_variance) >= {MIN_VERIFY_VARIANCE}
        THEN (sum(verify_changed) - sum(verify_forecast)) / sqrt(sum(verify_variance)) END, 2)
        AS verify_z,
    CASE
        WHEN coalesce(sum(verified), 0) = 0 THEN NULL
        WHEN sum(verify_variance) < {MIN_VERIFY_VARIANCE} THEN 'too few to judge'
        WHEN (sum(verify_changed) - sum(verify_forecast)) / sqrt(sum(verify_variance)) > 3
            THEN 'pages change more than forecast'
        WHEN (sum(verify_changed) - sum(verify_forecast)) / sqrt(sum(verify_variance)) < -3
            THEN 'pages change less than forecast'
        ELSE 'consistent'
    END AS verify_verdict
"""

STATE_METRICS = (
    """
    count(*) AS urls,
"""
    + "".join(
        f"    count(*) FILTER (WHERE status = '{status}') AS {status},\n" for status in URL_STATUSES
    )
    + """    round(median(change_rate) FILTER (WHERE status = 'active' AND len(obs_interval_days) > 0), 3)
        AS median_rate_per_day,
    round(24 * sum(value * (age_d - (1 - exp(-change_rate * age_d)) / greatest(change_rate, 1e-9)))
        FILTER (WHERE status = 'active')
        / nullif(sum(value) FILTER (WHERE status = 'active'), 0), 2) AS expected_age_h,
    round(sum(value) FILTER (WHERE status = 'active')
        / nullif(sum(value) FILTER (WHERE status NOT IN ('gone', 'blocked')), 0), 3)
        AS copied_share
"""
)

# As of the newest cycle in the data, so the views read the same any day.
LATEST_CYCLE = "(SELECT max(cycle_at) FROM fetch_totals)"
PARAMETER_NOW = "$now::TIMESTAMPTZ"


def _state_source(now_sql: str) -> str:
    return (
        f"(SELECT *, greatest(date_diff('microsecond', last_seen_at, {now_sql}), 0)"  # noqa: S608
        " / 86400e6 AS age_d FROM url_state)"
    )


def metrics_by(key: str, now_sql: str) -> str:
    """Metrics per 'host' or per 'url_class': url_state's pages beside fetch_totals' requests."""
    if key not in ("host", "url_class"):
        raise ValueError("metrics key must be 'host' or 'url_class'")
    state_sql = (
        f"SELECT coalesce({key}, '(none)') AS {key}, {STATE_METRICS} "  # noqa: S608
        f"FROM {_state_source(now_sql)} GROUP BY 1"
    )
    log_sql = (
        f"SELECT coalesce({key}, '(none)') AS {key}, {FETCH_METRICS} "  # noqa: S608
        "FROM fetch_totals GROUP BY 1"
    )
    joined = f"({state_sql}) s FULL JOIN ({log_sql}) f USING ({key})"  # noqa: S608
    if key == "host":
        joined += f" LEFT JOIN ({HOST_PACE}) c USING (host)"
    return f"SELECT * FROM {joined} ORDER BY {key}"  # noqa: S608


HOST_PACE = """
    SELECT host, planned AS cycle_planned, sent AS cycle_sent, deferred AS cycle_deferred,
           capacity, round(gap_s, 3) AS gap_s, concurrency
    FROM host_capacity
"""


def metrics_total(now_sql: str) -> str:
    return (
        f"SELECT * FROM (SELECT {STATE_METRICS} FROM {_state_source(now_sql)}) "  # noqa: S608
        f"CROSS JOIN (SELECT {FETCH_METRICS} FROM fetch_totals)"
    )


METRIC_VIEWS = {
    "host_metrics": metrics_by("host", LATEST_CYCLE),
    "class_metrics": metrics_by("url_class", LATEST_CYCLE),
}
