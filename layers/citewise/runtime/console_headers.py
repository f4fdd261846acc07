"""The web console's security headers: one content security policy for wherever the console is served.

The console is a single page that talks to the API, to the user pool's hosted UI (the token exchange) and
to presigned S3 URLs (uploads, and the original of a cited document, which pdf.js renders). Its policy
lets it load code, styles, fonts and workers from its own origin only and connect only to those places:
an injected script could load no more code, and could not post what it reads to a server of its own with
a fetch, an image or a frame (a navigation away is beyond what a policy can stop). The stack
(`citewise_infra.console`) serves it from CloudFront with the API's, the hosted UI's and the documents
bucket's origins; a server of the console on the API's own origin needs none of them.
"""

from __future__ import annotations

from collections.abc import Iterable

REFERRER_POLICY = "no-referrer"
"""After the hosted UI's redirect the page's URL holds the authorization code: no request may carry it."""
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=(), usb=()"
CROSS_ORIGIN_OPENER_POLICY = "same-origin"
"""Sign-in is a top-level redirect, never a popup, so no other window needs a handle on the console's."""


def security_headers(connect_src: Iterable[str] = ()) -> dict[str, str]:
    """Every header of a console response but HSTS (which only an HTTPS origin may send)."""
    return {
        "Content-Security-Policy": content_security_policy(connect_src),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": REFERRER_POLICY,
        "X-Frame-Options": "DENY",
        "Cross-Origin-Opener-Policy": CROSS_ORIGIN_OPENER_POLICY,
        "Permissions-Policy": PERMISSIONS_POLICY,
    }


def content_security_policy(connect_src: Iterable[str] = ()) -> str:
    """The console's `Content-Security-Policy`, allowing `connect_src` (origins, beyond the page's own) for
    fetches: the API, the hosted UI's token endpoint, the documents bucket."""
    directives = {
        "default-src": ["'none'"],
        "script-src": ["'self'"],
        # No inline style either: Preact and pdf.js's text layer set styles through the CSSOM, which a
        # policy does not restrict (the browser tests run the console under this policy).
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:", "blob:"],
        # Fonts embedded in a PDF may be handed to the browser as data: URLs; a font reaches no other origin.
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'", *connect_src],
        # pdf.js parses in a worker, loaded from the page's origin (or from a blob: URL of it).
        "worker-src": ["'self'", "blob:"],
        "manifest-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
    return "; ".join(f"{name} {' '.join(sources)}" for name, sources in directives.items())
