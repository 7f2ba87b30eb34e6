from inventory.pricing import format_money, line_total


def test_format_money():
    assert format_money(1999) == "$19.99"
    assert format_money(5) == "$0.05"
    assert format_money(-250) == "-$2.50"


def test_small_lines_pay_full_price():
    assert line_total(250, 3) == 750


def test_large_lines_get_the_bulk_discount():
    assert line_total(100, 20) == 1800
