"""Typed job settings for unit tests: a partial config over the schema's defaults (as the workflow fills them)."""

from __future__ import annotations

from typing import Any

from skillbench.experiment.configcheck import merge
from skillbench.experiment.settings import CellSettings, cell_settings, run_control, schema_defaults


def config_with(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The schema's defaults with `overrides` merged over them (mappings key by key, as --configfile merges)."""
    return merge(schema_defaults(), overrides or {})


def job_settings(overrides: dict[str, Any] | None = None) -> CellSettings:
    """A session job's settings built from the schema's defaults with `overrides` merged over them."""
    config = config_with(overrides)
    return cell_settings(config, run_control(config["agent"], config["budget"]))
