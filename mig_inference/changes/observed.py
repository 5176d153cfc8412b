"""The load each model served, as vLLM's own counters in Prometheus show it over a window.

vLLM exports, per engine (labels `model_name`, the served model, and `engine`), the counter
`vllm:request_success_total` (also by `finished_reason`), the token counters
`vllm:prompt_tokens_total` and `vllm:generation_tokens_total`, and the histograms
`vllm:request_queue_time_seconds` (time in the WAITING phase) and
`vllm:time_to_first_token_seconds` (vllm-project/vllm `vllm/v1/metrics/loggers.py`,
PrometheusStatLogger). The scrape adds the pod's `namespace` (the Prometheus Operator's
PodMonitor does, and so does the usual annotation-based job). Everything is summed by
`namespace` and `model_name`: over pods, engines and finish reasons.

The statistic that sizes a service is a high quantile (0.95 by default) of its request rate over
5 minutes, taken each minute of the window: the mean would under-size every busy stretch of the
window, and the peak lets one burst (a retry storm, a load test) size the fleet for good. Rates
are taken per series before summing (`sum(rate(...))`, never `rate(sum(...))`), so a restarted
engine's counter starting again from zero (a reset) or a replaced pod's new series count as what
they served, as Prometheus' `rate()` and `increase()` define.

Every query is evaluated at the window's end, given or taken once from Prometheus (`time()`), so
the figures do not depend on when they are asked for.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from msgspec import Struct

from mig_inference.changes.prometheus import Prometheus, Sample
from mig_inference.errors import MigError

REQUESTS = "vllm:request_success_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
QUEUE_TIME = "vllm:request_queue_time_seconds"
FIRST_TOKEN = "vllm:time_to_first_token_seconds"
NAMESPACE_LABEL = "namespace"
MODEL_LABEL = "model_name"
RATE_INTERVAL = "5m"
STEP = "1m"
"""A rate sample each minute, over the last 5 minutes: at least two scrapes at the usual 15-60 s
scrape intervals."""
FIRST_TOKEN_QUANTILE = 0.95
MIN_WINDOW_SECONDS = 600
MAX_WINDOW_SECONDS = 90 * 86400
"""Ten one-minute rate samples at the least: a shorter window says little about a fleet."""
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_MATCHER = r'\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*'
_SELECTOR = re.compile(rf"^{_MATCHER}(?:,{_MATCHER})*,?\s*$")

Key = tuple[str, str]
"""(namespace, model_name)."""


def window_seconds(text: str) -> int:
    """A Prometheus duration (`1h`, `90m`, `1h30m`, `2d`) in seconds, at least
    MIN_WINDOW_SECONDS and at most MAX_WINDOW_SECONDS."""
    parts = _DURATION.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise MigError(
            "must be a Prometheus duration: a number and a unit, ms, s, m, h, d, w or y, such as "
            "1h, 90m or 1h30m",
            "--window",
            value=text,
        )
    seconds = sum(int(number) * _UNITS[unit] for number, unit in parts)
    if seconds < MIN_WINDOW_SECONDS:
        raise MigError(
            f"is {seconds:g} s; a window of at least {MIN_WINDOW_SECONDS // 60} minutes is needed "
            "to trust a service's figure",
            "--window",
            value=text,
        )
    if seconds > MAX_WINDOW_SECONDS:
        raise MigError(
            f"is {seconds:,.0f} s; a window of at most {MAX_WINDOW_SECONDS // 86400} days is "
            "read (Prometheus keeps 15 days by default, --storage.tsdb.retention.time)",
            "--window",
            value=text,
        )
    return int(seconds)


def label_selector(text: str | None) -> str:
    """Extra label matchers for every series read (`cluster="prod-1"`), checked to be matchers
    only, so they cannot change what the queries compute."""
    if not text:
        return ""
    if not _SELECTOR.match(text):
        raise MigError(
            'must be PromQL label matchers, such as cluster="prod-1" or '
            'cluster="prod-1",job=~"vllm.*"',
            "--selector",
            value=text,
        )
    return text.strip().rstrip(",")


class Query(Struct, frozen=True):
    """The PromQL of one window: what each figure is, over `seconds` up to the evaluation time."""

    seconds: int
    quantile: float
    selector: str = ""

    def _series(self, metric: str) -> str:
        return f"{metric}{{{self.selector}}}" if self.selector else metric

    def _sum(self, expression: str, *extra: str) -> str:
        return f"sum by ({', '.join((NAMESPACE_LABEL, MODEL_LABEL, *extra))}) ({expression})"

    def _increase(self, metric: str, *extra: str) -> str:
        return self._sum(f"increase({self._series(metric)}[{self.seconds}s])", *extra)

    @property
    def _rate(self) -> str:
        return self._sum(f"rate({self._series(REQUESTS)}[{RATE_INTERVAL}])")

    @property
    def rate_statistic(self) -> str:
        return f"quantile_over_time({self.quantile:g}, ({self._rate})[{self.seconds}s:{STEP}])"

    @property
    def rate_samples(self) -> str:
        return f"count_over_time(({self._rate})[{self.seconds}s:{STEP}])"

    @property
    def requests(self) -> str:
        return self._increase(REQUESTS)

    @property
    def prompt_tokens(self) -> str:
        return self._increase(PROMPT_TOKENS)

    @property
    def generation_tokens(self) -> str:
        return self._increase(GENERATION_TOKENS)

    @property
    def queue_seconds(self) -> str:
        return f"{self._increase(QUEUE_TIME + '_sum')} / {self._increase(QUEUE_TIME + '_count')}"

    @property
    def first_token_seconds(self) -> str:
        quantile = f"{FIRST_TOKEN_QUANTILE:g}"
        return f"histogram_quantile({quantile}, {self._increase(FIRST_TOKEN + '_bucket', 'le')})"


class Observation(Struct, frozen=True):
    """What one model served in one namespace over the window."""

    namespace: str
    model_name: str
    requests_per_second: float
    """The sizing statistic: the quantile of the 5-minute request rate, sampled each minute."""
    samples: int
    """One-minute rate samples the statistic was taken over."""
    requests: float
    """Requests finished in the window (`increase()`)."""
    window_seconds: int
    prompt_tokens_per_request: float | None = None
    generation_tokens_per_request: float | None = None
    queue_seconds: float | None = None
    """Mean time a request waited before it ran."""
    first_token_seconds: float | None = None
    """The 0.95 quantile of the time to first token."""

    @property
    def mean_requests_per_second(self) -> float:
        return self.requests / self.window_seconds


class ObservedLoad(Struct, frozen=True):
    """Every (namespace, model) with vLLM request counters in the window."""

    end: float
    """The evaluation time of every query (unix seconds)."""
    query: Query
    models: Mapping[Key, Observation]


def _by_key(samples: list[Sample]) -> dict[Key, float]:
    found: dict[Key, float] = {}
    for sample in samples:
        if math.isfinite(sample.value):
            key = (sample.labels.get(NAMESPACE_LABEL, ""), sample.labels.get(MODEL_LABEL, ""))
            found[key] = sample.value
    return found


def _per_request(total: float | None, requests: float) -> float | None:
    return total / requests if total is not None and requests > 0 else None


def observed_load(prometheus: Prometheus, query: Query, end: float | None = None) -> ObservedLoad:
    """Each model's figures over the window ending at `end` (None: Prometheus' own now)."""
    at = prometheus.now() if end is None else end

    def ask(promql: str) -> dict[Key, float]:
        return _by_key(prometheus.query(promql, at))

    requests = ask(query.requests)
    if not requests:
        raise MigError(
            f"has no {REQUESTS} in the {query.seconds:,} s before {at:.0f} (unix time): is it "
            "scraping the vLLM engines (the stack's monitoring), and does --selector match them?",
            prometheus.url,
        )
    rates, samples = ask(query.rate_statistic), ask(query.rate_samples)
    prompt, generated = ask(query.prompt_tokens), ask(query.generation_tokens)
    queued, first_token = ask(query.queue_seconds), ask(query.first_token_seconds)
    models = {}
    for key, served in requests.items():
        models[key] = Observation(
            namespace=key[0],
            model_name=key[1],
            requests_per_second=max(rates.get(key, 0.0), 0.0),
            samples=int(samples.get(key, 0)),
            requests=max(served, 0.0),
            window_seconds=query.seconds,
            prompt_tokens_per_request=_per_request(prompt.get(key), served),
            generation_tokens_per_request=_per_request(generated.get(key), served),
            queue_seconds=queued.get(key),
            first_token_seconds=first_token.get(key),
        )
    return ObservedLoad(at, query, models)
