"""The `mtu` link parameter (topologies/links.py): taken out of what Mininet's TCLink gets,
checked, and later set on both ends of the link."""
import pytest

from concast.topologies import links


def test_mtu_is_split_from_the_tclink_params():
    assert links.split_mtu({"bw": 10, "mtu": 1000}) == ({"bw": 10}, 1000)
    assert links.split_mtu({"mtu": "9000"}) == ({}, 9000)
    assert links.split_mtu({"bw": 10}) == ({"bw": 10}, None)


@pytest.mark.parametrize("bad", [0, 67, 65536, "jumbo", 1.5e6])
def test_a_bad_mtu_is_refused_with_the_reason(bad):
    with pytest.raises(ValueError, match="link mtu="):
        links.split_mtu({"mtu": bad})
