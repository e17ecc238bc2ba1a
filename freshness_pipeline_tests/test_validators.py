"""Validator trust on small, hand-written fetch histories: each server misbehaviour on its own,
then the filter that turns trust into the next cycle's conditional headers (and, over real
cycles on loopback, a host whose ETags are useless on some pages and honoured on others)."""

from __future__ import annotations

import zlib
from dataclasses import asdict
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from freshness_pipeline.science.unproven import unproven_hosts, unproven_routes, unproven_scope
from freshness_pipeline.science.validators import (
    HISTORY_COLUMNS,
    TRUST_SCHEMA,
    TrustRules,
    content_age_trust,
    drop_untrusted_validators,
    stuck_routes,
    trust_before,
    validator_counts,
    validator_trust,
)
from freshness_pipeline.web.client import FetchResult

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LM1 = "Thu, 01 Jan 2026 00:00:00 GMT"
LM2 = "Fri, 02 Jan 2026 00:00:00 GMT"
LM3 = "Sat, 03 Jan 2026 00:00:00 GMT"


def body(fp: str, etag: str | None = None, lm: str | None = None, sent: str | None = None):
    """A 200 response: content ``fp`` with these validators; ``sent`` the validator we sent."""
    return {"status": 200, "fp": fp, "etag": etag, "lm": lm, "sent": sent}


def not_modified(sent: str, fp: str, etag: str | None = None, lm: str | None = None):
    return {"status": 304, "fp": fp, "etag": etag, "lm": lm, "sent": sent}


def history(host: str, url: str, steps: list[dict], *, validator_column: bool = True):
    """fetch_log-like rows for one URL, one cycle (6 h) apart, outcomes as the client makes them."""
    rows = []
    prev_fp = None
    for i, step in enumerate(steps):
        if step["status"] == 304:
            outcome = "not_modified"
        elif prev_fp is None:
            outcome = "new"
        else:
            outcome = "unchanged" if step["fp"] == prev_fp else "changed"
        prev_fp = step["fp"]
        row = {
            "url": url,
            "host": host,
            "fetched_at": T0 + timedelta(hours=6 * i),
            "http_status": step["status"],
            "outcome": outcome,
            "conditional": step["sent"] is not None,
            "fingerprint": step["fp"],
            "etag": step["etag"],
            "last_modified": step["lm"],
        }
        if validator_column:
            row["validator"] = step["sent"]
        rows.append(row)
    return rows


def frame(*parts: list[dict]) -> pl.DataFrame:
    return pl.DataFrame([row for part in parts for row in part], infer_schema_length=None)


def trust_of(rows: pl.DataFrame, host: str = "h", **rules: float) -> dict:
    out = validator_trust(rows, TrustRules(**rules) if rules else None)  # type: ignore[arg-type]
    assert dict(out.schema) == TRUST_SCHEMA
    return out.filter(pl.col("host") == host).row(0, named=True)


# ------------------------------------------------------------------ well-behaved servers


def test_honest_server_is_trusted_and_its_304s_counted() -> None:
    steps = [
        body("A", '"e1"', LM1),
        not_modified("etag", "A", '"e1"', LM1),
        not_modified("etag", "A", '"e1"', LM1),
        body("B", '"e2"', LM2, sent="etag"),  # changed: both validators moved
        not_modified("etag", "B", '"e2"', LM2),
    ]
    t = trust_of(frame(history("h", "/a", steps), history("h", "/b", steps)))
    assert t["etag_trusted"] and t["last_modified_trusted"]
    assert t["etag_reason"] is None and t["last_modified_reason"] is None
    assert (t["n_fetches"], t["n_body_pairs"]) == (10, 2)
    assert (t["etag_honored"], t["etag_tracks"], t["last_modified_tracks"]) == (6, 2, 2)
    assert t["etag_stuck"] == t["etag_volatile"] == t["etag_ignored"] == 0


def test_no_evidence_means_trusted() -> None:
    t = trust_of(frame(history("h", "/a", [body("A", '"e1"', LM1)])))
    assert t["etag_trusted"] and t["last_modified_trusted"] and t["n_body_pairs"] == 0


def test_weak_and_strong_forms_of_an_etag_are_the_same_validator() -> None:
    steps = [body("A", '"e1"'), body("A", 'W/"e1"'), body("A", '"e1"'), body("A", 'W/"e1"')]
    t = trust_of(frame(history("h", "/a", steps)))
    assert (t["etag_stable"], t["etag_volatile"]) == (3, 0) and t["etag_trusted"]


# ------------------------------------------------------------------ lying servers


def test_a_host_is_unproven_while_its_validators_have_only_ever_said_not_modified() -> None:
    quiet = [body("A", '"e1"', LM1), not_modified("etag", "A", '"e1"', LM1)]
    honest = [*quiet, body("B", '"e2"', LM2, sent="etag")]  # a change met under a new ETag
    stuck = [*quiet, body("B", '"e1"', LM1)]  # the verification body shows the stuck ETag
    static = [body("A", '"e1"'), not_modified("etag", "A", '"e1"')] + [body("A", '"e1"')] * 8
    rows = frame(
        history("quiet", "/a", quiet),
        history("quiet", "/b", quiet),
        history("honest", "/a", honest),
        history("stuck", "/a", stuck),
        history("static", "/a", static),
        history("unasked", "/a", [body("A", '"e1"'), body("A", '"e1"')]),  # no 304 yet
    )
    assert unproven_hosts(validator_trust(rows)).to_list() == ["quiet"]
    # eight unchanged bodies say the pages hardly change; seven do not yet
    assert unproven_hosts(validator_trust(rows), max_unchanged_bodies=9).to_list() == [
        "quiet",
        "static",
    ]


def test_a_route_is_unproven_while_its_validators_have_only_said_not_modified_there() -> None:
    """A route of a host whose other routes showed their ETags moving with changes is taken on
    its own: its pages kept their ETag while they changed, every request there came back 304,
    and no body showed it for cycles on end (found by an outside held-out web)."""
    quiet = [body("A", '"e1"', LM1), not_modified("etag", "A", '"e1"', LM1)]
    honest = [*quiet, body("B", '"e2"', LM2, sent="etag")]
    rows = frame(
        history("h", "https://h/news/1", honest),
        history("h", "https://h/deals/1", quiet),
        history("h", "https://h/deals/2", quiet),
        history("h", "https://h/about", [body("A", '"e1"'), body("A", '"e1"')]),  # no 304
        history("q", "https://q/a/1", quiet),
    )
    evidence = validator_counts(rows, by=("host", "fetched_at")).rename({"fetched_at": "cycle_at"})
    assert unproven_hosts(evidence).to_list() == ["q"]
    routes = unproven_routes(evidence)
    assert routes.rows() == [("h", "/deals/"), ("q", "/a/")]
    # one look per unproven host, else per unproven route of a tested host
    requests = pl.DataFrame(
        {
            "host": ["h", "h", "h", "q", "q"],
            "url": [
                "https://h/deals/9",
                "https://h/news/2",
                "https://h/x",
                "https://q/a/1",
                "https://q/b",
            ],
        }
    )
    scope = requests.select(unproven_scope(unproven_hosts(evidence), routes))
    assert scope.to_series().to_list() == ["h\t/deals/", None, None, "q", "q"]
    # a body that shows a change under a moved ETag proves the route
    proven = frame(history("h", "https://h/deals/1", honest))
    evidence = validator_counts(proven, by=("host", "fetched_at")).rename(
        {"fetched_at": "cycle_at"}
    )
    assert unproven_routes(evidence).height == 0


def test_an_etag_new_on_every_200_with_unchanged_content_is_not_trusted() -> None:
    steps = [body("A", f'"t{i}"', LM1, sent="etag" if i else None) for i in range(5)]
    t = trust_of(frame(history("h", "/a", steps)))
    assert not t["etag_trusted"] and t["etag_volatile"] == 4
    assert "useless" in t["etag_reason"] and "ETag" in t["etag_reason"]
    # The Last-Modified of the same responses held still on unchanged content: fall back to it.
    assert t["last_modified_trusted"] and t["last_modified_stable"] == 4


def test_a_last_modified_that_never_moves_while_content_changes_is_not_trusted() -> None:
    steps = [body("A", lm=LM1), body("B", lm=LM1), body("C", lm=LM1, sent="last_modified")]
    t = trust_of(frame(history("h", "/a", steps)))
    assert not t["last_modified_trusted"] and t["last_modified_stuck"] == 2
    assert t["last_modified_reason"].startswith("stuck: same Last-Modified")
    assert t["etag_trusted"]  # no ETag, no evidence against it


def test_a_stuck_etag_is_caught_across_304s_by_a_later_body() -> None:
    # The server kept answering 304 to a page that changed; an unconditional (verification)
    # fetch reveals new content under the old ETag.
    steps = [
        body("A", '"e1"'),
        not_modified("etag", "A", '"e1"'),
        not_modified("etag", "A", '"e1"'),
        body("B", '"e1"'),
    ]
    t = trust_of(frame(history("h", "/a", steps)))
    assert t["etag_stuck"] == 1 and not t["etag_trusted"]
    assert "stuck" in t["etag_reason"]


def test_a_last_modified_that_always_moves_while_content_does_not_is_not_trusted() -> None:
    lms = [LM1, LM2, LM3, "Sun, 04 Jan 2026 00:00:00 GMT"]
    steps = [body("A", lm=lm, sent="last_modified" if i else None) for i, lm in enumerate(lms)]
    t = trust_of(frame(history("h", "/a", steps)))
    assert t["last_modified_volatile"] == 3 and not t["last_modified_trusted"]


def test_a_server_that_ignores_a_matching_validator_is_not_trusted() -> None:
    steps = [body("A", '"e1"')] + [body("A", '"e1"', sent="etag") for _ in range(3)]
    t = trust_of(frame(history("h", "/a", steps)))
    assert (t["etag_ignored"], t["etag_stable"]) == (3, 0) and not t["etag_trusted"]


def test_one_deploy_touching_every_file_does_not_condemn_working_validators() -> None:
    parts = []
    for u in range(4):
        steps = [body("A", '"e1"', LM1)]
        steps += [not_modified("etag", "A", '"e1"', LM1) for _ in range(3)]
        steps += [body("A", '"e2"', LM2, sent="etag")]  # new mtime, same bytes
        steps += [not_modified("etag", "A", '"e2"', LM2) for _ in range(2)]
        parts.append(history("h", f"/p{u}", steps))
    t = trust_of(frame(*parts))
    assert t["etag_volatile"] == 4 and t["etag_honored"] == 20
    assert t["etag_trusted"] and t["last_modified_trusted"]


def test_hosts_are_judged_separately() -> None:
    good = history("good", "/a", [body("A", '"e1"'), not_modified("etag", "A", '"e1"')])
    bad = history("bad", "/a", [body(str(i), lm=LM1) for i in range(3)])
    out = validator_trust(frame(good, bad))
    assert out["host"].to_list() == ["bad", "good"]
    assert out["last_modified_trusted"].to_list() == [False, True]


def test_a_validator_stuck_on_one_route_of_an_honest_host_is_judged_on_that_route() -> None:
    """One application of a host can keep its ETag while its pages change: judged on all the
    host's changes, its stuck ones are under the stuck share, and every 304 on its route hides
    a change. Counted per route (the path's first directory) they are all of that route's."""
    news = [
        history(
            "h",
            f"https://h/news/{u}",
            [body(str(i), f'"n{u}-{i}"', f"lm{i}", sent="etag" if i else None) for i in range(4)],
        )
        for u in range(10)
    ]
    deals = history("h", "https://h/deals/1", [body("A", '"d"', LM1), body("B", '"d"', LM2)])
    rows = frame(*news, deals)
    assert trust_of(rows)["etag_trusted"]  # 1 stuck change in 31: the host is honest
    evidence = validator_counts(rows).with_columns(cycle_at=pl.lit(T0))
    routes = stuck_routes(evidence, T0 + timedelta(days=1), timedelta(days=30))
    # the ETag stayed on /deals/ (its Last-Modified moved): stuck on that route alone
    assert routes.rows() == [("h", "/deals/", True, False)]
    assert stuck_routes(evidence, T0 + timedelta(days=40), timedelta(days=30)).height == 0
    assert stuck_routes(evidence.drop("routes"), T0 + timedelta(days=1), timedelta(30)).height == 0
    requests = pl.DataFrame(
        {
            "url": ["https://h/deals/2", "https://h/news/3", "https://h/deals", "https://g/deals/"],
            "host": ["h", "h", "h", "g"],
            "etag": ['"d"', '"n"', '"x"', '"y"'],
            "last_modified": [LM1, LM1, LM1, LM1],
        }
    )
    out = drop_untrusted_validators(requests, validator_trust(rows), stuck_on_routes=routes)
    # /deals is a page at the root, not on the route; g is another host
    assert out["etag"].to_list() == [None, '"n"', '"x"', '"y"']
    assert out["last_modified"].to_list() == [LM1] * 4


def test_a_route_judged_apart_no_longer_counts_against_its_host() -> None:
    """Fetched without its stuck ETag, a route's pages go on showing changes under it: four
    of thirty-four changes turned the whole host stuck, and its honest routes lost their 304s.
    Only where the rest of the host has shown the ETag moving: a host stuck everywhere stays
    stuck, its routes with no changes seen yet included."""
    news = [
        history(
            "h", f"https://h/news/{u}", [body(str(i), f'"n{u}-{i}"', f"lm{i}") for i in range(4)]
        )
        for u in range(10)
    ]
    deals = [
        history("h", f"https://h/deals/{u}", [body("A", '"d"', LM1), body("B", '"d"', LM2)])
        for u in range(4)
    ]
    evidence = validator_counts(frame(*news, *deals)).with_columns(cycle_at=pl.lit(T0))
    now, month = T0 + timedelta(days=1), timedelta(days=30)
    routes = stuck_routes(evidence, now, month)
    assert routes.rows() == [("h", "/deals/", True, False)]
    assert not trust_before(evidence, now, month)["etag_trusted"][0]  # 4 of 34
    assert trust_before(evidence, now, month, apart=routes)["etag_trusted"][0]
    # stuck on every route: nothing honest left to judge the host by
    only = validator_counts(frame(*deals)).with_columns(cycle_at=pl.lit(T0))
    kept = trust_before(only, now, month, apart=stuck_routes(only, now, month))
    assert not kept["etag_trusted"][0] and kept["etag_stuck"][0] == 4


# ------------------------------------------------------------------ input handling


def test_without_a_validator_column_it_is_inferred_from_the_previous_row() -> None:
    steps = [body("A", '"e1"')] + [body("A", '"e1"', sent="etag") for _ in range(3)]
    t = trust_of(frame(history("h", "/a", steps, validator_column=False)))
    assert t["etag_ignored"] == 3 and not t["etag_trusted"]
    lm_only = [body("A", lm=LM1), not_modified("last_modified", "A", lm=LM1)]
    t = trust_of(frame(history("h", "/a", lm_only, validator_column=False)))
    assert (t["last_modified_honored"], t["etag_honored"]) == (1, 0)


def test_a_new_extractor_version_is_not_read_as_a_change() -> None:
    rows = frame(history("h", "/a", [body("A", '"e1"'), body("A", '"e1"'), body("A2", '"e1"')]))
    rows = rows.with_columns(fingerprint_version=pl.Series([1, 1, 2]))
    t = trust_of(rows)
    assert (t["etag_stuck"], t["n_body_pairs"]) == (0, 1) and t["etag_trusted"]


def test_rows_in_any_order_and_non_body_rows_are_handled() -> None:
    steps = [body("A", lm=LM1), body("B", lm=LM1)]
    rows = frame(history("h", "/a", steps)).reverse()
    errors = pl.DataFrame(
        {
            "url": ["/a", "/a"],
            "host": ["h", "h"],
            "fetched_at": [T0 + timedelta(hours=3), T0 + timedelta(hours=9)],
            "http_status": [None, 500],
            "outcome": ["error", "error"],
            "conditional": [True, True],
            "fingerprint": [None, None],
            "etag": [None, None],
            "last_modified": [LM1, LM1],
            "validator": ["last_modified", "last_modified"],
        },
        schema_overrides={"http_status": pl.Int64},
    )
    t = trust_of(pl.concat([rows, errors], how="vertical_relaxed"))
    assert (t["n_fetches"], t["n_body_pairs"], t["last_modified_stuck"]) == (4, 1, 1)


def test_the_history_columns_are_what_the_client_reports() -> None:
    results = [
        FetchResult(url="http://h/a", host="h", http_status=200, outcome="new", fingerprint="A"),
        FetchResult(
            url="http://h/a",
            host="h",
            http_status=304,
            outcome="not_modified",
            fingerprint="A",
            etag='"e"',
            conditional=True,
            validator="etag",
        ),
    ]
    rows = pl.DataFrame([asdict(r) for r in results], infer_schema_length=None).with_columns(
        fetched_at=pl.Series([T0, T0 + timedelta(days=1)])
    )
    assert set(HISTORY_COLUMNS) <= set(rows.columns)
    assert trust_of(rows)["etag_honored"] == 1


def test_bad_input_is_refused_and_empty_input_is_empty() -> None:
    with pytest.raises(ValueError, match="fetch history lacks"):
        validator_trust(pl.DataFrame({"url": ["x"]}))
    empty = pl.DataFrame(schema={c: pl.String for c in HISTORY_COLUMNS})
    out = validator_trust(empty)
    assert out.height == 0 and dict(out.schema) == TRUST_SCHEMA
    with pytest.raises(ValueError):
        TrustRules(min_stuck=0)
    with pytest.raises(ValueError):
        TrustRules(max_useless_share=2)


# ------------------------------------------------------------------ applying trust


def plan() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "url": ["/1", "/2", "/3", "/4", "/5"],
            "host": ["liar", "stuck", "fine", "unknown", "fine"],
            "etag": ['"a"', '"b"', '"c"', '"d"', '"e"'],
            "last_modified": [LM1, LM1, LM1, None, LM2],
            "reason": ["value", "value", "value", "new", "verify"],
            "rank": [1, 2, 3, 4, 5],
        }
    )


def trust_table() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "host": ["fine", "liar", "stuck"],
            "etag_trusted": [True, False, False],
            "last_modified_trusted": [True, True, False],
        }
    )


def test_untrusted_validators_are_dropped_per_host() -> None:
    out = drop_untrusted_validators(plan(), trust_table())
    assert out.columns == plan().columns and out["url"].to_list() == plan()["url"].to_list()
    # liar: ETag dropped, so the client falls back to If-Modified-Since.
    # stuck: both dropped, so no conditional header: the fingerprint decides.
    # unknown host: no evidence, kept. The verification sample: unconditional.
    assert out["etag"].to_list() == [None, None, '"c"', '"d"', None]
    assert out["last_modified"].to_list() == [LM1, None, LM1, None, None]


def test_verification_can_stay_conditional_and_plans_need_no_reason_column() -> None:
    out = drop_untrusted_validators(plan(), trust_table(), unconditional_reasons=())
    assert out["etag"][4] == '"e"' and out["last_modified"][4] == LM2
    bare = drop_untrusted_validators(plan().drop("reason"), trust_table())
    assert bare["etag"].to_list() == [None, None, '"c"', '"d"', '"e"']


def test_trust_from_history_feeds_the_filter() -> None:
    liar = history("liar", "/1", [body("A", f'"t{i}"', LM1) for i in range(5)])
    out = drop_untrusted_validators(plan(), validator_trust(frame(liar)))
    assert out["etag"][0] is None and out["last_modified"][0] == LM1
    with pytest.raises(ValueError, match="requests lacks"):
        drop_untrusted_validators(plan().drop("etag"), trust_table())


def test_a_useless_etag_stays_on_the_urls_whose_server_honours_it() -> None:
    """A host where some pages' ETags move on unchanged content (rotating bytes the
    fingerprint ignores) judged its ETag useless and dropped it everywhere: its static pages,
    which answered 304, lost their 304s for good (found by an exploratory run). A useless
    ETag now stays on the URLs whose last request with it got a 304; a stuck one (304s over
    changes) still goes everywhere, and so does a useless one elsewhere on its host."""
    volatile = [
        history(
            "rot", f"/r{k}", [body("A", f'"t{i}"', sent="etag" if i else None) for i in range(5)]
        )
        for k in range(2)
    ]
    static = history(
        "rot", "/s", [body("S", '"s"'), *[not_modified("etag", "S") for _ in range(2)]]
    )
    stuck = history("stuck", "/x", [body(f"v{i}", '"same"') for i in range(4)])
    trust = validator_trust(frame(*volatile, static, stuck))
    verdict = {
        r["host"]: (r["etag_trusted"], r["etag_reason"]) for r in trust.iter_rows(named=True)
    }
    assert verdict["rot"][0] is False and verdict["rot"][1].startswith("useless")
    assert verdict["stuck"][0] is False and verdict["stuck"][1].startswith("stuck")
    requests = pl.DataFrame(
        {
            "url": ["/s", "/r0", "/r1", "/x"],
            "host": ["rot", "rot", "rot", "stuck"],
            "etag": ['"s"', '"t4"', '"t4"', '"same"'],
            "last_modified": [None, LM1, None, LM1],
        }
    )
    honoured = pl.Series(["/s", "/x"])  # /x's 304s hid its changes: its host's ETag is stuck
    out = drop_untrusted_validators(requests, trust, honoured=honoured)
    assert out["etag"].to_list() == ['"s"', None, None, None]
    assert out["last_modified"].to_list() == [None, LM1, None, LM1]
    # without the URLs' own evidence, the host's verdict holds everywhere
    bare = drop_untrusted_validators(requests, trust)
    assert bare["etag"].to_list() == [None, None, None, None]


# ------------------------------------------------------------------ Last-Modified as a change date


def ages_of(rows: pl.DataFrame, host: str = "h", **rules: float) -> dict:
    trust = validator_trust(rows, TrustRules(**rules) if rules else None)  # type: ignore[arg-type]
    out = content_age_trust(trust, TrustRules(**rules) if rules else None)  # type: ignore[arg-type]
    assert out.columns == ["host", "ages_trusted", "ages_reason"]
    return out.filter(pl.col("host") == host).row(0, named=True)


LMS = [f"{d} Jan 2026 00:00:00 GMT" for d in ("Thu, 01", "Fri, 02", "Sat, 03", "Sun, 04")]


def test_a_last_modified_dates_changes_only_after_moving_with_enough_of_them() -> None:
    changing = [body(fp, lm=lm) for fp, lm in zip("ABCD", LMS, strict=True)]
    quiet = [body("A", lm=LM1), not_modified("last_modified", "A", lm=LM1)]
    two = frame(history("h", "/a", changing[:3]), history("h", "/q", quiet))
    t = ages_of(two)
    assert not t["ages_trusted"] and "fewer than 3" in t["ages_reason"]
    three = frame(history("h", "/a", changing), history("h", "/q", quiet))
    t = ages_of(three)
    assert t["ages_trusted"] and t["ages_reason"] is None
    assert ages_of(three, min_age_tracks=4)["ages_trusted"] is False


def test_a_last_modified_that_lags_or_wanders_dates_nothing() -> None:
    tracking = [body(fp, lm=lm) for fp, lm in zip("ABCD", LMS, strict=True)]
    # one change in four under an unmoved Last-Modified, with conditional GETs allowed to
    # live with it: dating changes by it is not
    lagging = [body("A", lm=LM1), body("B", lm=LM1)]
    t = ages_of(
        frame(history("h", "/a", tracking), history("h", "/b", lagging)), max_stuck_share=0.5
    )
    assert not t["ages_trusted"] and t["ages_reason"] == "stayed on 1 of 4 content changes"
    # a Last-Modified that moved on unchanged content in 1 of 4 checks
    wandering = [body("A", lm=LMS[0]), body("A", lm=LMS[1])] + [
        not_modified("last_modified", "A", lm=LMS[1]) for _ in range(3)
    ]
    t = ages_of(frame(history("h", "/a", tracking), history("h", "/w", wandering)))
    assert not t["ages_trusted"] and "moved on 1 of 4 unchanged checks" in t["ages_reason"]
    # the same with a tenth of them is tolerated
    steady = [not_modified("last_modified", "A", lm=LMS[1]) for _ in range(6)]
    t = ages_of(
        frame(
            history("h", "/a", tracking), history("h", "/w", wandering), history("h", "/s", steady)
        )
    )
    assert t["ages_trusted"], t


def test_a_last_modified_condemned_for_conditional_gets_dates_nothing_either() -> None:
    stuck = [body("A", lm=LM1), body("B", lm=LM1), body("C", lm=LM1)]
    tracking = [body(fp, lm=lm) for fp, lm in zip("ABCD", LMS, strict=True)]
    t = ages_of(frame(history("h", "/a", tracking), history("h", "/b", stuck)))
    assert not t["ages_trusted"] and t["ages_reason"].startswith("stuck")
    with pytest.raises(ValueError, match="trust lacks"):
        content_age_trust(pl.DataFrame({"host": ["h"]}))


class MixedEtagSite:
    """One loopback host without Last-Modified: /s is static and answers If-None-Match with
    304; /r0../r3 carry a token that rotates on every answer, in a script the fingerprint
    ignores, and a strong ETag of their bytes (honest: the bytes did move)."""

    def __init__(self) -> None:
        self.answers: list[tuple[str, int, bool]] = []  # path, status, conditional
        self.served = 0

    async def handle(self, request):
        from aiohttp import web

        path = request.path
        if not (path == "/s" or path.startswith("/r")):
            return web.Response(status=404)
        self.served += 1
        token = f"<script>var t = {self.served};</script>" if path != "/s" else ""
        body = f"<html><body><main><p>The page {path} says the same thing.</p></main>{token}</body></html>"
        etag = f'"{zlib.crc32(body.encode()):x}"'
        sent = request.headers.get("If-None-Match")
        status = 304 if sent == etag else 200
        self.answers.append((path, status, sent is not None))
        if status == 304:
            return web.Response(status=304, headers={"ETag": etag})
        return web.Response(text=body, content_type="text/html", headers={"ETag": etag})


@pytest.fixture
def loopback_home(tmp_path, monkeypatch):
    """Where real cycles against servers on loopback keep their tables."""
    monkeypatch.setenv("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return tmp_path / "home"


def test_a_static_page_keeps_its_304s_on_a_host_whose_other_etags_rotate(loopback_home):
    from freshness_pipeline.app.runner import load_seeds, run_cycle
    from freshness_pipeline_tests.support import serve_on_loopback

    site = MixedEtagSite()
    home = loopback_home
    with serve_on_loopback(site.handle) as base:
        urls = [f"{base}/s", *(f"{base}/r{k}" for k in range(4))]
        load_seeds(home, ("url\n" + "\n".join(urls) + "\n").encode(), added_at=T0)
        for k in range(6):
            run_cycle(home, T0 + timedelta(hours=6 * k))
    static = [(status, conditional) for path, status, conditional in site.answers if path == "/s"]
    rotating = [conditional for path, _s, conditional in site.answers if path != "/s"]
    assert rotating and not rotating[-1]  # the rotating pages' ETags stopped being sent ...
    assert len(static) >= 4 and static[1:] == [(304, True)] * (len(static) - 1), static


class VersionedSite:
    """Pages whose text changes every cycle (``version``); a stuck site keeps one ETag for all
    of them and answers any If-None-Match with a 304, an honest one moves its ETag with them."""

    def __init__(self, stuck: bool) -> None:
        self.stuck = stuck
        self.version = 0
        self.answers: list[tuple[int, str, int, bool]] = []  # version, path, status, conditional

    async def handle(self, request):
        from aiohttp import web

        if not request.path.startswith("/p"):
            return web.Response(status=404)
        body = (
            f"<html><body><main><h1>Page {request.path}</h1>"
            f"<p>Edition {self.version} of this page, with its own words.</p></main></body></html>"
        )
        etag = '"fixed"' if self.stuck else f'"{zlib.crc32(body.encode()):x}"'
        sent = request.headers.get("If-None-Match")
        status = 304 if sent is not None and (self.stuck or sent == etag) else 200
        self.answers.append((self.version, request.path, status, sent is not None))
        if status == 304:
            return web.Response(status=304, headers={"ETag": etag})
        return web.Response(text=body, content_type="text/html", headers={"ETag": etag})


def test_a_stuck_etag_is_found_by_the_first_verification_after_its_first_304s(loopback_home):
    # A small stuck host beside a larger honest one: a uniform verification sample of one or
    # two fetches a cycle would reach its 4 pages about once in ten cycles, while every 304 it
    # sends hides a change.
    from freshness_pipeline.app.runner import load_seeds, run_cycle
    from freshness_pipeline_tests.support import serve_on_loopback

    stuck, honest = VersionedSite(stuck=True), VersionedSite(stuck=False)
    home = loopback_home
    with serve_on_loopback(stuck.handle) as s_base, serve_on_loopback(honest.handle) as h_base:
        urls = [f"{s_base}/p{i}" for i in range(4)] + [f"{h_base}/p{i}" for i in range(60)]
        load_seeds(home, ("url\n" + "\n".join(urls) + "\n").encode(), added_at=T0)
        for k in range(5):
            stuck.version = honest.version = k
            run_cycle(home, T0 + timedelta(hours=6 * k), budget=70)
    by_cycle = {k: [a for a in stuck.answers if a[0] == k] for k in range(5)}
    assert all(status == 304 for _v, _p, status, _c in by_cycle[1]), by_cycle[1]
    # the cycle after its first 304s, one page is fetched without validators and shows a change
    assert any(not conditional and status == 200 for _v, _p, status, conditional in by_cycle[2])
    # from then on the host's ETag is not sent: every change comes back as a body
    late = by_cycle[3] + by_cycle[4]
    assert late and not any(conditional for *_rest, conditional in late), late


class RoutedSite:
    """One loopback host, two applications, pages changing every cycle (``version``), no
    Last-Modified: /news/ moves its ETag with its pages; /deals/ keeps one ETag and answers any
    If-None-Match with a 304."""

    def __init__(self) -> None:
        self.version = 0
        self.answers: list[tuple[int, str, int, bool]] = []  # version, path, status, conditional

    async def handle(self, request):
        from aiohttp import web

        path = request.path
        if not path.startswith(("/news/", "/deals/")):
            return web.Response(status=404)
        body = (
            f"<html><body><main><h1>Page {path}</h1>"
            f"<p>Edition {self.version} of this page, with its own words.</p></main></body></html>"
        )
        etag = '"deal"' if path.startswith("/deals/") else f'"{zlib.crc32(body.encode()):x}"'
        sent = request.headers.get("If-None-Match")
        status = 304 if sent == etag else 200
        self.answers.append((self.version, path, status, sent is not None))
        if status == 304:
            return web.Response(status=304, headers={"ETag": etag})
        return web.Response(text=body, content_type="text/html", headers={"ETag": etag})


def test_a_route_whose_etag_hides_changes_is_looked_at_then_fetched_without_it(loopback_home):
    """The host's /news/ ETags move with their changes, so the host is proven honest; its
    /deals/ route only ever says 304. The verification looks at one of its pages first, sees
    the change under the unmoved ETag, and the route goes without it from then on."""
    from freshness_pipeline.app.runner import load_seeds, run_cycle
    from freshness_pipeline_tests.support import serve_on_loopback

    site = RoutedSite()
    home = loopback_home
    with serve_on_loopback(site.handle) as base:
        paths = [f"/news/p{i}" for i in range(30)] + [f"/deals/p{i}" for i in range(3)]
        load_seeds(home, ("url\n" + "".join(f"{base}{p}\n" for p in paths)).encode(), added_at=T0)
        for k in range(5):
            site.version = k
            run_cycle(home, T0 + timedelta(hours=6 * k), budget=40)
    deals = {k: [a[2:] for a in site.answers if a[0] == k and "/deals/" in a[1]] for k in range(5)}
    # cycle 1: every deals page conditional, every change hidden behind a 304
    assert deals[1] == [(304, True)] * 3, deals[1]
    # cycle 2: one deals page first in the verification sample, a body under the same ETag
    assert sorted(deals[2]) == [(200, False), (304, True), (304, True)], deals[2]
    # from then on /deals/ goes without its ETag and every change comes back as a body, while
    # the honest route keeps its conditional requests but for the verification sample's page
    # (one route's stuck changes do not condemn the host)
    late = deals[3] + deals[4]
    assert late and all(answer == (200, False) for answer in late), late
    for k in (3, 4):
        news = [c for v, p, _s, c in site.answers if v == k and p.startswith("/news/")]
        assert len(news) >= 25 and news.count(False) <= 1, news
