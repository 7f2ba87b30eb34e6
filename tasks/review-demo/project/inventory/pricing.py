"""Prices: bulk discounts, line totals, quotes and money formatting."""

from __future__ import annotations

from inventory.catalog import Catalog

BULK_THRESHOLD = 10  # units of one product on one line from which the bulk discount applies
BULK_DISCOUNT_PERCENT = 10


def bulk_discount_applies(quantity: int) -> bool:
    """Whether a line of ``quantity`` units qualifies for the bulk discount."""
    return quantity > BULK_THRESHOLD


def line_total(unit_price_cents: int, quantity: int) -> int:
    """Price of ``quantity`` units in cents, bulk discount (rounded down to whole cents) included."""
    gross = unit_price_cents * quantity
    if bulk_discount_applies(quantity):
        return gross - gross * BULK_DISCOUNT_PERCENT // 100
    return gross


def quote(catalog: Catalog, sku: str, quantity: int) -> int:
    """What ``quantity`` units of ``sku`` would cost right now, in cents."""
    return line_total(catalog.get(sku).price_cents, quantity)


def format_money(cents: int) -> str:
    """Render cents as dollars: 1999 -> '$19.99', -250 -> '-$2.50'."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}${cents // 100}.{cents % 100:02d}"
