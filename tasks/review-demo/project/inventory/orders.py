"""Orders: price the requested lines and reserve their stock, all or nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

from inventory import pricing
from inventory.catalog import Catalog
from inventory.stock import StockLedger


class OrderError(Exception):
    """An order cannot be placed or changed as requested."""


@dataclass(frozen=True)
class OrderLine:
    sku: str
    quantity: int
    unit_price_cents: int
    total_cents: int


@dataclass
class Order:
    number: int
    lines: list[OrderLine] = field(default_factory=list)
    status: str = "open"

    @property
    def total_cents(self) -> int:
        return sum(line.total_cents for line in self.lines)

    def summary(self) -> str:
        rows = [f"{line.quantity} x {line.sku}: {pricing.format_money(line.total_cents)}" for line in self.lines]
        rows.append(f"total: {pricing.format_money(self.total_cents)}")
        return "\n".join(rows)


def place_order(catalog: Catalog, ledger: StockLedger, items: dict[str, int], number: int = 1) -> Order:
    """Price every line, check that all of them are in stock, then reserve them."""
    if not items:
        raise OrderError("an order needs at least one line")
    lines = []
    for sku, quantity in items.items():
        product = catalog.get(sku)
        if quantity > ledger.available(sku):
            raise OrderError(f"not enough stock for {sku}: {ledger.available(sku)} available")
        total = pricing.line_total(product.price_cents, quantity)
        lines.append(OrderLine(product.sku, quantity, product.price_cents, total))
    for line in lines:
        ledger.reserve(line.sku, line.quantity)
    return Order(number, lines)
