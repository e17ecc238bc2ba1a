"""warehouse/excluded_fields.py: a class's excluded fields taken out of the history written
before the exclusion, once, by the retention step."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from freshness_pipeline.config import load_config
from freshness_pipeline.warehouse.excluded_fields import APPLIED_FILE, scrub_history
from freshness_pipeline.warehouse.retention import prune_history
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.test_warehouse_retention import DAY, HOST, NOW, url, write_state


def test_a_field_excluded_after_it_was_written_leaves_the_history(tmp_path: Path) -> None:
    """A field excluded for privacy after two versions held it stayed in page_versions and
    changes, and diff and export kept handing it out (found by an exploratory run). The next
    prune takes it out of every row of the class, once; other classes' fields stay."""
    wh = Warehouse(tmp_path)
    write_state(wh, HOST, {"/jane": "people", "/lamp": "product"})
    for days_ago, email in ((2, "jane@example.org"), (1, "jane.doe@example.org")):
        at = NOW - days_ago * DAY
        fields = [
            json.dumps({"email": email, "name": "Jane", "title": "Jane"}),
            json.dumps({"email": "shop@example.org", "price": "9"}),
        ]
        wh.append_cycle(
            "page_versions",
            HOST,
            at,
            pl.DataFrame(
                {
                    "url": [url("/jane"), url("/lamp")],
                    "host": [HOST] * 2,
                    "observed_at": [at] * 2,
                    "outcome": ["changed"] * 2,
                    "url_class": ["people", "product"],
                    "fields": fields,
                }
            ),
        )
    at = NOW - DAY
    wh.append_cycle(
        "changes",
        HOST,
        at,
        pl.DataFrame(
            {
                "url": [url("/jane")],
                "host": [HOST],
                "changed_at": [at],
                "changed_fields": [["email", "name"]],
                "old_values": [json.dumps({"email": "jane@example.org", "name": "J"})],
                "new_values": [json.dumps({"email": "jane.doe@example.org", "name": "Jane"})],
            }
        ),
    )
    (tmp_path / "freshness.toml").write_text(
        '[url_classes.people.fields]\nname = ".name"\nemail = ".email"\n\n'
        '[url_classes.people.retention]\nexclude_fields = ["email"]\n\n'
        '[url_classes.product.fields]\nemail = ".email"\nprice = ".price"\n'
    )
    config = load_config(tmp_path)
    summary = prune_history(wh, config, NOW)
    assert summary.rows_scrubbed == 3  # two versions and one changes row
    assert "took newly excluded fields out of 3 history rows" in (summary.note() or "")
    versions = wh.read("page_versions", [HOST]).sort("url", "observed_at")
    people = [json.loads(f) for f in versions.filter(pl.col("url") == url("/jane"))["fields"]]
    assert all("email" not in f and f["name"] == "Jane" for f in people)
    product = [json.loads(f) for f in versions.filter(pl.col("url") == url("/lamp"))["fields"]]
    assert all(f["email"] == "shop@example.org" for f in product)  # not excluded there
    (change,) = wh.read("changes", [HOST]).iter_rows(named=True)
    assert change["changed_fields"] == ["name"]
    assert json.loads(change["old_values"]) == {"name": "J"}
    assert json.loads(change["new_values"]) == {"name": "Jane"}
    # done once: the next prune reads nothing again, and the record says what was applied
    assert prune_history(wh, config, NOW + DAY).rows_scrubbed == 0
    assert json.loads((wh.root / APPLIED_FILE).read_text()) == {"people": ["email"]}
    assert scrub_history(wh, config) == 0
