"""Retention and privacy of the crawled copy: the ``[url_classes.C.retention]`` and
``[retention]`` settings, read from freshness.toml and then applied by real cycles over the
synthetic web on loopback, with what reaches the Parquet files and the WARC archive read back."""

from __future__ import annotations

import pytest

from freshness_pipeline.config import ClassRetention, ConfigError, load_config

RETAINED = """\
[url_classes.product.fields]
price = ".price"
sku = ".sku"

[url_classes.product.retention]
versions_days = 30
exclude_fields = ["sku"]
keep_history = false

[url_classes.listing.retention]
versions_days = 7.5

[retention]
archive_days = 90
"""


def test_retention_settings_are_read_per_class(tmp_path):
    (tmp_path / "freshness.toml").write_text(RETAINED)
    config = load_config(tmp_path)
    assert config.retention_for("product") == ClassRetention(30.0, ("sku",), False)
    assert config.retention_for("listing") == ClassRetention(7.5)
    assert config.retention_for("article") == ClassRetention()
    assert config.retention_for(None).keeps_everything
    assert config.archive_days == 90.0
    # a class with retention only keeps the default extraction and its fingerprint version
    assert config.extraction_for("listing") == config.extraction_for("article")


def test_the_defaults_keep_everything(tmp_path):
    (tmp_path / "freshness.toml").write_text('[url_classes.product.fields]\nprice = ".price"\n')
    config = load_config(tmp_path)
    assert config.retention_for("product").keeps_everything and config.archive_days is None
    assert not config.class_retention


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[retention]\narchive_days = 0\n", r"retention.archive_days must be a positive"),
        ("[retention]\narchive_days = true\n", r"retention.archive_days must be a positive"),
        ("[retention]\nversions_days = 3\n", r"\[retention\] takes only archive_days"),
        (
            "[url_classes.p.retention]\nkeep = 1\n",
            r"\[url_classes.p.retention\] takes only versions_days, exclude_fields, "
            r"keep_history, not keep",
        ),
        ("[url_classes.p]\nretention = 3\n", r"\[url_classes.p.retention\] takes only"),
        (
            "[url_classes.p.retention]\nversions_days = -1\n",
            r"url_classes.p.retention.versions_days must be a positive number of days",
        ),
        (
            "[url_classes.p.retention]\nkeep_history = 'no'\n",
            r"url_classes.p.retention.keep_history must be true or false",
        ),
        (
            '[url_classes.p.fields]\nprice = ".price"\n[url_classes.p.retention]\n'
            'exclude_fields = ["emial"]\n',
            r"exclude_fields: 'emial' is not a field of the class \(its fields: price\)",
        ),
        (
            '[url_classes.p.retention]\nexclude_fields = ["text"]\n',
            r"exclude_fields: 'text' is every version's own column",
        ),
        (
            "[url_classes.p.retention]\nexclude_fields = [1]\n",
            r"url_classes.p.retention.exclude_fields must be a list of non-empty strings",
        ),
    ],
)
def test_bad_retention_is_named(tmp_path, text, message):
    (tmp_path / "freshness.toml").write_text(text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(tmp_path)
    assert "freshness.toml" in str(caught.value)


def test_json_ld_fields_can_be_excluded(tmp_path):
    text = "[url_classes.offer]\njson_ld = true\n[url_classes.offer.retention]\n"
    (tmp_path / "freshness.toml").write_text(text + 'exclude_fields = ["availability"]\n')
    assert load_config(tmp_path).retention_for("offer").exclude_fields == ("availability",)
