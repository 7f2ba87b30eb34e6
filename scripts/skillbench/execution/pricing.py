"""Prices: a model's price (`model_price`, the one lookup) and what one model response costs (`request_cost`) under
the price table (config `agent.prices`).

The gateway refuses a request for a model `model_price` cannot price, and prices every response it relays with
`request_cost`, so a row's cost is measured the same way for every agent CLI; a CLI's own reported cost is only the
cross-check. Unmeasured is None, never 0.

The table is the config's own `usd_per_mtok`, over the pinned community table `agent.prices.source` names
(`execution.price_tables`): `price_book` looks a model up in the first, then in the second, and says which one
priced it (`PriceBook.label`). A table entry may state `tiers`: other rates above a prompt size, which then
apply to the whole request (as the providers bill long context).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from skillbench.execution.price_tables import PriceTable, load_table
from skillbench.experiment.settings import PriceSettings

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
    the field existed) gets Anthropic's 1-hour rate, twice `input`. An entry from a community table
    (it has `tiers` or lacks a cache rate) keeps only the rates it states: a request that needs a
    missing one is unmeasured.
    """
    if not isinstance(price, dict):
        return None
    rates = {field: _nonnegative(price.get(field)) for field in PRICE_FIELDS if field in price}
    if CACHE_WRITE_1H in price:
        rates[CACHE_WRITE_1H] = _nonnegative(price[CACHE_WRITE_1H])
    elif "cache_write" in price and rates.get("input") is not None:
        rates[CACHE_WRITE_1H] = 2 * rates["input"]  # type: ignore[operator]
    if any(rate is None for rate in rates.values()) or "input" not in rates or "output" not in rates:
        return None
    return {field: rate for field, rate in rates.items() if rate is not None}


def _tier_rates(price: Mapping[str, Any], prompt_tokens: int) -> dict[str, float] | None:
    """The rates for a request whose prompt is `prompt_tokens` long: the highest tier it passes, over the base."""
    rates = price_rates(dict(price))
    if rates is None:
        return None
    for tier in price.get("tiers") or []:
        if (
            isinstance(tier, dict)
            and isinstance(tier.get("above_tokens"), int)
            and prompt_tokens > tier["above_tokens"]
        ):
            for field in (*PRICE_FIELDS, CACHE_WRITE_1H):
                rate = _nonnegative(tier.get(field))
                if rate is not None:
                    rates[field] = rate
    return rates


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
    at `cache_write` (five minutes, also when the split is not reported). A tier applies when the prompt
    (uncached input, cache reads and writes) is larger than its `above_tokens`.
    """
    if usage is None or not isinstance(price, dict):
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
    rates = _tier_rates(price, tokens["input"] + tokens["cache_read"] + written)
    if rates is None or any(count and name not in rates for name, count in tokens.items()):
        return None
    return round(sum(count * rates[name] / 1_000_000 for name, count in tokens.items() if count), 10)


@dataclass(frozen=True)
class PriceBook(Mapping[str, Any]):
    """Model id -> price: the config's own `usd_per_mtok` first, then the pinned community table (if any). A
    mapping the gateway reads like `usd_per_mtok`; entries of the table are converted when looked up."""

    own: Mapping[str, Any]
    own_label: str
    table: PriceTable | None = None

    def __getitem__(self, model: str) -> Any:
        if model in self.own:
            return self.own[model]
        found = self.table.price(model) if self.table is not None else None
        if found is None:
            raise KeyError(model)
        return found

    def __iter__(self) -> Iterator[str]:
        yield from self.own
        if self.table is not None:
            yield from (model for model in self.table.entries if model not in self.own)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def label(self, model: str | None) -> str:
        """The table that prices `model`: the config's own (its `table` label) or the community one and its digest."""
        if model is not None and model not in self.own and self.table is not None and model in self:
            return self.table.pin.label
        return self.own_label


def price_book(prices: PriceSettings) -> PriceBook:
    """The job's prices: `usd_per_mtok` over the table `agent.prices.source` names (read and digest-checked)."""
    table = load_table(prices.source) if prices.source else None
    return PriceBook(own=prices.usd_per_mtok, own_label=prices.table, table=table)


def price_label(prices: PriceSettings, model: str | None) -> str:
    """The label of the table that prices `model`: `agent.prices.table` for the config's own rates (and without a
    source), else the community table's source and digest."""
    if not prices.source or (model is not None and model in prices.usd_per_mtok):
        return prices.table
    return price_book(prices).label(model)
