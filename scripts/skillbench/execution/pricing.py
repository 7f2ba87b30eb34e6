"""Prices: a model's price (`model_price`, the one lookup) and what one model response costs (`request_cost`) under
the price table (config `agent.prices.usd_per_mtok`).

The gateway refuses a request for a model `model_price` cannot price, and prices every response it relays with
`request_cost`, so a row's cost is measured the same way for every agent CLI; a CLI's own reported cost is only the
cross-check. Unmeasured is None, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# The price-table fields of a model, USD per million tokens: `cache_write` is the 5-minute cache write.
PRICE_FIELDS = ("input", "output", "cache_write", "cache_read")
CACHE_WRITE_1H = "cache_write_1h"
# The token counts a response reports (Anthropic Messages `usage`), and the one-hour part of the cache writes.
USAGE_COUNTS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
ONE_HOUR_WRITES = "cache_creation_1h_input_tokens"


def _nonnegative(raw: Any) -> float | None:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return None
    if not math.isfinite(raw) or raw < 0:
        return None
    return float(raw)


def price_rates(price: Any) -> dict[str, float] | None:
    """A model's price-table entry as price field -> USD per million tokens; None when a price is missing or bad.

    `cache_write` is the 5-minute cache write. A table without `cache_write_1h` (configs from before
    the field existed) gets Anthropic's 1-hour rate, twice `input`.
    """
    if not isinstance(price, dict):
        return None
    rates = {field: _nonnegative(price.get(field)) for field in PRICE_FIELDS}
    if CACHE_WRITE_1H in price:
        rates[CACHE_WRITE_1H] = _nonnegative(price[CACHE_WRITE_1H])
    else:
        input_rate = rates["input"]
        rates[CACHE_WRITE_1H] = None if input_rate is None else 2 * input_rate
    valid = {field: rate for field, rate in rates.items() if rate is not None}
    return valid if len(valid) == len(rates) else None


def model_price(prices: Mapping[str, Any], model: str | None) -> Mapping[str, Any] | None:
    """The price-table entry of `model` under `prices` (model id -> entry), as the table states it (what
    `request_cost` prices a response at), or None when the table has no complete price for it (`price_rates`) or the
    request names no model. Every price lookup goes through here: the gateway's refusal of an unpriced model and
    its meter alike."""
    if not isinstance(model, str):
        return None
    entry = prices.get(model)
    return entry if price_rates(entry) is not None else None


def request_cost(usage: Mapping[str, int | None] | None, price: Any) -> float | None:
    """USD for one response's usage at `price` (a `usd_per_mtok` entry); None when either is incomplete.

    One-hour cache writes are priced at `cache_write_1h`; the rest of `cache_creation_input_tokens`
    at `cache_write` (five minutes, also when the split is not reported).
    """
    rates = price_rates(price)
    if usage is None or rates is None:
        return None
    counts = {name: usage.get(name) for name in USAGE_COUNTS}
    if any(value is None for value in counts.values()):
        return None
    written = counts["cache_creation_input_tokens"] or 0
    one_hour = usage.get(ONE_HOUR_WRITES) or 0
    if one_hour > written:
        return None
    tokens = {
        "input": counts["input_tokens"] or 0,
        "output": counts["output_tokens"] or 0,
        "cache_read": counts["cache_read_input_tokens"] or 0,
        "cache_write": written - one_hour,
        "cache_write_1h": one_hour,
    }
    return round(sum(count * rates[name] / 1_000_000 for name, count in tokens.items()), 10)
