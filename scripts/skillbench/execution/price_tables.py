"""Community price tables, pinned: `agent.prices.source: litellm@<version>` prices from LiteLLM's
`model_prices_and_context_window.json` as that release of the `litellm` package ships it.

Setup (`make prices`, part of `make setup`; `python -m skillbench.execution.price_tables fetch`) downloads the
release's wheel with `pip download --no-deps --only-binary=:all:` (never an sdist, whose build would run the
package's code), takes the one JSON member out of it with `zipfile`, and keeps it under `tools/price-tables/` only
when its SHA-256 is the one `tools/price-tables.json` records for that release. Nothing of the package is
installed or imported: its PyPI account shipped a credential stealer in two releases (March 2026), and the
process that prices requests holds the provider key. Every reader checks the copy's digest again before use
(`load_table`), so a changed file is refused by name.

A table entry becomes a price in the shape of `agent.prices.usd_per_mtok` (USD per million tokens: input, output,
cache_write = five-minute writes, cache_write_1h, cache_read) plus `tiers`: the rates the table states above a
prompt size (`*_above_200k_tokens`, …), which apply to the whole request once its prompt (uncached input, cache
reads and writes) is larger (`pricing.request_cost`). A rate the table leaves out prices nothing: a request that
needs it is unmeasured.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from skillbench.base import artifacts
from skillbench.base.errors import SkillbenchError

PROJECT_ROOT = Path(__file__).resolve().parents[3]
PINS = Path("tools") / "price-tables.json"
TABLES = Path("tools") / "price-tables"
SOURCE = re.compile(r"(?P<name>[a-z][a-z0-9-]*)@(?P<version>[0-9][0-9A-Za-z.+-]*)")
MAX_TABLE_BYTES = 64 * 1024 * 1024
MAX_WHEEL_BYTES = 512 * 1024 * 1024
# LiteLLM's fields (USD per token) for each price field of the project (USD per million tokens).
LITELLM_FIELDS = {
    "input": "input_cost_per_token",
    "output": "output_cost_per_token",
    "cache_write": "cache_creation_input_token_cost",
    "cache_write_1h": "cache_creation_input_token_cost_above_1hr",
    "cache_read": "cache_read_input_token_cost",
}
_TIER = re.compile(r"input_cost_per_token_above_(?P<size>[0-9]+(?:\.[0-9]+)?)(?P<unit>[km]?)_tokens")


class PriceTableError(SkillbenchError, ValueError):
    """A price source that cannot be used: unknown, unpinned, not fetched, or not the pinned bytes."""


@dataclass(frozen=True)
class TablePin:
    """A release of a price table the project trusts: the package, the JSON member in its wheel, its digest."""

    source: str
    package: str
    version: str
    member: str
    sha256: str

    @property
    def file_name(self) -> str:
        return f"{self.package}-{self.version}.json"

    @property
    def label(self) -> str:
        """How reports and rows name the table: its source and digest."""
        return f"{self.source} sha256:{self.sha256}"


def parse_source(source: str) -> tuple[str, str]:
    match = SOURCE.fullmatch(source)
    if match is None:
        raise PriceTableError(f"agent.prices.source {source!r}: write it as <table>@<version>, e.g. litellm@1.110.2")
    return match["name"], match["version"]


def read_pins(root: Path = PROJECT_ROOT) -> dict[str, TablePin]:
    """The pinned releases `tools/price-tables.json` records, by source."""
    path = root / PINS
    document = artifacts.read_artifact(path, "price-tables")
    return {source: TablePin(source=source, **entry) for source, entry in document["tables"].items()}


def pin_of(source: str, root: Path = PROJECT_ROOT) -> TablePin:
    name, _version = parse_source(source)
    pins = read_pins(root)
    if source in pins:
        return pins[source]
    known = ", ".join(sorted(pins)) or "none"
    raise PriceTableError(
        f"agent.prices.source {source}: {root / PINS} records no digest for this {name} release (pinned: {known}); "
        "name a pinned release, or record this one's table digest there and run make prices"
    )


def table_path(pin: TablePin, root: Path = PROJECT_ROOT) -> Path:
    return root / TABLES / pin.file_name


@dataclass(frozen=True)
class PriceTable:
    """A pinned table as read: its pin, its file and its entries (model id -> the table's own fields)."""

    pin: TablePin
    path: Path
    entries: Mapping[str, Any]

    def price(self, model: str) -> dict[str, Any] | None:
        """The model's price (`usd_per_mtok` shape plus `tiers`); None when the table has no such chat model."""
        entry = self.entries.get(model)
        if not isinstance(entry, dict) or model == "sample_spec":
            return None
        return litellm_price(entry)


def _rate(entry: Mapping[str, Any], field: str) -> float | None:
    value = entry.get(field)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return round(float(value) * 1_000_000, 9)


def litellm_price(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """A LiteLLM entry as a price: the base rates, and a tier for each prompt size the table prices apart."""
    base = {name: _rate(entry, field) for name, field in LITELLM_FIELDS.items()}
    if base["input"] is None or base["output"] is None:
        return None
    price: dict[str, Any] = {name: rate for name, rate in base.items() if rate is not None}
    tiers = []
    for key in entry:
        match = _TIER.fullmatch(key)
        if match is None:
            continue
        size = float(match["size"]) * {"": 1, "k": 1_000, "m": 1_000_000}[match["unit"]]
        suffix = f"_above_{match['size']}{match['unit']}_tokens"
        tier: dict[str, Any] = {"above_tokens": int(size)}
        for name, field in LITELLM_FIELDS.items():
            rate = _rate(entry, field + suffix)
            if rate is not None:
                tier[name] = rate
        tiers.append(tier)
    if tiers:
        price["tiers"] = sorted(tiers, key=lambda tier: tier["above_tokens"])
    return price


@cache
def _load(path: Path, sha256: str) -> Mapping[str, Any]:
    data = artifacts.read_regular_file(path, MAX_TABLE_BYTES, what="price table", error=PriceTableError)
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise PriceTableError(
            f"{path}: its SHA-256 is {digest}, not the {sha256} pinned for it; the copy was changed or is of another "
            "release: delete it and run make prices"
        )
    try:
        entries = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PriceTableError(f"{path}: not valid UTF-8 JSON ({exc})") from exc
    if not isinstance(entries, dict):
        raise PriceTableError(f"{path}: not a price table (a JSON object of model ids)")
    return entries


def load_table(source: str, root: Path = PROJECT_ROOT) -> PriceTable:
    """The pinned table of `source`, read once per process and refused (naming the file) unless it is the
    pinned bytes."""
    pin = pin_of(source, root)
    path = table_path(pin, root)
    if not path.exists():
        raise PriceTableError(
            f"agent.prices.source {source}: {path} is missing; run make prices (part of make setup) to fetch it"
        )
    return PriceTable(pin=pin, path=path, entries=_load(path, pin.sha256))


# ---------------------------------------------------------------------------------------------
# Fetching (setup)


def fetch(pin: TablePin, root: Path = PROJECT_ROOT, python: str = sys.executable) -> Path:
    """Download the pinned release's wheel (no dependencies, no sdist), keep its table if it has the pinned digest."""
    target = table_path(pin, root)
    if target.exists():
        _load(target, pin.sha256)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=target.parent) as folder:
        command = [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir"]
        command += ["--quiet", "--dest", folder, f"{pin.package}=={pin.version}"]
        subprocess.run(command, check=True, stdin=subprocess.DEVNULL)
        wheels = sorted(Path(folder).glob("*.whl"))
        if len(wheels) != 1:
            raise PriceTableError(f"pip download {pin.package}=={pin.version} gave {len(wheels)} wheels, not one")
        return keep_table(wheels[0], pin, target)


def keep_table(wheel: Path, pin: TablePin, target: Path) -> Path:
    """Write the pinned member of `wheel` to `target` when it has the pinned digest; else refuse, keeping nothing."""
    data = _member(wheel, pin.member)
    digest = hashlib.sha256(data).hexdigest()
    if digest != pin.sha256:
        raise PriceTableError(
            f"{pin.member} in {wheel.name} has SHA-256 {digest}, not the {pin.sha256} pinned for {pin.source}: "
            "not kept (the release on the registry is not the one pinned)"
        )
    artifacts.write_exclusive(target, data, 0o644)
    return target


def _member(wheel: Path, member: str) -> bytes:
    if wheel.stat().st_size > MAX_WHEEL_BYTES:
        raise PriceTableError(f"{wheel}: larger than {MAX_WHEEL_BYTES} bytes")
    with zipfile.ZipFile(wheel) as archive:
        try:
            info = archive.getinfo(member)
        except KeyError as exc:
            raise PriceTableError(f"{wheel.name} holds no {member}") from exc
        if info.file_size > MAX_TABLE_BYTES:
            raise PriceTableError(f"{member} in {wheel.name} is larger than {MAX_TABLE_BYTES} bytes")
        return archive.read(info)


def fetch_all(root: Path = PROJECT_ROOT) -> Iterator[Path]:
    for pin in read_pins(root).values():
        yield fetch(pin, root)


if __name__ == "__main__":
    if sys.argv[1:] != ["fetch"]:
        raise SystemExit("usage: python -m skillbench.execution.price_tables fetch")
    try:
        for fetched in fetch_all():
            print(f"price table {fetched} (pinned digest checked)")
    except (PriceTableError, subprocess.CalledProcessError, OSError) as exc:
        raise SystemExit(f"price tables: {exc}") from exc
