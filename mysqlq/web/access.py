"""Who may do what: the optional access token, and CSRF tokens for every action (a POST)."""

from __future__ import annotations

import hashlib
import hmac
import secrets

TOKEN_COOKIE = "mysqlq_session"
CSRF_COOKIE = "mysqlq_csrf"
CSRF_FIELD = "csrf"


class Access:
    """Checks a request's access token and CSRF token. Secrets live only in this process's memory."""

    def __init__(self, token: str | None) -> None:
        self.token = token or None
        self._key = secrets.token_bytes(32)  # signs CSRF tokens and sessions; new at each start

    def _sign(self, value: str) -> str:
        return hmac.new(self._key, value.encode(), hashlib.sha256).hexdigest()

    # ----------------------------------------------------------------- the access token

    def token_ok(self, given: str | None) -> bool:
        if self.token is None:
            return True
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def session_value(self) -> str:
        """What the session cookie holds after a login: a signature, never the token itself."""
        return self._sign("session:" + (self.token or ""))

    def session_ok(self, cookie: str | None) -> bool:
        return cookie is not None and hmac.compare_digest(cookie, self.session_value())

    def allowed(self, header: str | None, cookie: str | None) -> bool:
        """With a token: ``Authorization: Bearer TOKEN``, or the cookie the login form sets."""
        if self.token is None:
            return True
        scheme, _, given = (header or "").partition(" ")
        return (scheme.lower() == "bearer" and self.token_ok(given.strip())) or self.session_ok(cookie)

    # ----------------------------------------------------------------- CSRF

    def new_csrf(self) -> str:
        """A random nonce with its signature: sent as a cookie and echoed by every form."""
        nonce = secrets.token_urlsafe(16)
        return f"{nonce}.{self._sign('csrf:' + nonce)}"

    def csrf_valid(self, value: str | None) -> bool:
        nonce, _, signature = (value or "").partition(".")
        return bool(nonce) and hmac.compare_digest(signature, self._sign("csrf:" + nonce))

    def csrf_ok(self, cookie: str | None, field: str | None) -> bool:
        """The form's token equals the cookie's (double submit) and this process signed it."""
        return (cookie is not None and field is not None and hmac.compare_digest(cookie, field)
                and self.csrf_valid(cookie))
