"""The shared bounded no-follow reader and the UTC timestamp every artifact records."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from skillbench.base.artifacts import ArtifactError, path_kind, read_regular_file, utc_timestamp
from skillbench.grading.oracle import OracleError


def test_a_regular_file_within_the_limit_is_read_whole(tmp_path):
    path = tmp_path / "notes.md"
    path.write_bytes(b"line one\nline two\n")
    assert read_regular_file(path, 18) == b"line one\nline two\n"


def test_a_symlink_is_refused_even_to_a_readable_file(tmp_path):
    target = tmp_path / "host.txt"
    target.write_text("host secrets\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    with pytest.raises(ArtifactError, match=r"proposal must be a regular non-symlink file: .*link\.txt"):
        read_regular_file(link, 1024, what="proposal")


def test_an_oversized_file_is_refused_naming_the_file_and_the_limit(tmp_path):
    path = tmp_path / "big.bin"
    path.write_bytes(b"x" * 101)
    with pytest.raises(OracleError, match=r"big\.bin") as refused:
        read_regular_file(path, 100, error=OracleError)
    assert "101 bytes" in str(refused.value) and "limit of 100 bytes" in str(refused.value)


def test_a_missing_file_and_a_folder_are_refused(tmp_path):
    with pytest.raises(ArtifactError, match="is unavailable"):
        read_regular_file(tmp_path / "absent", 10)
    with pytest.raises(ArtifactError, match="regular non-symlink file"):
        read_regular_file(tmp_path, 10)


def test_keep_tail_reads_an_oversized_file_from_its_first_whole_line_in_the_last_bytes(tmp_path):
    path = tmp_path / "log.txt"
    path.write_bytes(b"first line\nsecond line\nthird\n")
    assert read_regular_file(path, 12, keep_tail=True) == b"third\n"


def test_inspect_refuses_before_anything_is_read(tmp_path):
    path = tmp_path / "shared.txt"
    path.write_text("x")
    path.chmod(0o644)

    def owner_only(opened: os.stat_result) -> None:
        if opened.st_mode & 0o077:
            raise ArtifactError("not owner-only")

    with pytest.raises(ArtifactError, match="not owner-only"):
        read_regular_file(path, 10, inspect=owner_only)


def test_path_kind_never_follows_a_symlink(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "folder")
    (tmp_path / "file").write_text("")
    kinds = [path_kind(tmp_path / name) for name in ("folder", "link", "file", "absent")]
    assert kinds == ["folder", "symlink", "file", "missing"]


def test_utc_timestamps_are_iso_8601_in_utc_with_a_z():
    moment = datetime(2026, 1, 31, 10, 5, 7, 123456, tzinfo=timezone(timedelta(hours=1)))
    assert utc_timestamp(moment) == "2026-01-31T09:05:07Z"
    assert utc_timestamp(moment, timespec="milliseconds") == "2026-01-31T09:05:07.123Z"
    assert utc_timestamp(moment, timespec="microseconds", for_filename=True) == "20260131T090507123456Z"


def test_the_current_time_is_the_default():
    before = datetime.now(UTC).replace(microsecond=0)
    stamp = utc_timestamp()
    after = datetime.now(UTC)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp)
    assert before <= datetime.fromisoformat(stamp.replace("Z", "+00:00")) <= after
