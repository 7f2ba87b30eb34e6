"""Product catalog: what can be sold, and at which unit price."""

from __future__ import annotations

from dataclasses import dataclass


class UnknownProduct(KeyError):
    """The SKU is not in the catalog."""


@dataclass(frozen=True)
class Product:
    sku: str
    name: str
    price_cents: int

    def __post_init__(self) -> None:
        if self.price_cents < 0:
            raise ValueError(f"price of {self.sku} must not be negative")


class Catalog:
    """Products by SKU."""

    def __init__(self) -> None:
        self._products: dict[str, Product] = {}

    def add(self, sku: str, name: str, price_cents: int) -> Product:
        if sku in self._products:
            raise ValueError(f"duplicate SKU {sku}")
        product = Product(sku, name, price_cents)
        self._products[sku] = product
        return product

    def get(self, sku: str) -> Product:
        try:
            return self._products[sku]
        except KeyError:
            raise UnknownProduct(sku) from None

    def __contains__(self, sku: object) -> bool:
        return sku in self._products

    def __len__(self) -> int:
        return len(self._products)

    def skus(self) -> list[str]:
        return sorted(self._products)
