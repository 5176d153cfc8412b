"""A client of Prometheus' HTTP query API (`/api/v1/query`), on the standard library.

Instant queries only, each at a given evaluation time, so the answer does not depend on when it
is asked. A team's Prometheus is often behind a proxy that wants a bearer token, basic auth or
its own certificate authority: the credentials come from the caller (read from a file or the
environment, never from the command line) and are sent on no other request than the query's.
Redirects are refused rather than followed, since urllib would send the Authorization header on
to wherever they point. Every failure is one MigError naming the URL (without credentials) and
what went wrong; a credential is never part of a message.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from msgspec import Struct

from mig_inference.errors import MigError

OPTION = "--prometheus"
ANSWER_CHARACTERS = 200
"""The most of an answer's body quoted in an error."""


class Credentials(Struct, frozen=True):
    """How the client proves who it is: a bearer token, or a user and password (basic auth)."""

    bearer_token: str | None = None
    user: str | None = None
    password: str | None = None

    def header(self) -> str | None:
        if self.bearer_token is not None:
            return f"Bearer {self.bearer_token}"
        if self.user is not None:
            pair = f"{self.user}:{self.password or ''}".encode()
            return f"Basic {base64.b64encode(pair).decode('ascii')}"
        return None

    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.bearer_token, self.password) if s)


class Sample(Struct, frozen=True):
    """One series of an instant vector: its labels and its value at the evaluation time."""

    labels: Mapping[str, str]
    value: float


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_: Any, **__: Any) -> None:  # urllib: None means "do not follow"
        return None


def base_url(url: str) -> str:
    """The Prometheus URL `url` names (http or https, a host, any path prefix), refused when it
    carries credentials, a query or a fragment."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise MigError(
            "must be an http:// or https:// URL of a Prometheus (or of a proxy serving its "
            "/api/v1/query)",
            OPTION,
            value=url,
        )
    if parts.username is not None or parts.password is not None:
        raise MigError(
            "must not carry credentials: give them with --bearer-token-file/--bearer-token-env "
            "or --basic-auth-user and --basic-auth-password-file/--basic-auth-password-env",
            OPTION,
            value=urllib.parse.urlunsplit(parts._replace(netloc=parts.hostname)),
        )
    if parts.query or parts.fragment:
        raise MigError("must not have a query or fragment", OPTION, value=url)
    return url.rstrip("/")


class Prometheus:
    """Instant queries against one Prometheus."""

    def __init__(
        self,
        url: str,
        credentials: Credentials = Credentials(),
        ca_file: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.url = base_url(url)
        self._credentials = credentials
        self._timeout = timeout
        handlers: list[urllib.request.BaseHandler] = [_NoRedirects()]
        if self.url.startswith("https:"):
            handlers.append(urllib.request.HTTPSHandler(context=_tls(ca_file)))
        elif ca_file is not None:
            raise MigError("applies to an https:// Prometheus only", "--ca-file", value=ca_file)
        self._opener = urllib.request.build_opener(*handlers)

    def query(self, promql: str, at: float | None = None) -> list[Sample]:
        """The instant vector `promql` evaluates to at `at` (unix seconds; None: Prometheus'
        now). A scalar answer is one sample without labels."""
        data = self._get(promql, at)
        kind, result = data.get("resultType"), data.get("result")
        if kind == "scalar" and isinstance(result, list) and len(result) == 2:
            return [Sample({}, _number(result[1], self.url))]
        if kind != "vector" or not isinstance(result, list):
            raise MigError(f"answered a {kind} where a vector was asked for: {promql}", self.url)
        samples = []
        for series in result:
            labels, value = series.get("metric", {}), series.get("value", [None, None])
            samples.append(Sample(dict(labels), _number(value[1], self.url)))
        return samples

    def now(self) -> float:
        """Prometheus' own time: the evaluation time of a query given none."""
        data = self._get("time()", None)
        result = data.get("result")
        if data.get("resultType") != "scalar" or not isinstance(result, list):
            raise MigError("answered `time()` with something other than a scalar", self.url)
        return _number(result[0], self.url)

    def _get(self, promql: str, at: float | None) -> dict[str, Any]:
        params = {"query": promql, **({"time": f"{at:.3f}"} if at is not None else {})}
        request = urllib.request.Request(
            f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}",
            headers={"Accept": "application/json"},
        )
        header = self._credentials.header()
        if header is not None:
            request.add_unredirected_header("Authorization", header)
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                body = response.read()
                status = response.status
        except urllib.error.HTTPError as error:
            body, status = error.read(), error.code
        except urllib.error.URLError as error:
            raise MigError(self._unreachable(error.reason), self.url) from None
        except TimeoutError:
            raise MigError(
                f"did not answer within {self._timeout:g} s (--timeout)", self.url
            ) from None
        except (OSError, ValueError) as error:
            raise MigError(self._unreachable(error), self.url) from None
        return self._answer(status, body)

    def _answer(self, status: int, body: bytes) -> dict[str, Any]:
        if status in (301, 302, 303, 307, 308):
            raise MigError(
                f"answered HTTP {status}, a redirect, which is not followed (it would carry the "
                "credentials elsewhere): give the URL it redirects to",
                self.url,
            )
        if status in (401, 403):
            given = "the credentials given were refused" if self._credentials.header() else (
                "no credentials were given (--bearer-token-file, --bearer-token-env, "
                "--basic-auth-user)"
            )  # fmt: skip
            word = "unauthorized" if status == 401 else "forbidden"
            raise MigError(f"answered HTTP {status} ({word}): {given}", self.url)
        try:
            answer = json.loads(body)
        except ValueError:
            raise MigError(
                f"answered HTTP {status} with something other than Prometheus' JSON: "
                f"{self._quoted(body)}",
                self.url,
            ) from None
        if not isinstance(answer, dict):
            raise MigError(f"answered HTTP {status} with JSON that is not an object", self.url)
        if answer.get("status") != "success":
            raise MigError(
                f"answered HTTP {status}, {answer.get('errorType', 'error')}: "
                f"{self._redacted(str(answer.get('error', '')))}",
                self.url,
            )
        data = answer.get("data")
        if not isinstance(data, dict):
            raise MigError("answered success without data", self.url)
        return data

    def _unreachable(self, reason: object) -> str:
        if isinstance(reason, ssl.SSLCertVerificationError):
            return (
                f"its TLS certificate is not trusted ({reason.verify_message}): give the "
                "certificate authority that signed it with --ca-file"
            )
        if isinstance(reason, ssl.SSLError):
            return f"the TLS handshake failed: {reason.reason or reason}"
        return f"cannot be reached: {self._redacted(str(reason))}"

    def _quoted(self, body: bytes) -> str:
        text = body.decode("utf-8", "replace").strip()
        text = self._redacted(text)
        if len(text) > ANSWER_CHARACTERS:
            return repr(text[:ANSWER_CHARACTERS]) + f"... ({len(text):,} characters)"
        return repr(text)

    def _redacted(self, text: str) -> str:
        for secret in self._credentials.secrets():
            text = text.replace(secret, "<redacted>")
        return text


def _tls(ca_file: str | None) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise MigError(
            f"cannot be read as PEM certificates: {reason}", "--ca-file", value=ca_file
        ) from None


def _number(value: object, source: str) -> float:
    try:
        number = float(str(value))
    except ValueError:
        raise MigError(f"answered {value!r} where a number was expected", source) from None
    return number
