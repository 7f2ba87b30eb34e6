"""Inventory: catalog, stock ledger, pricing and orders (standard library only)."""

from inventory.catalog import Catalog, Product, UnknownProduct
from inventory.orders import Order, OrderError, OrderLine, place_order
from inventory.stock import InsufficientStock, StockLedger

__all__ = [
    "Catalog",
    "InsufficientStock",
    "Order",
    "OrderError",
    "OrderLine",
    "Product",
    "StockLedger",
    "UnknownProduct",
    "place_order",
]
