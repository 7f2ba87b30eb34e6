"""Hidden oracle for bulk-discount-threshold: 10 or more units get 10 % off, in every price path."""

import pytest
from inventory.catalog import Catalog
from inventory.orders import place_order
from inventory.pricing import bulk_discount_applies, line_total, quote
from inventory.stock import StockLedger


@pytest.fixture
def shop():
    catalog = Catalog()
    catalog.add("AB-1", "Anchor bolt", 250)
    ledger = StockLedger()
    ledger.receive("AB-1", 100)
    return catalog, ledger


def test_order_of_exactly_ten_units_is_discounted(shop):
    catalog, ledger = shop
    order = place_order(catalog, ledger, {"AB-1": 10})
    assert order.total_cents == 2250


def test_quote_agrees_with_the_order(shop):
    catalog, ledger = shop
    assert quote(catalog, "AB-1", 10) == 2250
    assert quote(catalog, "AB-1", 10) == place_order(catalog, ledger, {"AB-1": 10}).total_cents


def test_threshold_boundaries():
    assert not bulk_discount_applies(9)
    assert bulk_discount_applies(10)
    assert bulk_discount_applies(11)
    assert line_total(100, 9) == 900
    assert line_total(100, 10) == 900
    assert line_total(100, 11) == 990


def test_discount_is_rounded_down_to_whole_cents():
    assert line_total(333, 10) == 3330 - 333
