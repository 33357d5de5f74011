"""The house's floors (issue 37): every import in `tracking/` goes down a floor or stays in its room, every room is
placed, and no modules import each other in a circle. The floors are written once, in docs/architecture.md's
"Floors" table, which this test reads; the imports are read from the source (every import statement at any depth,
function-level ones too), so a lazy import cannot hide an arrow.

Nor does the library name the stage package (`pipelines`, the template's stages and models) in a string: the
project names its modules in params.yaml and dvc.yaml, so renaming them never breaks the library."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from conftest import REPO

LIBRARY = REPO / "tracking"
GROUND = 0
# The stage package as a word: alone, or in a module path or "module:function" spec.
STAGE_PACKAGE = re.compile(r"\bpipelines\b")


def floors() -> dict[str, int]:
    """Each room's floor, from the table under docs/architecture.md's "## Floors"."""
    text = (REPO / "docs/architecture.md").read_text()
    section = text.split("## Floors", 1)[1].split("\n## ", 1)[0]
    found = {}
    for floor, rooms in re.findall(r"^\| (\d+) \| (.+) \|$", section, flags=re.M):
        for room in re.findall(r"`([\w.]+)`", rooms):
            found[room] = int(floor)
    return found


def module_name(path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room_of(module: str) -> str:
    """`tracking.noise.policy` -> `noise`; `tracking.cli` -> `cli`; `tracking` (its `__init__`) -> `__init__`."""
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def modules() -> dict[str, set[str]]:
    """Each library module and the library modules it imports."""
    known = {module_name(path) for path in LIBRARY.rglob("*.py")}
    graph = {}
    for path in LIBRARY.rglob("*.py"):
        name = module_name(path)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                targets.add(source)
                targets.update(f"{source}.{alias.name}" for alias in node.names)
        graph[name] = {target for target in targets if target in known and target != name}
    return graph


def climbs(graph: dict[str, set[str]], placed: dict[str, int]) -> list[str]:
    """The imports that climb a floor or leave their room sideways (the ground floor's rooms excepted)."""
    found = []
    for module, targets in sorted(graph.items()):
        here = room_of(module)
        for target in sorted(targets):
            there = room_of(target)
            if there == here or here not in placed or there not in placed:
                continue  # a room the table does not place: test_every_room_is_placed_on_a_floor names it
            if placed[here] == placed[there] == GROUND:
                continue
            if placed[there] >= placed[here]:
                found.append(f"{module} (floor {placed[here]}) imports {target} (floor {placed[there]})")
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def unplaced(graph: Iterable[str], placed: dict[str, int]) -> list[str]:
    return sorted({room_of(module) for module in graph} - set(placed))


def test_every_room_is_placed_on_a_floor():
    assert not unplaced(modules(), floors()), "place these rooms in docs/architecture.md's Floors table"


def test_no_import_climbs_a_floor():
    found = climbs(modules(), floors())
    assert not found, "imports that climb a floor or cross one sideways:\n" + "\n".join(found)


def test_no_modules_import_each_other_in_a_circle():
    assert circles(modules()) == []


def test_the_checks_catch_a_climb_a_sideways_arrow_and_a_circle():
    """The same checks on a made-up house: they can fail."""
    placed = {"noise": 3, "training": 5, "compute": 3, "env": 0, "errors": 0}
    graph = {
        "tracking.noise.policy": {"tracking.training.fitting", "tracking.env"},
        "tracking.compute.pool": {"tracking.noise.policy"},
        "tracking.training.fitting": {"tracking.noise.policy"},
        "tracking.env": {"tracking.errors"},
        "tracking.errors": set(),
    }
    assert climbs(graph, placed) == [
        "tracking.compute.pool (floor 3) imports tracking.noise.policy (floor 3)",
        "tracking.noise.policy (floor 3) imports tracking.training.fitting (floor 5)",
    ]
    assert circles(graph) == [["tracking.noise.policy", "tracking.training.fitting"]]
    assert unplaced({"tracking.repeats.kept": set()}, placed) == ["repeats"]


def stage_package_strings(source: str) -> list[str]:
    """The string constants of `source` that name the stage package, docstrings left out (they, and comments,
    may say where the template's stages live); the literal parts of an f-string count."""
    tree = ast.parse(source)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(first.value)
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node not in docstrings
        and STAGE_PACKAGE.search(node.value)
    ]


def test_the_library_never_names_the_stage_package():
    found = {
        str(path.relative_to(REPO)): named
        for path in sorted(LIBRARY.rglob("*.py"))
        if (named := stage_package_strings(path.read_text()))
    }
    assert not found, "the library names the stage package; let params.yaml or dvc.yaml name it:\n" + str(found)


def test_the_stage_package_check_catches_a_name_and_spares_docstrings():
    """The check on the strings the library once held (tracking/layout.py, tracking/config/params.py): it can fail."""
    source = '''"""The stages in `pipelines/` read these paths."""
STAGE_PACKAGE = "pipelines"
BUILTIN_BUILDERS = f"{STAGE_PACKAGE}.models:{{}}"


def default():
    """`pipelines.models:small_cnn`, named in a docstring."""
    return "pipelines.models:small_cnn"  # pipelines.models, named in a comment
'''
    assert stage_package_strings(source) == ["pipelines", "pipelines.models:small_cnn"]


# The house's limit on a module's length: a module past it holds more than one thing, and is split along them.
MAX_MODULE_LINES = 400


def long_modules(paths: Iterable, limit: int = MAX_MODULE_LINES) -> list[str]:
    """The modules of `paths` longer than `limit` lines, each with its count."""
    found = []
    for path in sorted(paths):
        count = len(path.read_text().splitlines())
        if count > limit:
            found.append(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}: {count} lines")
    return found


def test_no_module_passes_400_lines():
    found = long_modules([*LIBRARY.rglob("*.py"), *(REPO / "pipelines").rglob("*.py")])
    assert not found, f"modules over {MAX_MODULE_LINES} lines; split each along what it holds:\n" + "\n".join(found)


def test_the_length_check_catches_a_long_module(tmp_path):
    """The same check on made-up modules at the limit and one past it: it can fail."""
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert long_modules([tmp_path / "short.py", tmp_path / "long.py"]) == [f"{tmp_path / 'long.py'}: 401 lines"]
