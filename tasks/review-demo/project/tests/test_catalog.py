import pytest
from inventory.catalog import Catalog, UnknownProduct


def test_add_and_get():
    catalog = Catalog()
    catalog.add("AB-1", "Anchor bolt", 250)
    assert catalog.get("AB-1").price_cents == 250
    assert "AB-1" in catalog
    assert len(catalog) == 1


def test_unknown_sku_raises():
    with pytest.raises(UnknownProduct):
        Catalog().get("NOPE")


def test_duplicate_and_negative_price_are_rejected():
    catalog = Catalog()
    catalog.add("AB-1", "Anchor bolt", 250)
    with pytest.raises(ValueError):
        catalog.add("AB-1", "Anchor bolt again", 260)
    with pytest.raises(ValueError):
        catalog.add("CD-2", "Cable duct", -1)
