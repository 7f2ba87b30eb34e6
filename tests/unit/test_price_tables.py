"""Prices from a pinned community table: LiteLLM's entries as prices (tiers and cache writes as the table states),
the config's own rates over them, a copy that is not the pinned bytes refused by name, and a model the table lacks
refused by the check before any session."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from skillbench.execution import price_tables
from skillbench.execution.price_tables import PriceTableError, TablePin, keep_table, litellm_price, load_table
from skillbench.execution.pricing import PriceBook, price_label, request_cost
from skillbench.experiment.configcheck import validate_config
from skillbench.experiment.settings import PriceSettings
from skillbench.preflight import check_prices, experiment_checks

SONNET = {
    "input_cost_per_token": 3e-06,
    "output_cost_per_token": 1.5e-05,
    "cache_creation_input_token_cost": 3.75e-06,
    "cache_creation_input_token_cost_above_1hr": 6e-06,
    "cache_read_input_token_cost": 3e-07,
    "litellm_provider": "anthropic",
}
LONG_CONTEXT = {
    "input_cost_per_token": 1.25e-06,
    "output_cost_per_token": 1e-05,
    "cache_read_input_token_cost": 1.25e-07,
    "input_cost_per_token_above_200k_tokens": 2.5e-06,
    "output_cost_per_token_above_200k_tokens": 1.5e-05,
    "cache_read_input_token_cost_above_200k_tokens": 2.5e-07,
}
TABLE = {"sample_spec": {"input_cost_per_token": 0.0}, "claude-sonnet-4-5": SONNET, "gemini-2.5-pro": LONG_CONTEXT}


def usage(input_tokens: int, output: int, reads: int = 0, writes: int = 0, one_hour: int = 0) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output,
        "cache_read_input_tokens": reads,
        "cache_creation_input_tokens": writes,
        "cache_creation_1h_input_tokens": one_hour,
    }


def pinned_root(tmp_path: Path, table: dict | bytes = TABLE, *, digest: str | None = None) -> Path:
    """A project root whose tools/ pins a litellm release and holds its fetched table."""
    data = table if isinstance(table, bytes) else json.dumps(table).encode()
    pins = {
        "schema": "price-tables/v1",
        "tables": {
            "litellm@9.9.9": {
                "package": "litellm",
                "version": "9.9.9",
                "member": "litellm/model_prices_and_context_window_backup.json",
                "sha256": digest or hashlib.sha256(data).hexdigest(),
            }
        },
    }
    (tmp_path / "tools" / "price-tables").mkdir(parents=True)
    (tmp_path / "tools" / "price-tables.json").write_text(json.dumps(pins))
    (tmp_path / "tools" / "price-tables" / "litellm-9.9.9.json").write_bytes(data)
    return tmp_path


def test_a_litellm_entry_prices_per_million_tokens_with_its_one_hour_cache_writes() -> None:
    price = litellm_price(SONNET)
    assert price == {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_write_1h": 6.0, "cache_read": 0.3}
    # 1,000 in, 100 out, 2,000 read, 1,000 written of which 400 live an hour.
    cost = request_cost(usage(1000, 100, reads=2000, writes=1000, one_hour=400), price)
    assert cost == pytest.approx((1000 * 3 + 100 * 15 + 2000 * 0.3 + 600 * 3.75 + 400 * 6) / 1e6)


def test_a_prompt_above_the_tables_threshold_is_priced_at_its_tier_whole() -> None:
    price = litellm_price(LONG_CONTEXT)
    assert price is not None and price["tiers"] == [
        {"above_tokens": 200_000, "input": 2.5, "output": 15.0, "cache_read": 0.25}
    ]
    below = request_cost(usage(150_000, 1000, reads=50_000), price)
    above = request_cost(usage(150_000, 1000, reads=50_001), price)
    assert below == pytest.approx((150_000 * 1.25 + 1000 * 10 + 50_000 * 0.125) / 1e6)
    assert above == pytest.approx((150_000 * 2.5 + 1000 * 15 + 50_001 * 0.25) / 1e6)


def test_a_rate_the_table_leaves_out_prices_nothing_it_is_needed_for() -> None:
    price = litellm_price(LONG_CONTEXT)  # no cache-write rate: a request that writes the cache is unmeasured
    assert request_cost(usage(1000, 10), price) is not None
    assert request_cost(usage(1000, 10, writes=5), price) is None
    assert litellm_price({"output_cost_per_token": 1e-05}) is None


def test_the_configs_own_rates_win_over_the_table_and_each_row_names_the_table_that_priced_it(tmp_path: Path) -> None:
    table = load_table("litellm@9.9.9", pinned_root(tmp_path))
    own = {"claude-sonnet-4-5": {"input": 1.0, "output": 2.0, "cache_write": 1.0, "cache_read": 0.1}}
    book = PriceBook(own=own, own_label="my-list", table=table)
    assert book["claude-sonnet-4-5"]["input"] == 1.0
    assert book["gemini-2.5-pro"]["input"] == 1.25
    assert book.get("no-such-model") is None and book.get("sample_spec") is None
    assert book.label("claude-sonnet-4-5") == "my-list"
    assert book.label("gemini-2.5-pro") == f"litellm@9.9.9 sha256:{table.pin.sha256}"


def test_a_table_that_is_not_the_pinned_bytes_is_refused_by_name(tmp_path: Path) -> None:
    root = pinned_root(tmp_path, digest="0" * 64)
    with pytest.raises(PriceTableError) as refused:
        load_table("litellm@9.9.9", root)
    assert "litellm-9.9.9.json" in str(refused.value) and "make prices" in str(refused.value)


def test_an_unpinned_release_and_a_missing_copy_say_what_to_do(tmp_path: Path) -> None:
    root = pinned_root(tmp_path)
    with pytest.raises(PriceTableError, match="records no digest for this litellm release"):
        load_table("litellm@1.0.0", root)
    (root / "tools" / "price-tables" / "litellm-9.9.9.json").unlink()
    with pytest.raises(PriceTableError, match="run make prices"):
        load_table("litellm@9.9.9", root)


def test_setup_keeps_a_wheels_table_only_when_it_has_the_pinned_digest(tmp_path: Path) -> None:
    wheel = tmp_path / "litellm-9.9.9-py3-none-any.whl"
    member = "litellm/model_prices_and_context_window_backup.json"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(member, b'{"m": {}}')
        archive.writestr("litellm/__init__.py", b"raise SystemExit('never run')")
    good = TablePin("litellm@9.9.9", "litellm", "9.9.9", member, hashlib.sha256(b'{"m": {}}').hexdigest())
    kept = keep_table(wheel, good, tmp_path / "kept.json")
    assert kept.read_bytes() == b'{"m": {}}'
    bad = TablePin("litellm@9.9.9", "litellm", "9.9.9", member, "1" * 64)
    with pytest.raises(PriceTableError, match="not kept"):
        keep_table(wheel, bad, tmp_path / "refused.json")
    assert not (tmp_path / "refused.json").exists()


def config(**prices: object) -> dict:
    document = {"agent": {"prices": prices}, "model": {"name": "claude-sonnet-4-5"}}
    validate_config(document)
    return document


def test_check_refuses_a_model_the_table_does_not_price_naming_model_and_table(tmp_path: Path) -> None:
    root = pinned_root(tmp_path)
    check_prices(config(source="litellm@9.9.9"), root)
    document = config(source="litellm@9.9.9")
    document["model"]["name"] = "claude-sonnet-4-20250514"
    document["agent"]["prices"]["usd_per_mtok"] = {}
    with pytest.raises(PriceTableError) as refused:
        check_prices(document, root)
    message = str(refused.value)
    assert "claude-sonnet-4-20250514" in message and "litellm@9.9.9" in message and "usd_per_mtok" in message
    # The config's own price for it is enough.
    document["agent"]["prices"]["usd_per_mtok"] = {
        "claude-sonnet-4-20250514": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3}
    }
    check_prices(document, root)


def test_the_pinned_litellm_release_prices_the_current_models_and_not_a_retired_one() -> None:
    """The release tools/price-tables.json pins, as setup fetched it: what the workflow tests price with."""
    table = load_table("litellm@1.110.2")
    assert litellm_price(dict(table.entries["claude-sonnet-4-5"])) == {
        "input": 3.0,
        "output": 15.0,
        "cache_write": 3.75,
        "cache_write_1h": 6.0,
        "cache_read": 0.3,
    }
    assert table.price("claude-sonnet-4-20250514") is None
    found = experiment_checks(
        {"agent": {"prices": {"source": "litellm@1.110.2", "usd_per_mtok": {}}}}, environment_checks=False
    )
    assert any("has no price for model claude-sonnet-4-20250514" in problem for problem in found.problems)


def test_without_a_source_rows_name_the_configs_table() -> None:
    prices = PriceSettings(table="anthropic-list-2025-05", tolerance_pct=1.0, usd_per_mtok={}, source=None)
    assert price_label(prices, "claude-sonnet-4-5") == "anthropic-list-2025-05"
    assert price_tables.SOURCE.fullmatch("litellm@1.110.2")
