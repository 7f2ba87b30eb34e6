"""A small code index for the demo package, served over MCP stdio (official MCP Python SDK, `mcp` 2.x).

Tools (plain-text results):

* `find_definition(name)`: where a function, class or module-level name is defined, with its signature;
* `list_callers(name)`: every call site of a function or method name, as `path:line  enclosing function`;
* `index_stats()`: how many Python files and definitions the index holds.

The index reads the repository at `INVENTORY_INDEX_ROOT` (default: the working directory), which skillbench
mounts read-only. It never writes anything. An unknown name is an error result (`isError`), so a harness can
count it as a semantic error.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

ROOT = Path(os.environ.get("INVENTORY_INDEX_ROOT", ".")).resolve()
SKIPPED = {".git", ".claude", "__pycache__", "docs"}
MAX_FILES = 2000

server = MCPServer(
    "inventory-index",
    instructions="Code index of this repository: find where a symbol is defined and who calls it.",
)


def python_files() -> list[Path]:
    found: list[Path] = []
    for directory, subdirs, files in os.walk(ROOT):
        subdirs[:] = sorted(name for name in subdirs if name not in SKIPPED)
        found += [Path(directory) / name for name in sorted(files) if name.endswith(".py")]
        if len(found) > MAX_FILES:
            break
    return found[:MAX_FILES]


def parsed() -> list[tuple[str, ast.Module]]:
    modules = []
    for path in python_files():
        try:
            modules.append((path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8"))))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
    return modules


def _signature(node: ast.AST) -> str:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"def {node.name}({ast.unparse(node.args)})"
    if isinstance(node, ast.ClassDef):
        return f"class {node.name}"
    return ast.unparse(node).splitlines()[0]


@server.tool(
    description="Find where a function, class, method or module-level name is defined in the repository.",
    structured_output=False,
)
def find_definition(name: str) -> str:
    hits = []
    for relative, module in parsed():
        for node in ast.walk(module):
            defined = (
                getattr(node, "name", None)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                else None
            )
            if defined is None and isinstance(node, ast.Assign) and node in module.body:
                targets = [target.id for target in node.targets if isinstance(target, ast.Name)]
                defined = name if name in targets else None
            if defined == name:
                hits.append(f"{relative}:{node.lineno}  {_signature(node)}")
    if not hits:
        raise ToolError(f"no definition of {name!r} in the repository")
    return "\n".join(hits)


@server.tool(
    description="List every call site of a function or method name, with the enclosing function.",
    structured_output=False,
)
def list_callers(name: str) -> str:
    hits = []
    for relative, module in parsed():
        for outer in ast.walk(module):
            if not isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                continue
            body = outer.body
            for statement in body:
                if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                for node in ast.walk(statement):
                    if isinstance(node, ast.Call):
                        called = (
                            node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                        )
                        if called == name:
                            where = outer.name if not isinstance(outer, ast.Module) else "<module>"
                            hits.append(f"{relative}:{node.lineno}  in {where}")
    if not hits:
        return f"no calls to {name!r} found"
    return "\n".join(sorted(set(hits)))


@server.tool(description="How many Python files and definitions the index holds.", structured_output=False)
def index_stats() -> str:
    modules = parsed()
    definitions = sum(
        1
        for _relative, module in modules
        for node in ast.walk(module)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    )
    return f"{len(modules)} Python files, {definitions} definitions"


if __name__ == "__main__":
    server.run("stdio")
