"""The metadata pictures: valid SVG the UI can render from a data URI, with bars that say what
the data says, and a readable picture when there is nothing to show."""

from __future__ import annotations

import base64
import math
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from freshness_pipeline.defs import plots
from freshness_pipeline.warehouse import tables

SVG = "{http://www.w3.org/2000/svg}"
NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def decode(markdown: str) -> ET.Element:
    match = re.fullmatch(r"!\[([^\]]*)\]\(data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)\)", markdown)
    assert match, markdown[:80]
    return ET.fromstring(base64.b64decode(match.group(2)).decode("utf-8"))


def bars(root: ET.Element) -> list[float]:
    return [float(r.get("height")) for r in root.iter(f"{SVG}rect") if r.get("class") == "bar"]


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def state(rows: list[tuple[str, float | None, datetime | None]]) -> pl.DataFrame:
    frame = pl.DataFrame(
        {
            "url": [f"https://h.example/{i}" for i in range(len(rows))],
            "status": [s for s, _, _ in rows],
            "change_rate": [r for _, r, _ in rows],
            "last_seen_at": [t for _, _, t in rows],
        },
        schema_overrides={"change_rate": pl.Float64, "last_seen_at": tables.UTC_TIME},
    )
    return tables.conform("url_state", frame)


def test_rate_bins_are_half_decades_with_out_of_range_in_the_end_bins():
    hist = plots.rate_histogram([1e-9, 2e-4, 0.5, 0.5, 2.0, 5e3, 0.0, -1.0, None, math.nan])
    assert len(hist.counts) == 14 == len(plots.RATE_EDGES) - 1
    assert hist.counts[0] == 2  # 1e-9 is clipped in, 2e-4 belongs there
    assert hist.counts[7] == 2  # [10**-0.5, 1)
    assert hist.counts[8] == 1  # [1, 10**0.5)
    assert hist.counts[-1] == 1  # 5000/day is clipped into the top bin
    assert hist.excluded == 4  # 0, negative, null and NaN cannot sit on a log axis
    assert hist.total == 6


def test_lag_bins_and_negative_lag():
    hist = plots.lag_histogram([0.0, 0.5, 1.0, 30.0, 10_000.0, -2.0, None])
    assert len(hist.counts) == len(plots.LAG_LABELS) == len(plots.LAG_EDGES_H) - 1
    assert hist.counts[0] == 2 and hist.counts[1] == 1  # an edge value opens the next bin
    assert hist.counts[5] == 1  # 30 h is 1-2 days
    assert hist.counts[-1] == 1
    assert hist.excluded == 2


def test_change_rate_plot_bars_match_the_active_urls():
    rows = [
        ("active", 0.5, NOW),
        ("active", 0.6, NOW),
        ("active", 0.7, NOW),
        ("active", 2.0, NOW),
        ("active", 50.0, NOW),
        ("gone", 0.5, NOW),  # not active: not in the picture
        ("new", None, None),
    ]
    root = decode(plots.change_rate_plot(state(rows)))
    assert root.tag == f"{SVG}svg"
    heights = bars(root)
    assert len(heights) == 14  # one bar per bin, empty ones at height 0
    # The tallest bin (three rates in [0.32, 1)) is the full plot height; the others scale.
    assert heights[7] == plots.PLOT_HEIGHT
    assert heights[8] == pytest.approx(plots.PLOT_HEIGHT / 3, abs=0.01)
    assert heights[11] == pytest.approx(plots.PLOT_HEIGHT / 3, abs=0.01)
    assert sum(1 for h in heights if h > 0) == 3
    labels = texts(root)
    assert "n=5" in labels[0] and "median 0.7/day" in labels[0]
    assert {"3", "1"} <= set(labels)
    assert {"1e-4", "0.1", "1", "1000"} <= set(labels)


def test_freshness_lag_plot_bars_match_the_hours_since_last_seen():
    rows = [
        ("active", 1.0, NOW - timedelta(minutes=30)),
        ("active", 1.0, NOW - timedelta(hours=2)),
        ("active", 1.0, NOW - timedelta(hours=2, minutes=30)),
        ("active", 1.0, NOW - timedelta(days=40)),
        ("active", 1.0, NOW + timedelta(hours=1)),  # seen after `now`: a backfill as of earlier
        ("blocked", None, None),
    ]
    root = decode(plots.freshness_lag_plot(state(rows), NOW))
    heights = bars(root)
    assert len(heights) == len(plots.LAG_LABELS)
    assert heights[1] == plots.PLOT_HEIGHT  # two URLs at 1-3 h
    assert heights[0] == heights[-1] == plots.PLOT_HEIGHT / 2
    assert sum(heights) == 2 * plots.PLOT_HEIGHT
    labels = texts(root)
    assert "n=4" in labels[0]
    assert any("1 not shown" in t for t in labels)
    assert "<1h" in labels and ">30d" in labels  # escaped in the XML, plain once parsed


def test_empty_state_gives_a_no_data_picture_of_the_same_size():
    full = decode(plots.change_rate_plot(state([("active", 1.0, NOW)])))
    for markdown in plots.state_plots(tables.empty("url_state"), NOW).values():
        root = decode(markdown)
        assert bars(root) == []
        assert "no data" in texts(root)
        assert (root.get("width"), root.get("height")) == (full.get("width"), full.get("height"))
    only_new = state([("new", None, None), ("gone", 0.1, NOW)])
    assert "no data" in texts(decode(plots.change_rate_plot(only_new)))


def test_markdown_is_an_inline_image_and_small():
    markdown = plots.state_plots(
        state([("active", 10 ** (i / 10 - 3), NOW - timedelta(hours=i)) for i in range(60)]), NOW
    )
    assert set(markdown) == {"change_rate_distribution", "freshness_lag_distribution"}
    for value in markdown.values():
        assert value.startswith("![") and "data:image/svg+xml;base64," in value
        # Stored in the event log for every partition of a range run: keep it a few KB.
        assert len(value) < 4_000
    assert plots.svg_markdown("<svg/>", "a [b]").startswith("![a (b)](")
