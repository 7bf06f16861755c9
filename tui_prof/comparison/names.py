"""What a metric's name says: which way is better, its unit, whether it is time, quality or a
distribution's percentile.

Contract: one place for the naming rules every report, verdict and plot shares.
- Lower is better for names containing time, latency, duration, loss, error or seconds, or ending
  in `_s`/`_ms`/`_us`; everything else is higher-is-better.
- A distribution's per-run percentiles are named `NAME:p50`, `NAME:p90`, `NAME:p99`
  (tui_prof.experiments.samples); the rules above read the `NAME` part.
- The smallest difference that matters (percent of the baseline): `TIME_MATTERS_PCT` (5%) for
  times unless given per metric (the spec's `min_difference_pct`, `--min-difference`, the `r`
  dialog); none for other metrics unless given (their verdicts keep the 1%/2% rules of power
  and verdicts).
- A percentage in a sentence takes the article it is spoken with: "an 8% difference", "an 11%",
  "a 6%" (`a_percent`).
- "Accuracy-like" (the default quality axis of a trade-off) is a higher-is-better name containing
  acc, top1/top5, f1, auc, iou, bleu, rouge or score.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

TIME_MATTERS_PCT = 5.0

_LOWER_IS_BETTER = re.compile(
    r"(time|latency|duration|loss|error|memory|_s$|_ms$|_us$|seconds)", re.IGNORECASE
)
_TIME = re.compile(r"(time|latency|_s$|_ms$|_us$|seconds|duration)", re.IGNORECASE)
_UNITS = (("_ms", "ms"), ("_us", "µs"), ("_s", "s"), ("seconds", "s"))
_QUALITY = re.compile(r"(acc|top_?\d|f1|auc|iou|bleu|rouge|score)", re.IGNORECASE)
_PERCENTILE = re.compile(r"^(?P<base>.+):p(?P<q>\d{1,2})$")


def base_name(metric: str) -> str:
    """`latency_ms:p99` -> `latency_ms`; any other name unchanged."""
    m = _PERCENTILE.match(metric)
    return m.group("base") if m else metric


def percentile_of(metric: str) -> int | None:
    """`latency_ms:p99` -> 99; None for a metric that is not a distribution's percentile."""
    m = _PERCENTILE.match(metric)
    return int(m.group("q")) if m else None


def lower_is_better(metric: str) -> bool:
    """True for names with time, latency, duration, loss, error, seconds, or ending _s/_ms/_us."""
    return bool(_LOWER_IS_BETTER.search(base_name(metric)))


def is_time_metric(metric: str) -> bool:
    """Time-like metrics get "faster/slower" verdicts; others get "higher/lower"."""
    return bool(_TIME.search(base_name(metric)))


def metric_unit(metric: str) -> str:
    """Unit implied by a metric's name suffix ("wall_time_s" -> "s"), or "" when none."""
    low = base_name(metric).lower()
    return next((unit for suffix, unit in _UNITS if low.endswith(suffix)), "")


def is_quality_metric(metric: str) -> bool:
    """Accuracy-like: what a trade-off weighs against speed by default."""
    return not lower_is_better(metric) and bool(_QUALITY.search(base_name(metric)))


def min_difference_pct(metric: str, given: Mapping[str, float] | None = None) -> float | None:
    """The smallest difference that matters for `metric`, in percent: given for it (or for its
    distribution's name, or for every metric as "*"), else 5% for times, else None."""
    given = given or {}
    for key in (metric, base_name(metric), "*"):
        if key in given:
            return float(given[key])
    return TIME_MATTERS_PCT if is_time_metric(metric) else None


def a_percent(number: str) -> str:
    """`number` ("6", "8", "11", "1.5") as a percentage with the article English speaks it with:
    "a 6%", "an 8%", "an 11%"; eight, eleven and eighteen (and 80, 800, 11,000…) begin with a
    vowel sound."""
    whole = number.lstrip("+-").split(".")[0].replace(",", "")
    vowel = whole.startswith("8") or (whole[:2] in ("11", "18") and len(whole) % 3 == 2)
    return f"{'an' if vowel else 'a'} {number}%"
