"""Small inline SVG histograms for asset metadata.

The Dagster UI renders an image inside ``MetadataValue.md`` only from an inline data URI, and a
hand-built SVG of a few ``<rect>`` elements renders inline in the metadata table where a PNG sits
behind a dialog. Building the SVG by hand also
avoids matplotlib (about 165 MB installed) for two bar charts.

Bins are fixed, not fitted to the data, so that the same picture on two materializations (or two
hosts) can be compared by eye. Everything here is pure: frames and numbers in, strings out.

Usage in an asset::

    metadata = {k: dg.MetadataValue.md(v) for k, v in state_plots(state, now).items()}
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from xml.sax.saxutils import escape

import numpy as np
import polars as pl

# Half-decade bins from 1e-4 to 1e3 changes per day: from "about once in 30 years" to "every
# 90 seconds". Rates outside are counted in the end bins, so nothing estimated is hidden.
RATE_EDGES: tuple[float, ...] = tuple(10.0 ** (k / 2) for k in range(-8, 7))
# Freshness lag in hours, in the steps a person thinks in (hours, days, weeks).
LAG_EDGES_H: tuple[float, ...] = (0, 1, 3, 6, 12, 24, 48, 96, 168, 336, 720, math.inf)
LAG_LABELS: tuple[str, ...] = (
    "<1h",
    "1-3h",
    "3-6h",
    "6-12h",
    "12-24h",
    "1-2d",
    "2-4d",
    "4-7d",
    "1-2w",
    "2-4w",
    ">30d",
)

WIDTH = 420
HEIGHT = 170
PLOT_TOP = 34  # room for the title and the count over the tallest bar
PLOT_HEIGHT = 100
PLOT_LEFT = 20  # half a tick label, so the end labels of the log axis are not cut
PLOT_WIDTH = WIDTH - 2 * PLOT_LEFT
BAR_FILL = "#4f43dd"  # Dagster's accent blue, readable on the UI's light and dark themes
TEXT_FILL = "#8a8a99"


@dataclass(frozen=True)
class Histogram:
    """Counts per bin, and where to put the axis labels.

    ``ticks`` are (position, text) with position in bin units from the left edge: 0.5 centres a
    label under the first bar, 1.0 puts it on the boundary between the first and second bars.
    ``excluded`` counts values no bin can show (null, NaN, or not positive on a log axis).
    """

    counts: tuple[int, ...]
    ticks: tuple[tuple[float, str], ...]
    excluded: int = 0

    @property
    def total(self) -> int:
        return sum(self.counts)


def _finite(values: Iterable[float | None]) -> tuple[np.ndarray, int]:
    raw = np.array([np.nan if v is None else v for v in values], dtype=float)
    keep = np.isfinite(raw)
    return raw[keep], int((~keep).sum())


def rate_histogram(rates: Iterable[float | None]) -> Histogram:
    """Change rates (changes per day) on a log axis, half-decade bins from RATE_EDGES."""
    values, excluded = _finite(rates)
    positive = values[values > 0]
    excluded += int(values.size - positive.size)
    n_bins = len(RATE_EDGES) - 1
    # searchsorted on the inner edges maps below-range into bin 0 and above-range into the last.
    index = np.searchsorted(np.array(RATE_EDGES[1:-1]), positive, side="right")
    counts = np.bincount(index, minlength=n_bins)
    ticks = tuple((float(i), _rate_label(RATE_EDGES[i])) for i in range(0, len(RATE_EDGES), 2))
    return Histogram(tuple(int(c) for c in counts), ticks, excluded)


def lag_histogram(hours: Iterable[float | None]) -> Histogram:
    """Hours since each page was last confirmed, in LAG_EDGES_H bins. A negative lag (last seen
    after ``now``, as in a backfill run as of an earlier time) is excluded, not bent into 0."""
    values, excluded = _finite(hours)
    usable = values[values >= 0]
    excluded += int(values.size - usable.size)
    index = np.searchsorted(np.array(LAG_EDGES_H[1:-1]), usable, side="right")
    counts = np.bincount(index, minlength=len(LAG_LABELS))
    ticks = tuple((i + 0.5, label) for i, label in enumerate(LAG_LABELS))
    return Histogram(tuple(int(c) for c in counts), ticks, excluded)


def _rate_label(rate: float) -> str:
    exponent = round(math.log10(rate))
    return {-1: "0.1", 0: "1", 1: "10", 2: "100", 3: "1000"}.get(exponent, f"1e{exponent}")


def _text(x: float, y: float, body: str, **attrs: str | int) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return f'<text x="{x:g}" y="{y:g}"{extra}>{escape(body)}</text>'


def _svg(title: str, body: Sequence[str]) -> str:
    # Shared presentation attributes sit on <g> groups: the SVG is stored in the event log for
    # every partition of a range run, so every byte counts hundreds of times.
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="9" '
        f'fill="{TEXT_FILL}" text-anchor="middle">'
        f"{_text(PLOT_LEFT, 13, title, font_size=11, text_anchor='start')}"
        f"{''.join(body)}</svg>"
    )


def histogram_svg(hist: Histogram, *, title: str, x_label: str) -> str:
    """Bars scaled to the tallest bin, each with its count above it; one ``rect.bar`` per bin
    (empty bins too, at height 0) so the picture's geometry never depends on the data."""
    if hist.total == 0:
        return no_data_svg(title, excluded=hist.excluded)
    n = len(hist.counts)
    step = PLOT_WIDTH / n
    tallest = max(hist.counts)
    base = PLOT_TOP + PLOT_HEIGHT
    bars: list[str] = []
    labels: list[str] = []
    for i, count in enumerate(hist.counts):
        h = round(PLOT_HEIGHT * count / tallest, 2)
        x = round(PLOT_LEFT + i * step + 1, 2)
        bars.append(
            f'<rect class="bar" x="{x:g}" y="{base - h:g}" width="{step - 2:.2f}" height="{h:g}"/>'
        )
        if count:
            labels.append(_text(round(x + (step - 2) / 2, 2), base - h - 3, str(count)))
    for position, label in hist.ticks:
        labels.append(_text(round(PLOT_LEFT + position * step, 2), base + 12, label))
    footer = x_label if not hist.excluded else f"{x_label}; {hist.excluded} not shown"
    labels.append(_text(WIDTH / 2, HEIGHT - 6, footer))
    axis = f'<path d="M{PLOT_LEFT} {base}h{PLOT_WIDTH}" stroke="{TEXT_FILL}"/>'
    return _svg(title, [f'<g fill="{BAR_FILL}">', *bars, "</g>", axis, *labels])


def no_data_svg(title: str, *, excluded: int = 0) -> str:
    """Same size as a chart, so the metadata table does not jump between runs."""
    note = "no data" if not excluded else f"no data ({excluded} values not shown)"
    return _svg(title, [_text(WIDTH / 2, PLOT_TOP + PLOT_HEIGHT / 2, note, font_size=12)])


def svg_markdown(svg: str, alt: str) -> str:
    """The markdown image the Dagster UI renders inline from ``MetadataValue.md``."""
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    clean_alt = alt.replace("[", "(").replace("]", ")")
    return f"![{clean_alt}](data:image/svg+xml;base64,{data})"


def _active(state: pl.DataFrame) -> pl.DataFrame:
    return state.filter(pl.col("status") == "active") if state.height else state


def change_rate_plot(state: pl.DataFrame) -> str:
    """Markdown image: estimated change rates of active URLs (url_state.change_rate)."""
    rates = _active(state)["change_rate"].to_list() if state.height else []
    hist = rate_histogram(rates)
    title = f"Estimated change rate, active URLs (n={hist.total})"
    if hist.total:
        shown = [r for r in rates if r is not None and r > 0 and math.isfinite(r)]
        title += f", median {float(np.median(shown)):.3g}/day"
    svg = histogram_svg(hist, title=title, x_label="changes per day (log scale)")
    return svg_markdown(svg, "change rate distribution")


def lag_hours(state: pl.DataFrame, now: datetime) -> list[float | None]:
    """Hours from each active URL's last successful fetch to ``now``: how old our copy is."""
    if not state.height:
        return []
    moment = pl.lit(now).cast(pl.Datetime("us", "UTC"))
    lag = (moment - pl.col("last_seen_at")).dt.total_microseconds() / 3.6e9
    return _active(state).select(lag.alias("h"))["h"].to_list()


def freshness_lag_plot(state: pl.DataFrame, now: datetime) -> str:
    """Markdown image: hours since each active URL was last confirmed, as of the cycle's now."""
    hours = lag_hours(state, now)
    hist = lag_histogram(hours)
    title = f"Time since last confirmed, active URLs (n={hist.total})"
    if hist.total:
        shown = [h for h in hours if h is not None and h >= 0 and math.isfinite(h)]
        title += f", median {float(np.median(shown)):.3g} h"
    svg = histogram_svg(hist, title=title, x_label="hours since last seen, as of the cycle's now")
    return svg_markdown(svg, "freshness lag distribution")


def state_plots(state: pl.DataFrame, now: datetime) -> dict[str, str]:
    """Both pictures for url_state's metadata, keyed by the metadata label to use."""
    return {
        "change_rate_distribution": change_rate_plot(state),
        "freshness_lag_distribution": freshness_lag_plot(state, now),
    }
