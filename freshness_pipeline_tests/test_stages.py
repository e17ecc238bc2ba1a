"""The stages are the cycle's steps without Dagster: a benchmark, another orchestrator or a test
calls them with frames and settings. Importing them must not pull in Dagster or the layers
above (defs, app), or that promise is broken without anyone noticing."""

import subprocess
import sys
from pathlib import Path

STAGES = ["inventory", "candidates", "plan", "fetch", "state", "versions", "running_totals"]


def test_stages_import_neither_dagster_nor_the_layers_above() -> None:
    code = (
        "import sys\n"
        + "".join(f"import freshness_pipeline.stages.{name}\n" for name in STAGES)
        + "loaded = sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.')"
        " or m.startswith('freshness_pipeline.defs') or m.startswith('freshness_pipeline.app'))\n"
        "print(loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout[-2000:]


def test_each_asset_calls_its_stage() -> None:
    """The asset modules hold no step logic of their own: each calls its stage's function."""
    import inspect

    from freshness_pipeline import stages
    from freshness_pipeline.defs.assets import candidates, fetch, inventory, plan, state

    for module, stage, function in [
        (inventory, stages.inventory, "cycle_inventory"),
        (candidates, stages.candidates, "cycle_candidates"),
        (plan, stages.plan, "cycle_plan"),
        (fetch, stages.fetch, "run_fetch_stage"),
        (state, stages.state, "update_state"),
    ]:
        assert getattr(module, function) is getattr(stage, function), module.__name__
        assert f"{function}(" in inspect.getsource(module), module.__name__


def test_excluded_fields_never_reach_the_versions(tmp_path: Path) -> None:
    """stages.versions takes a class's excluded fields out of the rows before they are written,
    and leaves other classes' rows as they were."""
    import json

    import polars as pl

    from freshness_pipeline.config import load_config
    from freshness_pipeline.stages.versions import drop_excluded_fields

    (tmp_path / "freshness.toml").write_text(
        '[url_classes.people.fields]\nname = ".name"\nemail = ".email"\n\n'
        '[url_classes.people.retention]\nexclude_fields = ["email"]\n'
    )
    config = load_config(tmp_path)
    rows = pl.DataFrame(
        {
            "url_class": ["people", "page", None],
            "fields": [
                json.dumps({"email": "a@example.test", "name": "A"}),
                json.dumps({"email": "kept@example.test"}),
                None,
            ],
        }
    )
    out = drop_excluded_fields(rows, config)
    assert [json.loads(f) if f else None for f in out["fields"]] == [
        {"name": "A"},
        {"email": "kept@example.test"},
        None,
    ]


def test_robots_marks_each_host_by_its_own_record() -> None:
    """A host with rules is judged URL by URL, a host whose robots.txt failed is refused whole
    with the reason, a host without a record (a dry run before any fetch) is allowed."""
    from datetime import UTC, datetime

    import polars as pl

    from freshness_pipeline.stages.candidates import apply_robots
    from freshness_pipeline.web.discovery import robots_row
    from freshness_pipeline.web.robots import RobotsRecord

    at = datetime(2026, 3, 2, tzinfo=UTC)
    records = [
        RobotsRecord(
            "rules.test",
            "https://rules.test/robots.txt",
            200,
            "User-agent: *\nDisallow: /private\n",
            None,
            at,
        ),
        RobotsRecord("down.test", "https://down.test/robots.txt", 503, "", None, at),
        RobotsRecord("none.test", "https://none.test/robots.txt", 404, "", None, at),
    ]
    robots = pl.DataFrame([robots_row(r, r.host) for r in records])
    urls = [
        "https://rules.test/a",
        "https://rules.test/private/b",
        "https://down.test/a",
        "https://none.test/private/a",
        "https://new.test/private/a",
    ]
    candidates = pl.DataFrame({"url": urls, "host": [u.split("/")[2] for u in urls], "value": 1.0})
    out = apply_robots(candidates, robots).sort("url")
    got = {r["url"]: (r["allowed"], r["blocked_reason"]) for r in out.iter_rows(named=True)}
    assert got == {
        "https://rules.test/a": (True, None),
        "https://rules.test/private/b": (False, "robots.txt disallows"),
        "https://down.test/a": (False, "robots.txt answered HTTP 503"),
        "https://none.test/private/a": (True, None),
        "https://new.test/private/a": (True, None),
    }
    assert out.columns == [*candidates.columns, "allowed", "blocked_reason"]


def test_a_dry_run_before_any_robots_record_refuses_the_addresses_the_allow_list_refuses() -> None:
    """No robots.txt has been asked for yet, so nothing says what the real cycle will do but
    the allow-list: an address it refuses is held back as that cycle would hold it (a plan of
    loopback or metadata URLs made without FRESHNESS_ALLOW_NETWORKS planned them); a name
    cannot be judged without resolving it and stays allowed, as does an allowed address;
    localhost is loopback."""
    import ipaddress

    import polars as pl

    from freshness_pipeline.stages.candidates import apply_robots
    from freshness_pipeline.warehouse import tables
    from freshness_pipeline.web.discovery import RECORD_COLUMNS
    from freshness_pipeline.web.netguard import ALLOW_ENV

    hosts = [
        "169.254.169.254",
        "127.0.0.5:8080",
        "[::1]:9000",
        "10.1.2.3",
        "93.184.216.34",
        "new.test",
        "localhost:8000",
    ]
    candidates = pl.DataFrame({"url": [f"http://{h}/a" for h in hosts], "host": hosts})
    robots = tables.empty("robots").select(list(RECORD_COLUMNS))
    loopback = (ipaddress.ip_network("127.0.0.0/8"),)
    out = apply_robots(candidates, robots, loopback)
    refused = f"address not allowed ({ALLOW_ENV})"
    got = dict(zip(out["host"], out["blocked_reason"], strict=True))
    assert got == {
        "169.254.169.254": refused,
        "127.0.0.5:8080": None,
        "[::1]:9000": refused,
        "10.1.2.3": refused,
        "93.184.216.34": None,
        "new.test": None,
        "localhost:8000": None,
    }
    assert apply_robots(candidates, robots, ())["allowed"].to_list() == [
        False,
        False,
        False,
        False,
        True,
        True,
        False,  # localhost is loopback (RFC 6761), refused as its address would be
    ]


def test_a_dry_run_refuses_an_address_the_allow_list_refuses_though_its_robots_were_read() -> None:
    """A home that had fetched, dry-run without FRESHNESS_ALLOW_NETWORKS, planned 7 URLs; the
    real cycle right after planned none, its robots.txt request refused (found by a
    newcomer). An address is judged by the allow-list the plan runs with, whatever the last
    cycle's robots.txt said; a name waits for the real cycle to resolve it."""
    import ipaddress
    from datetime import UTC, datetime

    import polars as pl

    from freshness_pipeline.stages.candidates import apply_robots
    from freshness_pipeline.web.discovery import robots_row
    from freshness_pipeline.web.netguard import ALLOW_ENV
    from freshness_pipeline.web.robots import RobotsRecord

    at = datetime(2026, 3, 2, tzinfo=UTC)
    hosts = ["127.0.0.9:8765", "site.test"]
    robots = pl.DataFrame(
        [robots_row(RobotsRecord(h, f"http://{h}/robots.txt", 404, "", None, at), h) for h in hosts]
    )
    candidates = pl.DataFrame({"url": [f"http://{h}/a" for h in hosts], "host": hosts})
    refused = apply_robots(candidates, robots, ())
    got = dict(zip(refused["host"], refused["blocked_reason"], strict=True))
    assert got == {"127.0.0.9:8765": f"address not allowed ({ALLOW_ENV})", "site.test": None}
    opened = apply_robots(candidates, robots, (ipaddress.ip_network("127.0.0.0/8"),))
    assert opened["allowed"].to_list() == [True, True]
