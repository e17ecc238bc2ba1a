"""app/host_names.py: a host as a user names it on the command line, and the likely key when
no seeded host has that name."""

from freshness_pipeline.app.host_names import host_key_of, unknown_hosts_message


def test_a_host_is_named_by_its_key_a_url_or_a_name_in_any_case() -> None:
    assert host_key_of("a.example:8080") == "a.example:8080"
    assert host_key_of(" HTTP://A.Example:80/some/page?x=1 ") == "a.example"
    assert host_key_of("https://a.example:443/") == "a.example"
    assert host_key_of("[::1]:8080") == "[::1]:8080"


def test_an_unknown_name_is_told_the_keys_of_the_same_host_on_other_ports() -> None:
    known = ["a.example:8080", "a.example:9090", "[::1]:8080", "b.example"]
    said = unknown_hosts_message(["a.example", "[::1]", "c.example"], known)
    assert (
        said
        == "a.example (did you mean a.example:8080, a.example:9090?), [::1] (did you mean [::1]:8080?), c.example"
    )
