import pytest
from inventory.catalog import Catalog
from inventory.orders import OrderError, place_order
from inventory.stock import StockLedger


@pytest.fixture
def shop():
    catalog = Catalog()
    catalog.add("AB-1", "Anchor bolt", 250)
    catalog.add("CD-2", "Cable duct", 1200)
    ledger = StockLedger()
    ledger.receive("AB-1", 50)
    ledger.receive("CD-2", 3)
    return catalog, ledger


def test_order_is_priced_and_reserved(shop):
    catalog, ledger = shop
    order = place_order(catalog, ledger, {"AB-1": 4, "CD-2": 1})
    assert order.total_cents == 4 * 250 + 1200
    assert ledger.available("AB-1") == 46
    assert order.summary().splitlines()[-1] == "total: $22.00"


def test_order_without_stock_reserves_nothing(shop):
    catalog, ledger = shop
    with pytest.raises(OrderError):
        place_order(catalog, ledger, {"AB-1": 2, "CD-2": 5})
    assert ledger.available("AB-1") == 50


def test_empty_order_is_rejected(shop):
    catalog, ledger = shop
    with pytest.raises(OrderError):
        place_order(catalog, ledger, {})
