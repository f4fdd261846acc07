"""The web console's content security policy: one definition for wherever the console is served."""

from __future__ import annotations

from citewise.runtime.console_headers import content_security_policy


def directives(csp: str) -> dict[str, list[str]]:
    parsed: dict[str, list[str]] = {}
    for directive in csp.split("; "):
        name, *sources = directive.split(" ")
        assert name not in parsed, f"{name} twice"
        parsed[name] = sources
    return parsed


def test_a_console_on_the_apis_origin_connects_to_its_own_origin_only() -> None:
    csp = directives(content_security_policy())
    assert csp["connect-src"] == ["'self'"]
    # Everything is denied unless named; code comes from the page's origin only, never inline or eval'd
    assert csp["default-src"] == ["'none'"]
    assert csp["script-src"] == ["'self'"]
    assert csp["object-src"] == csp["base-uri"] == csp["frame-ancestors"] == ["'none'"]


def test_the_origins_it_names_are_added_to_connect_src_only() -> None:
    origins = ["https://api.example.com", "https://auth.example.com"]
    named = directives(content_security_policy(origins))
    plain = directives(content_security_policy())
    assert named["connect-src"] == ["'self'", *origins]
    assert {k: v for k, v in named.items() if k != "connect-src"} == {
        k: v for k, v in plain.items() if k != "connect-src"
    }
