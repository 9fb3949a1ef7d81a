"""No function of ragray over 80 lines (nested functions count toward the one they sit in): a
longer one is several concerns, and a reader loses the thread."""

import ast

from tests.architecture.imports import PACKAGE

MAX_LINES = 80


def test_no_function_over_80_lines():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_LINES:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}: {lines} lines")
    assert not long, f"functions over {MAX_LINES} lines:\n" + "\n".join(long)
