"""Stock ledger: units on hand, and units reserved for open orders."""

from __future__ import annotations


class InsufficientStock(Exception):
    """A reservation asked for more units than are available."""

    def __init__(self, sku: str, requested: int, available: int) -> None:
        super().__init__(f"{sku}: requested {requested}, only {available} available")
        self.sku = sku
        self.requested = requested
        self.available = available


def _check_quantity(quantity: int) -> None:
    if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity <= 0:
        raise ValueError(f"quantity must be a positive integer, got {quantity!r}")


class StockLedger:
    """On-hand and reserved units per SKU; available = on hand - reserved."""

    def __init__(self) -> None:
        self._on_hand: dict[str, int] = {}
        self._reserved: dict[str, int] = {}

    def receive(self, sku: str, quantity: int) -> None:
        _check_quantity(quantity)
        self._on_hand[sku] = self._on_hand.get(sku, 0) + quantity

    def on_hand(self, sku: str) -> int:
        return self._on_hand.get(sku, 0)

    def reserved(self, sku: str) -> int:
        return self._reserved.get(sku, 0)

    def available(self, sku: str) -> int:
        return self.on_hand(sku) - self.reserved(sku)

    def reserve(self, sku: str, quantity: int) -> None:
        _check_quantity(quantity)
        if quantity > self.available(sku):
            raise InsufficientStock(sku, quantity, self.available(sku))
        self._reserved[sku] = self.reserved(sku) + quantity

    def ship(self, sku: str, quantity: int) -> None:
        """Hand reserved units to the carrier: they leave the reservation and the shelf."""
        _check_quantity(quantity)
        if quantity > self.reserved(sku):
            raise ValueError(f"{sku}: cannot ship {quantity}, only {self.reserved(sku)} reserved")
        self._reserved[sku] -= quantity
        self._on_hand[sku] -= quantity
