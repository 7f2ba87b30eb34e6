"""Hidden oracle for order-cancellation: release on the ledger, cancel_order on orders."""

import inventory
import pytest
from inventory.catalog import Catalog
from inventory.orders import OrderError, cancel_order, place_order
from inventory.stock import StockLedger


def test_release_gives_reserved_units_back():
    ledger = StockLedger()
    ledger.receive("AB-1", 5)
    ledger.reserve("AB-1", 4)
    ledger.release("AB-1", 3)
    assert (ledger.on_hand("AB-1"), ledger.reserved("AB-1"), ledger.available("AB-1")) == (5, 1, 4)


def test_release_rejects_bad_quantities():
    ledger = StockLedger()
    ledger.receive("AB-1", 5)
    ledger.reserve("AB-1", 2)
    with pytest.raises(ValueError):
        ledger.release("AB-1", 3)
    with pytest.raises(ValueError):
        ledger.release("AB-1", 0)
    assert ledger.reserved("AB-1") == 2


def test_cancel_order_releases_every_line_once():
    catalog = Catalog()
    catalog.add("AB-1", "Anchor bolt", 250)
    catalog.add("CD-2", "Cable duct", 1200)
    ledger = StockLedger()
    ledger.receive("AB-1", 10)
    ledger.receive("CD-2", 3)
    order = place_order(catalog, ledger, {"AB-1": 4, "CD-2": 3})
    cancel_order(order, ledger)
    assert order.status == "cancelled"
    assert (ledger.available("AB-1"), ledger.available("CD-2")) == (10, 3)
    with pytest.raises(OrderError):
        cancel_order(order, ledger)
    assert (ledger.reserved("AB-1"), ledger.reserved("CD-2")) == (0, 0)


def test_cancel_order_is_exported():
    assert inventory.cancel_order is cancel_order
