"""The statement -> test tables of docs/conformance.md, built from the tests' docstrings.

Each conformance test names the normative statements it checks in its docstring, e.g.
``MQTT-3.1.2-24 (3.1.1) / MQTT-3.1.2-22 (5.0): ...``. A group of identifiers followed by
``(3.1.1)`` or ``(5.0)`` belongs to that version; an unannotated one to every version the test
runs at. Run ``python -m tests.conformance.statements`` to print the tables.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

__all__ = ["render_tables", "statement_map", "suite_functions"]

HERE = Path(__file__).resolve().parent
STATEMENT = re.compile(r"MQTT-(\d+[.-]\d+(?:\.\d+)*)-(\d+)((?:/-\d+)*)")
SEPARATOR = re.compile(r"[\s,/]*(?:and\s+)?")
VERSIONS = ("3.1.1", "5.0")


def suite_functions() -> dict[str, list[ast.FunctionDef]]:
    """Test functions per module of the suite (the harness excluded)."""
    found = {}
    for path in sorted(HERE.glob("test_*.py")):
        if path.name == "test_harness.py":
            continue
        tree = ast.parse(path.read_text())
        found[path.name] = [
            node
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
        ]
    return found


def _versions(module: str, node: ast.FunctionDef) -> set[str]:
    decorators = " ".join(ast.unparse(d) for d in node.decorator_list)
    if "BOTH" in decorators or ("v311" in decorators and "v5" in decorators):
        return set(VERSIONS)
    if node.name.startswith("test_v5_") or module in (
        "test_shared.py",
        "test_v5_features.py",
        "test_session.py",
    ):
        return {"5.0"}
    if "311" in node.name or module == "test_connect.py":
        return {"3.1.1"}
    return set(VERSIONS)


def statement_map() -> dict[tuple[str, str], set[str]]:
    """(statement id, version) -> names of the tests citing it."""
    rows: dict[tuple[str, str], set[str]] = defaultdict(set)
    for module, nodes in suite_functions().items():
        for node in nodes:
            doc = " ".join((ast.get_docstring(node) or "").split())
            default = _versions(module, node)
            groups: list[list[re.Match[str]]] = []
            for match in STATEMENT.finditer(doc):
                if groups and SEPARATOR.fullmatch(doc[groups[-1][-1].end() : match.start()]):
                    groups[-1].append(match)
                else:
                    groups.append([match])
            for group in groups:
                tail = doc[group[-1].end() :]
                annotated = re.match(r"\s*\((3\.1\.1|5\.0)[),:;]", tail)
                if re.match(r"\s*\(3\.1\.1 and 5\.0", tail):
                    versions = set(VERSIONS)
                elif annotated:
                    versions = {annotated.group(1)}
                else:
                    versions = default
                for match in group:
                    section = match.group(1).replace("3-8", "3.8")
                    numbers = [match.group(2), *filter(None, match.group(3).split("/-"))]
                    for number in numbers:
                        for version in versions:
                            rows[(f"MQTT-{section}-{number}", version)].add(node.name)
    return rows


def _order(statement: str) -> list[int]:
    return [int(part) for part in re.findall(r"\d+", statement)]


def _first_clause(node: ast.FunctionDef) -> str:
    doc = " ".join((ast.get_docstring(node) or "").split())
    head = doc.split(": ", 1)[0] if ": " in doc else doc.split(". ", 1)[0]
    return head.replace("|", "\\|").rstrip(".")


def render_tables() -> str:
    """The Markdown tables: one per protocol version, then tests citing sections only."""
    rows = statement_map()
    out = []
    for version in VERSIONS:
        out += [f"### MQTT {version}", "", "| Statement | Test |", "| --- | --- |"]
        for statement in sorted((s for s, v in rows if v == version), key=_order):
            tests = ", ".join(f"`{name}`" for name in sorted(rows[(statement, version)]))
            out.append(f"| {statement} | {tests} |")
        out.append("")
    cited = {name for names in rows.values() for name in names}
    out += [
        "### Tests citing sections (no numbered statement)",
        "",
        "| Test | Reference |",
        "| --- | --- |",
    ]
    for module, nodes in suite_functions().items():
        for node in nodes:
            if node.name not in cited:
                out.append(f"| `{node.name}` ({module}) | {_first_clause(node)} |")
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(render_tables())
