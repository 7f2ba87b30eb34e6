"""Hidden oracle for sku-normalization: one normalized SKU across catalog, ledger and orders."""

import pytest
from inventory.catalog import Catalog, normalize_sku
from inventory.orders import place_order
from inventory.stock import StockLedger


def test_normalize_sku():
    assert normalize_sku(" ab-1 ") == "AB-1"
    assert normalize_sku("Cd-2") == "CD-2"
    assert normalize_sku("AB-1") == "AB-1"
    for blank in ("", "   ", "\t"):
        with pytest.raises(ValueError):
            normalize_sku(blank)


def test_catalog_keys_by_normalized_sku():
    catalog = Catalog()
    product = catalog.add(" ab-1 ", "Anchor bolt", 250)
    assert product.sku == "AB-1"
    assert catalog.get("AB-1") is product
    assert catalog.get("  aB-1") is product
    assert "ab-1" in catalog
    assert catalog.skus() == ["AB-1"]
    with pytest.raises(ValueError):
        catalog.add("AB-1 ", "Anchor bolt again", 260)


def test_ledger_keys_by_normalized_sku():
    ledger = StockLedger()
    ledger.receive("ab-1", 5)
    ledger.receive(" AB-1", 1)
    ledger.reserve("Ab-1 ", 2)
    assert ledger.on_hand("AB-1") == 6
    assert ledger.reserved("ab-1") == 2
    assert ledger.available(" ab-1 ") == 4
    ledger.ship("aB-1", 1)
    assert ledger.on_hand("AB-1") == 5


def test_orders_use_normalized_skus():
    catalog = Catalog()
    catalog.add("AB-1", "Anchor bolt", 250)
    ledger = StockLedger()
    ledger.receive("ab-1", 5)
    order = place_order(catalog, ledger, {" ab-1 ": 2})
    assert [line.sku for line in order.lines] == ["AB-1"]
    assert order.total_cents == 500
    assert ledger.available("AB-1") == 3
