"""Warehouse writes split a frame per host by gathering rows (host_parts.split_by), not by
polars' partition_by, whose slices of a sorted frame make each list-of-strings part cost the
whole frame to write. The parts must still be exactly partition_by's."""

from datetime import UTC, datetime

import polars as pl

from freshness_pipeline.warehouse.host_parts import split_by
from freshness_pipeline.warehouse.storage import Warehouse


def _frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "host": ["b.test", "a.test", None, "b.test", "a.test", "c.test"],
            "n": [1, 2, 3, 4, 5, 6],
            "component": [["x", "y"], ["z"], [], ["long-string-over-twelve-bytes"], None, ["q"]],
        }
    )


def test_parts_match_partition_by_in_order_with_a_null_key() -> None:
    for frame in (_frame(), _frame().sort("host")):
        expected = {k[0]: part for k, part in frame.partition_by("host", as_dict=True).items()}
        parts = split_by(frame, "host")
        assert list(parts) == list(expected)
        for key, part in parts.items():
            assert part.equals(expected[key]), key
    assert split_by(_frame().clear(), "host") == {}


def test_sorted_change_prior_rows_round_trip_per_host(tmp_path) -> None:
    wh = Warehouse(tmp_path)
    at = datetime(2026, 3, 1, tzinfo=UTC)
    hosts = [f"h{i:03d}.test" for i in range(50)]
    rows = pl.DataFrame(
        {
            "host": [h for h in hosts for _ in range(2)],
            "url_class": ["__global__", "article"] * len(hosts),
            "fitted_at": [at] * (2 * len(hosts)),
            "n_pages": list(range(2 * len(hosts))),
            "component": [["poisson", "periodic"]] * (2 * len(hosts)),
            "rate_per_day": [[0.5, 1.0]] * (2 * len(hosts)),
            "weight": [[0.25, 0.75]] * (2 * len(hosts)),
        }
    ).sort("host", "url_class")
    wh.write_partitions("change_prior", hosts, rows)
    for i, host in enumerate(hosts[:5]):
        back = wh.read("change_prior", [host]).sort("url_class")
        assert back["n_pages"].to_list() == [2 * i, 2 * i + 1]
        assert back["component"].to_list() == [["poisson", "periodic"]] * 2
    assert wh.read("change_prior").height == 2 * len(hosts)
