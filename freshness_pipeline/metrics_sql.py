"""The metrics users watch, as DuckDB SQL over the table views: `freshness report` runs it, and
the views `host_metrics` and `class_metrics` hold it so anyone can query it in their own session.

- share_304: of the conditional requests, how many the server answered 304 (validators work);
- unchanged_share: of the bodies fetched again (outcome 'changed' or 'unchanged'), how many had
  the same content fingerprint: the downloads a working 304 would have saved. A first fetch
  ('new') can be neither, so it is not counted;
- requests_per_change / bytes_per_change: the cost of one detected change;
- expected_age_h: the value-weighted expected time our copies have been stale, from each page's
  rate and the time since we last saw it (Cho and Garcia-Molina's age metric): the freshness lag;
- errors, throttled (429/503 answers);
- verified, verify_forecast, verify_observed, verify_z: on the random verification sample (the
  fetches the planner made whatever the model thought of the pages), the model's mean forecast
  that a page changed since its last fetch against the share that had, and the standardized
  difference (science.calibration): near 0 when the change model is right, beyond ±3 when its
  rates are off (positive: pages change more than it thinks).

Only fixed SQL lives here; no URL or host text is ever put into it.
"""

from __future__ import annotations

from freshness_pipeline.science.calibration import COMPARED

FETCH_METRICS = """
    count(*) AS requests,
    count(*) FILTER (WHERE conditional) AS conditional,
    round(count(*) FILTER (WHERE http_status = 304) / nullif(count(*) FILTER (WHERE conditional), 0), 3)
        AS share_304,
    round(count(*) FILTER (WHERE outcome = 'unchanged')
        / nullif(count(*) FILTER (WHERE outcome IN ('changed', 'unchanged')), 0), 3)
        AS unchanged_share,
    count(*) FILTER (WHERE outcome = 'changed') AS changes,
    round(count(*) / nullif(count(*) FILTER (WHERE outcome = 'changed'), 0), 2) AS requests_per_change,
    round(sum(bytes) / nullif(count(*) FILTER (WHERE outcome = 'changed'), 0)) AS bytes_per_change,
    count(*) FILTER (WHERE outcome = 'error') AS errors,
    count(*) FILTER (WHERE http_status IN (429, 503)) AS throttled,
    count(*) FILTER (WHERE {verified}) AS verified,
    round(avg(expected_change) FILTER (WHERE {verified}), 3) AS verify_forecast,
    round(avg(CASE WHEN outcome = 'changed' THEN 1.0 ELSE 0.0 END) FILTER (WHERE {verified}), 3)
        AS verify_observed,
    round((sum(CASE WHEN outcome = 'changed' THEN 1.0 ELSE 0.0 END) FILTER (WHERE {verified})
           - sum(expected_change) FILTER (WHERE {verified}))
        / nullif(sqrt(sum(expected_change * (1 - expected_change)) FILTER (WHERE {verified})), 0), 2)
        AS verify_z
""".format(
    verified="plan_reason = 'verify' AND expected_change BETWEEN 0 AND 1"
    f" AND outcome IN ({', '.join(repr(o) for o in COMPARED)})"
)

STATE_METRICS = """
    count(*) AS urls,
    count(*) FILTER (WHERE status = 'active') AS active,
    count(*) FILTER (WHERE status = 'new') AS new,
    count(*) FILTER (WHERE status = 'gone') AS gone,
    count(*) FILTER (WHERE status = 'blocked') AS blocked,
    count(*) FILTER (WHERE status = 'error') AS error,
    round(median(change_rate) FILTER (WHERE status = 'active'), 3) AS median_rate_per_day,
    round(24 * sum(value * (age_d - (1 - exp(-change_rate * age_d)) / greatest(change_rate, 1e-9)))
        FILTER (WHERE status = 'active')
        / nullif(sum(value) FILTER (WHERE status = 'active'), 0), 2) AS expected_age_h
"""

# As of the newest cycle in the data, so the views read the same any day.
LATEST_CYCLE = "(SELECT max(fetched_at) FROM fetch_log)"
PARAMETER_NOW = "$now::TIMESTAMPTZ"


def _state_source(now_sql: str) -> str:
    return (
        f"(SELECT *, greatest(date_diff('microsecond', last_seen_at, {now_sql}), 0)"  # noqa: S608
        " / 86400e6 AS age_d FROM url_state)"
    )


def metrics_by(key: str, now_sql: str) -> str:
    """Metrics per 'host' or per 'url_class' (fetch_log joined to url_state for the class)."""
    if key not in ("host", "url_class"):
        raise ValueError("metrics key must be 'host' or 'url_class'")
    state_sql = (
        f"SELECT coalesce({key}, '(none)') AS {key}, {STATE_METRICS} "  # noqa: S608
        f"FROM {_state_source(now_sql)} GROUP BY 1"
    )
    if key == "host":
        log_sql = f"SELECT host, {FETCH_METRICS} FROM fetch_log GROUP BY 1"  # noqa: S608
    else:
        log_sql = (
            f"SELECT coalesce(s.url_class, '(none)') AS url_class, {FETCH_METRICS} "  # noqa: S608
            "FROM fetch_log f LEFT JOIN url_state s USING (url) GROUP BY 1"
        )
    return f"SELECT * FROM ({state_sql}) s FULL JOIN ({log_sql}) f USING ({key}) ORDER BY {key}"  # noqa: S608


def metrics_total(now_sql: str) -> str:
    return (
        f"SELECT * FROM (SELECT {STATE_METRICS} FROM {_state_source(now_sql)}) "  # noqa: S608
        f"CROSS JOIN (SELECT {FETCH_METRICS} FROM fetch_log)"
    )


METRIC_VIEWS = {
    "host_metrics": metrics_by("host", LATEST_CYCLE),
    "class_metrics": metrics_by("url_class", LATEST_CYCLE),
}
