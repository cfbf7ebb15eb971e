"""The OAuth settings read from the environment: each bad value refused naming the variable."""

from __future__ import annotations

import pytest

from board.config import from_env
from board.errors import Invalid


def test_the_oauth_settings_are_read_with_their_defaults_and_bounds():
    s = from_env({})
    assert (s.oauth_enabled, s.public_url, s.oauth_access_token_seconds, s.oauth_refresh_grace_seconds) == (
        True, None, 3600, 10)
    s = from_env({"SWITCHBOARD_OAUTH": "false", "SWITCHBOARD_PUBLIC_URL": "https://sb.example.com/",
                  "SWITCHBOARD_OAUTH_ACCESS_TOKEN_SECONDS": "900", "SWITCHBOARD_OAUTH_REFRESH_TOKEN_SECONDS": "86400",
                  "SWITCHBOARD_OAUTH_REGISTRATIONS_PER_MINUTE": "0", "SWITCHBOARD_OAUTH_REFRESH_GRACE_SECONDS": "2.5"})
    assert (s.oauth_enabled, s.public_url, s.oauth_access_token_seconds, s.oauth_refresh_token_seconds,
            s.oauth_registrations_per_minute, s.oauth_refresh_grace_seconds) == (
        False, "https://sb.example.com", 900, 86400, 0, 2.5)


@pytest.mark.parametrize(("name", "value"), [
    ("SWITCHBOARD_OAUTH_ACCESS_TOKEN_SECONDS", "7200"),     # over an hour
    ("SWITCHBOARD_OAUTH_ACCESS_TOKEN_SECONDS", "10"),       # under a minute
    ("SWITCHBOARD_PUBLIC_URL", "http://sb.example.com"),    # plain http off loopback
    ("SWITCHBOARD_PUBLIC_URL", "https://sb.example.com/?x=1"),
    ("SWITCHBOARD_OAUTH", "maybe"),
    ("SWITCHBOARD_OAUTH_REFRESH_GRACE_SECONDS", "-1"),
    ("SWITCHBOARD_OAUTH_REFRESH_GRACE_SECONDS", "61"),      # a grace, not a second lifetime
])
def test_a_bad_oauth_setting_is_refused_naming_the_variable(name, value):
    with pytest.raises(Invalid) as refused:
        from_env({name: value})
    assert refused.value.argument == name and name in refused.value.message


def test_trusted_proxies_are_ips_or_networks_and_none_by_default():
    from board.app import proxy_options

    assert from_env({}).trusted_proxies == ()
    assert proxy_options(from_env({})) == {"proxy_headers": False}  # not even loopback is believed
    s = from_env({"SWITCHBOARD_TRUSTED_PROXIES": " 10.0.0.0/8, 127.0.0.1 ,::1,192.168.1.7/16"})
    assert s.trusted_proxies == ("10.0.0.0/8", "127.0.0.1", "::1", "192.168.0.0/16")
    assert proxy_options(s) == {"proxy_headers": True, "forwarded_allow_ips": list(s.trusted_proxies)}


def test_a_trusted_proxy_that_is_not_an_address_is_refused_naming_the_variable():
    from board.errors import Invalid

    with pytest.raises(Invalid) as err:
        from_env({"SWITCHBOARD_TRUSTED_PROXIES": "10.0.0.1, proxy.example"})
    assert err.value.argument == "SWITCHBOARD_TRUSTED_PROXIES" and "proxy.example" in err.value.message
