import pytest
from inventory.stock import InsufficientStock, StockLedger


def test_reserve_reduces_available():
    ledger = StockLedger()
    ledger.receive("AB-1", 5)
    ledger.reserve("AB-1", 3)
    assert ledger.available("AB-1") == 2
    assert ledger.on_hand("AB-1") == 5


def test_cannot_reserve_more_than_available():
    ledger = StockLedger()
    ledger.receive("AB-1", 2)
    with pytest.raises(InsufficientStock):
        ledger.reserve("AB-1", 3)


def test_ship_moves_reserved_units_out():
    ledger = StockLedger()
    ledger.receive("AB-1", 4)
    ledger.reserve("AB-1", 4)
    ledger.ship("AB-1", 3)
    assert (ledger.on_hand("AB-1"), ledger.reserved("AB-1")) == (1, 1)


def test_quantities_must_be_positive():
    with pytest.raises(ValueError):
        StockLedger().receive("AB-1", 0)
