"""Hidden oracle for money-thousands: digit grouping everywhere money is rendered."""

from inventory.catalog import Catalog
from inventory.orders import place_order
from inventory.pricing import format_money
from inventory.stock import StockLedger


def test_thousands_are_grouped():
    assert format_money(123456) == "$1,234.56"
    assert format_money(123456789) == "$1,234,567.89"
    assert format_money(100000000) == "$1,000,000.00"


def test_negative_amounts_keep_the_sign_in_front():
    assert format_money(-123456789) == "-$1,234,567.89"
    assert format_money(-100000) == "-$1,000.00"


def test_small_amounts_are_unchanged():
    assert format_money(0) == "$0.00"
    assert format_money(5) == "$0.05"
    assert format_money(99999) == "$999.99"
    assert format_money(-250) == "-$2.50"


def test_order_summary_uses_the_grouping():
    catalog = Catalog()
    catalog.add("GEN-9", "Generator", 150000)
    ledger = StockLedger()
    ledger.receive("GEN-9", 2)
    order = place_order(catalog, ledger, {"GEN-9": 2})
    assert order.summary().splitlines() == ["2 x GEN-9: $3,000.00", "total: $3,000.00"]
