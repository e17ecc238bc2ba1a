"""The lineage graph shows every table a cycle writes: each step's own tables and the side
tables its stage writes are assets, with the edges a cycle follows, per host and over buckets."""

from __future__ import annotations

import dagster as dg
import pytest

from freshness_pipeline.defs.graph import build_resources, cycle_graph
from freshness_pipeline.warehouse import tables


@pytest.mark.parametrize("host_buckets", [0, 16])
def test_every_table_is_an_asset_with_its_edges(host_buckets: int) -> None:
    assets, checks = cycle_graph(host_buckets, "test" if host_buckets else "")
    defs = dg.Definitions(assets=assets, asset_checks=checks, resources=build_resources())
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert set(tables.SCHEMAS) | {"retention"} == keys

    def parents(table: str) -> set[str]:
        return {k.to_user_string() for k in graph.get(dg.AssetKey(table)).parent_keys}

    assert "seeds" in parents("url_inventory")
    assert "robots" in parents("url_candidates")
    assert "robots" in parents("revisit_plan")
    assert "url_candidates" in parents("revisit_plan")
    # a side table is materialized by the step that writes it, beside the step's own table
    for step, side in [
        ("url_inventory", "robots"),
        ("url_candidates", "url_canonical"),
        ("fetch_results", "fetch_log"),
        ("fetch_results", "validator_evidence"),
        ("url_state", "change_prior"),
        ("url_state", "lastmod_evidence"),
    ]:
        node = graph.get(dg.AssetKey(side))
        assert node.is_materializable, side
        assert graph.get(dg.AssetKey(step)).assets_def is node.assets_def, (step, side)
    assert not graph.get(dg.AssetKey("seeds")).is_materializable  # `freshness seed` writes it
