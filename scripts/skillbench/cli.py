"""The `skillbench` command: check artifacts against their schemas, and the offline tools.

    skillbench validate KIND FILE     exit 0, or exit 1 naming the first failing path
    skillbench kinds                  list the artifact kinds
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import artifacts


def _validate(kind: str, path: Path) -> int:
    if kind not in artifacts.schema_kinds():
        print(f"unknown kind {kind!r}; known kinds: {', '.join(artifacts.schema_kinds())}", file=sys.stderr)
        return 2
    try:
        if path.suffix == ".jsonl":
            rows = artifacts.read_jsonl(path, kind)
            print(f"{path}: {len(rows)} valid {kind} row(s)")
        else:
            artifacts.read_artifact(path, kind)
            print(f"{path}: valid {kind}")
    except artifacts.ArtifactError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skillbench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="check an artifact (JSON or JSONL) against its schema")
    validate.add_argument("kind", help="artifact kind, e.g. result-row, cell-record, promotion")
    validate.add_argument("file", type=Path)
    commands.add_parser("kinds", help="list the artifact kinds")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "validate":
        return _validate(args.kind, args.file)
    if args.command == "kinds":
        print("\n".join(artifacts.schema_kinds()))
        return 0
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
