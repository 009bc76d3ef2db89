"""The import contract of the project packages, checked on the source (ast, no imports executed).

Every import statement of every .py file under the project packages counts: top level, inside functions
and classes, under `if TYPE_CHECKING:`. The rules:

- layering: each package imports none of the packages listed for it in FORBIDDEN;
- no import cycle between project modules (an import inside a function is an edge too);
- no underscore-prefixed name (or module) imported from another top-level package;
- stats/ is pure kernels: it imports only numpy, scipy, pandas and the standard library's pure helpers,
  and calls no file reader or writer; matplotlib is imported by the one plot helper
  (pipelines/reporting/plots.py) only.
- inside pipelines/, every module sits in one layer of PIPELINES_LAYERS (the commands on top, the shipped
  paths at the bottom) and imports only its own layer and those below it;
- benchmarks/ imports nothing of tests/ (what both need is product code, or benchmarks/shared.py).

A failing assertion lists every offending `file:line`.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("ccrs_eval", "pipelines", "tasks", "judges", "retrievers", "stats", "infra")
# ccrs_eval is the Python API: the top, above pipelines; nothing of the project imports it.
FORBIDDEN: dict[str, frozenset[str]] = {
    "stats": frozenset({"pipelines", "tasks", "judges", "retrievers", "infra", "ccrs_eval"}),
    "retrievers": frozenset({"judges", "tasks", "pipelines", "ccrs_eval"}),
    "judges": frozenset({"retrievers", "tasks", "pipelines", "ccrs_eval"}),
    "infra": frozenset({"tasks", "judges", "pipelines", "retrievers", "stats", "ccrs_eval"}),
    "tasks": frozenset({"pipelines", "ccrs_eval"}),
    "pipelines": frozenset({"ccrs_eval"}),
}


@dataclass(frozen=True)
class Import:
    """One imported thing: `target` is the dotted module (or module.name) as written, made absolute."""

    path: str  # file relative to the repository
    line: int
    importer: str  # dotted module of the file
    target: str  # dotted module the statement names (`from a.b import c` -> "a.b")
    names: tuple[str, ...]  # names taken from it (`from a.b import c, d` -> ("c", "d")); () for `import a.b`

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def statement(self) -> str:
        return f"from {self.target} import {', '.join(self.names)}" if self.names else f"import {self.target}"


def module_name(path: Path, root: Path = REPO) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files(root: Path = REPO, packages: tuple[str, ...] = PACKAGES) -> list[Path]:
    files = []
    for package in packages:
        files += [p for p in sorted((root / package).rglob("*.py")) if "__pycache__" not in p.parts]
    return files


def imports_of(path: Path, root: Path = REPO) -> list[Import]:
    """Every import statement in the file, wherever it is (module, function, class, conditional)."""
    module = module_name(path, root)
    is_package = path.name == "__init__.py"
    relative = str(path.relative_to(root))
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=relative)):
        if isinstance(node, ast.Import):
            found += [Import(relative, node.lineno, module, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node.module or "", node.level, module, is_package)
            found.append(Import(relative, node.lineno, module, target, tuple(a.name for a in node.names)))
    return sorted(found, key=lambda i: (i.path, i.line))


def _absolute(target: str, level: int, module: str, is_package: bool) -> str:
    if not level:
        return target
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


@cache
def project_modules(root: Path = REPO) -> frozenset[str]:
    return frozenset(module_name(p, root) for p in source_files(root))


def targets(imp: Import, modules: frozenset[str]) -> list[str]:
    """The project modules an import makes this module depend on (`from pkg import sub` -> pkg.sub)."""
    if imp.target.split(".")[0] not in PACKAGES:
        return []
    found = set()
    for name in imp.names or ("",):
        candidate = f"{imp.target}.{name}" if name else imp.target
        if candidate in modules:
            found.add(candidate)
            continue
        prefix = imp.target  # longest project module that is a prefix of the target (a.b.c -> a.b)
        while prefix and prefix not in modules:
            prefix = prefix.rpartition(".")[0]
        if prefix:
            found.add(prefix)
    return sorted(found)


def top(module: str) -> str:
    return module.split(".")[0]


def all_imports(root: Path = REPO, packages: tuple[str, ...] = PACKAGES) -> list[Import]:
    return [imp for path in source_files(root, packages) for imp in imports_of(path, root)]


# --- the rules ------------------------------------------------------------------------------------------


def layering_violations(imports: list[Import]) -> list[str]:
    found = []
    for imp in imports:
        layer, other = top(imp.importer), top(imp.target)
        if other in FORBIDDEN.get(layer, ()):
            found.append(f"{imp.where}: {layer}/ must not import {other}/ ({imp.statement})")
    return found


def cycle_violations(imports: list[Import], modules: frozenset[str]) -> list[str]:
    graph: dict[str, set[str]] = defaultdict(set)
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for imp in imports:
        for target in targets(imp, modules):
            if target != imp.importer:
                graph[imp.importer].add(target)
                edges[(imp.importer, target)].append(imp.where)
    found = []
    for component in strongly_connected_components(graph):
        if len(component) > 1:
            inside = sorted(f"{where} ({a} -> {b})" for (a, b), wheres in edges.items()
                            if a in component and b in component for where in wheres)
            found.append(f"import cycle between {', '.join(sorted(component))}: " + "; ".join(inside))
    return found


def strongly_connected_components(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (no recursion limit on long chains)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    nodes = sorted(set(graph) | {t for ts in graph.values() for t in ts})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    components.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_name_violations(imports: list[Import]) -> list[str]:
    found = []
    for imp in imports:
        if top(imp.target) not in PACKAGES or top(imp.target) == top(imp.importer):
            continue
        private = [part for part in imp.target.split(".")[1:] if _private(part)]
        private += [name for name in imp.names if _private(name)]
        if private:
            found.append(f"{imp.where}: private {', '.join(private)} of {top(imp.target)}/ used from "
                         f"{top(imp.importer)}/ ({imp.statement})")
    return found


def private_attribute_violations(root: Path = REPO) -> list[str]:
    """`import infra.serving` then `infra.serving._helper(...)`: a private name reached through a module."""
    modules = project_modules(root)
    found = []
    for path in source_files(root):
        importer = module_name(path, root)
        tree = ast.parse(path.read_text())
        aliases: dict[str, str] = {}  # local (dotted) name -> project module of another package
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                bound = {alias.asname or alias.name: alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                target = _absolute(node.module or "", node.level, importer, path.name == "__init__.py")
                bound = {alias.asname or alias.name: f"{target}.{alias.name}" for alias in node.names}
            else:
                continue
            aliases.update({name: module for name, module in bound.items()
                            if module in modules and top(module) != top(importer)})
        if not aliases:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr) and _dotted(node.value) in aliases:
                where = f"{path.relative_to(root)}:{node.lineno}"
                found.append(f"{where}: private {node.attr} of {aliases[_dotted(node.value)]} used from "
                             f"{top(importer)}/")
    return found


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _report(rule: str, violations: list[str]) -> str:
    return f"{len(violations)} {rule} violation(s):\n" + "\n".join(violations)


# --- the tests ------------------------------------------------------------------------------------------


def test_every_package_is_scanned():
    imports = all_imports()
    assert {top(m) for m in project_modules()} == set(PACKAGES)
    assert any(imp.importer == "pipelines.cli" for imp in imports)


def test_layering():
    violations = layering_violations(all_imports())
    assert not violations, _report("layering", violations)


def test_no_import_cycles():
    violations = cycle_violations(all_imports(), project_modules())
    assert not violations, _report("import cycle", violations)


def test_no_private_names_across_packages():
    violations = private_name_violations(all_imports()) + private_attribute_violations()
    assert not violations, _report("private cross-package import", violations)


# Inside pipelines/, top first: each layer is fnmatch patterns of dotted module names (a package's modules
# named with ".*"; a module named exactly sits in that layer, else in the first whose pattern matches). A
# module imports its own layer and those below, never one above; what two layers share lives in the lower
# (the paths the run config and the calibration gate both read are pipelines/resources.py; the GQM question
# types the test-set tool and the report share are the report's). The run extensions are plug-ins: above
# the tools and the config they use, while the core reads them through their registry, low in the order
# (the registry imports each extension module by name, no import statement). The tools' packages (the gate,
# planning, labeling, load testing, the paper tools) sit in the tools layer, each importing its own modules.
Layers = tuple[tuple[str, tuple[str, ...]], ...]  # (name, module patterns), top first
PIPELINES_LAYERS: Layers = (
    ("commands", ("pipelines", "pipelines.cli", "pipelines.*_cmd")),
    ("api", ("pipelines.evaluate",)),  # ccrs_eval.evaluate() and `ccrs evaluate`
    ("pipeline", ("pipelines.pipeline",)),
    ("extensions", ("pipelines.extensions.*",)),
    ("tools", ("pipelines.tools", "pipelines.tools.*")),
    ("options", ("pipelines.options",)),
    ("config", ("pipelines.config",)),
    ("extension registry", ("pipelines.extensions", "pipelines.extensions.registry")),
    ("option schema", ("pipelines.option_schema",)),  # imports nothing of the project
    ("reporting", ("pipelines.reporting", "pipelines.reporting.*")),
    ("resources", ("pipelines.resources",)),
)


def pipelines_layer(module: str, layers: Layers = PIPELINES_LAYERS) -> int | None:
    """The rank of the module's layer (0 = top), None where no pattern names it."""
    exact = [rank for rank, (_, patterns) in enumerate(layers) if module in patterns]
    matching = [rank for rank, (_, patterns) in enumerate(layers)
                if any(fnmatchcase(module, pattern) for pattern in patterns)]
    return (exact or matching or [None])[0]


def unplaced_modules(modules: frozenset[str], layers: Layers = PIPELINES_LAYERS) -> list[str]:
    return sorted(m for m in modules if top(m) == "pipelines" and pipelines_layer(m, layers) is None)


def upward_import_violations(imports: list[Import], modules: frozenset[str],
                             layers: Layers = PIPELINES_LAYERS) -> list[str]:
    found = []
    for imp in imports:
        rank = pipelines_layer(imp.importer, layers) if top(imp.importer) == "pipelines" else None
        for target in targets(imp, modules) if rank is not None else ():
            above = pipelines_layer(target, layers) if top(target) == "pipelines" else None
            if above is not None and above < rank:
                found.append(f"{imp.where}: {layers[rank][0]} ({imp.importer}) imports {target} of the "
                             f"layer {layers[above][0]} above it ({imp.statement})")
    return found


def test_every_module_of_pipelines_sits_in_a_layer():
    unplaced = unplaced_modules(project_modules())
    assert not unplaced, f"modules of pipelines/ in no layer of PIPELINES_LAYERS (place them): {unplaced}"


def test_no_import_inside_pipelines_points_up():
    violations = upward_import_violations(all_imports(packages=("pipelines",)), project_modules())
    assert not violations, _report("upward import inside pipelines/", violations)


def benchmark_test_imports(root: Path = REPO) -> list[str]:
    """Imports of tests/ from benchmarks/ (a benchmark runs as a script, on the product alone)."""
    imports = [imp for path in sorted((root / "benchmarks").rglob("*.py")) for imp in imports_of(path, root)]
    return [f"{imp.where}: {imp.statement}" for imp in imports if top(imp.target) == "tests"]


def test_no_benchmark_imports_the_tests():
    violations = benchmark_test_imports()
    assert not violations, _report("benchmark importing tests/", violations)


# pipelines/tools/ holds the cores of the commands that are not stages, one job a module: none grows past
# TOOL_MODULE_LINES; a tool that would is a package of its own, one module a job (the gate, planning, ...).
TOOL_MODULE_LINES = 400
TOOLS = "pipelines/tools"


def oversized_modules(root: Path = REPO, folder: str = TOOLS, limit: int = TOOL_MODULE_LINES) -> list[str]:
    sizes = {path: len(path.read_text().splitlines()) for path in sorted((root / folder).rglob("*.py"))
             if "__pycache__" not in path.parts}
    return [f"{path.relative_to(root)}: {lines} lines (at most {limit})" for path, lines in sizes.items()
            if lines > limit]


def test_no_tool_module_is_over_400_lines():
    violations = oversized_modules()
    assert not violations, _report("oversized tool module", violations)


# The nightly gate decides apart from what it fetches and how it says it (as MLflow's
# models/evaluation/validation.py keeps its threshold check apart from the fetch): its decide module is pure,
# importing neither MLflow nor the webhook client nor the gate's other parts.
GATE_DECIDE = "pipelines.tools.gate.decide"
GATE_DECIDE_MAY_NOT = frozenset({"mlflow", "httpx", "pipelines.tools.gate", "pipelines.tools.gate.fetch",
                                 "pipelines.tools.gate.alert"})


def impure_gate_imports(imports: list[Import], module: str = GATE_DECIDE) -> list[str]:
    return [f"{imp.where}: {imp.statement}" for imp in imports if imp.importer == module
            and (imp.target in GATE_DECIDE_MAY_NOT or top(imp.target) in GATE_DECIDE_MAY_NOT)]


def test_the_gate_decides_with_no_mlflow_and_no_fetch():
    assert GATE_DECIDE in project_modules()
    violations = impure_gate_imports(all_imports(packages=("pipelines",)))
    assert not violations, _report("gate decision importing its fetch or alert", violations)


# The Ray stages of tasks/: each reads its inputs from files (RunLayout) and none imports another; what
# two stages share lives below them (retrievers/, judges/, infra/) or in tasks/runtime/ (the stage runner,
# the run layout, the fan-out, the judge session). Reporting (the track step's MLflow logging, plots, the
# verdict, the GQM report) is pipelines/reporting/, which no stage imports.
PIPELINE = REPO / "pipelines" / "pipeline.py"


def core_stage_modules() -> frozenset[str]:
    """The modules of tasks/ whose stage functions (`run_*`) the pipeline composes."""
    return frozenset(imp.target for imp in imports_of(PIPELINE) if top(imp.target) == "tasks"
                     and any(name.startswith("run_") for name in imp.names))


def extension_stage_modules() -> frozenset[str]:
    """The module of tasks/ that runs each registered run extension's stage (pipelines/extensions/)."""
    from pipelines.extensions import extensions

    return frozenset(extension.stage.code[0] for extension in extensions().values()
                     if extension.stage is not None and top(extension.stage.code[0]) == "tasks")


def stage_modules() -> frozenset[str]:
    return core_stage_modules() | extension_stage_modules()


def test_the_stage_modules_come_from_the_pipeline_and_the_extension_registry():
    """No hand list: the pipeline's core stages and the extensions' stages, among them every module of
    tasks/ that writes a stage folder (calls tasks.runtime.stage.run_stage)."""
    writers = {module_name(path) for path in source_files(REPO, ("tasks",))
               if module_name(path) != "tasks.runtime.stage" and _calls_run_stage(path)}
    assert {"tasks.judge", "tasks.reduce", "tasks.generate", "tasks.outputs"} <= core_stage_modules()
    assert {"tasks.calibration", "tasks.bias_probes"} <= extension_stage_modules()
    unknown = writers - stage_modules()
    assert not unknown, f"modules writing a stage folder, neither composed nor registered: {sorted(unknown)}"


def test_every_module_of_tasks_defines_a_stage():
    """tasks/ holds the Ray stages only: each module directly in it is a stage the pipeline composes or a
    registered extension runs; what they share is tasks/runtime/ (which runs no stage of its own), and
    reporting (verdict, tables, plots, MLflow, the GQM report) is pipelines/reporting/."""
    top_level = {module_name(path) for path in sorted((REPO / "tasks").glob("*.py"))
                 if path.stem != "__init__"}
    not_stages = top_level - stage_modules()
    assert not not_stages, f"modules of tasks/ that define no stage (move them): {sorted(not_stages)}"
    runtime_runners = [module_name(path) for path in source_files(REPO, ("tasks",))
                       if "runtime" in path.parts and module_name(path) != "tasks.runtime.stage"
                       and _calls_run_stage(path)]
    assert not runtime_runners, f"tasks/runtime/ modules that run a stage: {runtime_runners}"


def _calls_run_stage(path: Path) -> bool:
    return any(isinstance(node, ast.Call) and getattr(node.func, "id", None) == "run_stage"
               for node in ast.walk(ast.parse(path.read_text())))


def stage_edges() -> dict[tuple[str, str], list[str]]:
    modules, stages = project_modules(), stage_modules()
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for imp in all_imports():
        if imp.importer in stages:
            for target in targets(imp, modules):
                if target in stages - {imp.importer}:
                    edges[(imp.importer, target)].append(f"{imp.where}: {imp.importer} imports the stage "
                                                         f"{target} ({imp.statement})")
    return edges


def test_no_stage_imports_another_stage():
    violations = [line for lines in stage_edges().values() for line in lines]
    assert not violations, _report("stage importing a stage", violations)


def test_one_judge_session_and_no_caller_of_its_internals():
    """Every judging path goes through tasks.runtime.judge_session.JudgeSession: no module outside it
    reaches for
    the session's internals (the in-process asker, the evaluate callable, the restore of cached records)."""
    session = "tasks.runtime.judge_session"
    internals = {"_Evaluate", "_restored", "ask_here", "asked_once", "twin_judgments"}
    violations = [f"{imp.where}: {imp.statement}" for imp in all_imports()
                  if imp.importer != session and imp.target == session and internals & set(imp.names)]
    assert not violations, _report("judge session internals used outside it", violations)


def test_no_command_imports_the_cli_back():
    """pipelines/cli.py imports the commands; a command importing it back is a loop (log paths and the
    console live in infra/console.py)."""
    violations = [f"{imp.where}: {imp.statement}" for imp in all_imports()
                  if imp.target == "pipelines.cli" and imp.importer != "pipelines.cli"]
    assert not violations, _report("command importing pipelines.cli", violations)


# stats/ holds pure kernels: arrays (or frames) in, typed results out. Reading scores and hypotheses files
# and writing stats.json is the reduce stage's side (tasks/reduce.py, tasks/reduce.py), tables and
# plots its caller's (pipelines/reporting/, pipelines/reporting/plots.py); matplotlib is set up in
# pipelines/reporting/plots.py only.
STATS_MAY_IMPORT = frozenset({"__future__", "collections", "dataclasses", "enum", "functools", "itertools",
                              "math", "string", "typing", "numpy", "scipy", "pandas", "stats"})
FILE_IO_CALLS = frozenset({
    "open", "read_text", "read_bytes", "write_text", "write_bytes", "mkdir", "savefig",  # builtins, pathlib
    "read_csv", "read_parquet", "read_json", "read_table", "read_excel", "read_pickle", "read_feather",
    "to_csv", "to_parquet", "to_json", "to_excel", "to_pickle", "to_feather", "to_markdown",  # pandas
    "load", "loadtxt", "genfromtxt", "fromfile", "save", "savez", "savetxt", "tofile",  # numpy
})
PLOT_HELPER = "pipelines.reporting.plots"


def stats_import_violations(imports: list[Import]) -> list[str]:
    return [f"{imp.where}: stats/ imports {top(imp.target)} ({imp.statement}); its kernels take only "
            f"{', '.join(sorted(STATS_MAY_IMPORT - {'stats'}))}"
            for imp in imports if top(imp.importer) == "stats" and top(imp.target) not in STATS_MAY_IMPORT]


def file_io_violations(root: Path = REPO, package: str = "stats") -> list[str]:
    """Calls of a file reader or writer (`open(...)`, `x.to_csv(...)`, `pd.read_parquet(...)`, ...)."""
    found = sorted((path.relative_to(root), node.lineno, _called_name(node.func))
                   for path in source_files(root, (package,))
                   for node in ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, ast.Call) and _called_name(node.func) in FILE_IO_CALLS)
    return [f"{path}:{line}: {package}/ calls {call}(...), file I/O" for path, line, call in found]


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def matplotlib_violations(imports: list[Import]) -> list[str]:
    return [f"{imp.where}: {imp.statement} outside the plot helper {PLOT_HELPER} (use its figure_file)"
            for imp in imports if top(imp.target) == "matplotlib" and imp.importer != PLOT_HELPER]


def test_stats_kernels_import_no_io_library():
    """No pydantic, yaml, pyarrow, matplotlib, json, pathlib (or anything else) in stats/."""
    violations = stats_import_violations(all_imports())
    assert not violations, _report("stats/ import", violations)


def test_stats_kernels_read_and_write_no_file():
    violations = file_io_violations()
    assert not violations, _report("stats/ file I/O", violations)


def test_matplotlib_is_set_up_in_one_place():
    violations = matplotlib_violations(all_imports())
    assert not violations, _report("matplotlib import", violations)


# --- the checker checks itself on a small fake project ------------------------------------------------


def _fake_project(tmp_path: Path) -> Path:
    files = {
        "stats/__init__.py": "",
        "stats/core.py": "def f():\n    from pipelines.cli import main\n    return main\n",
        "pipelines/__init__.py": "",
        "pipelines/cli.py": "from stats import core\nfrom infra.serving import _hidden, public\n"
                            "import infra.serving\nx = infra.serving._other\n",
        "infra/__init__.py": "",
        "infra/serving.py": "from . import helper\nfrom .helper import _ok\n",
        "infra/helper.py": "import infra.serving\n",
        "tasks/__init__.py": "",
        "judges/__init__.py": "",
        "retrievers/__init__.py": "",
    }
    return _write_project(tmp_path, files)


def _write_project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_checker_finds_function_level_imports_cycles_and_private_names(tmp_path):
    root = _fake_project(tmp_path)
    imports = all_imports(root)
    modules = project_modules(root)
    assert layering_violations(imports) == [
        "stats/core.py:2: stats/ must not import pipelines/ (from pipelines.cli import main)"]
    cycles = cycle_violations(imports, modules)
    assert len(cycles) == 2
    assert any("infra.helper, infra.serving" in c and "infra/helper.py:1" in c for c in cycles)
    assert any("pipelines.cli, stats.core" in c and "stats/core.py:2" in c for c in cycles)
    assert private_name_violations(imports) == [
        "pipelines/cli.py:2: private _hidden of infra/ used from pipelines/ "
        "(from infra.serving import _hidden, public)"]
    assert private_attribute_violations(root) == [
        "pipelines/cli.py:4: private _other of infra.serving used from pipelines/"]


def test_checker_finds_io_in_stats_and_matplotlib_outside_the_plot_helper(tmp_path):
    files = {
        "stats/__init__.py": "",
        "stats/kernel.py": "import numpy as np\nfrom collections.abc import Sequence\nfrom . import other\n"
                           "def f(x):\n    return np.asarray(x)\n",
        "stats/other.py": "import yaml\nimport pandas as pd\ndef g(p):\n    pd.read_csv(p).to_parquet(p)\n"
                          "    open(p)\n    return pd.DataFrame()\n",
        "tasks/__init__.py": "",
        "pipelines/reporting/plots.py": "import matplotlib\n",
        "tasks/other.py": "from matplotlib import pyplot\n",
    }
    imports = all_imports(_write_project(tmp_path, files), ("stats", "tasks"))
    assert [v.split(" (")[0] for v in stats_import_violations(imports)] == [
        "stats/other.py:1: stats/ imports yaml"]
    calls = ((4, "read_csv"), (4, "to_parquet"), (5, "open"))
    assert file_io_violations(tmp_path) == [f"stats/other.py:{line}: stats/ calls {call}(...), file I/O"
                                            for line, call in calls]
    assert [v.split(" outside")[0] for v in matplotlib_violations(imports)] == [
        "tasks/other.py:1: from matplotlib import pyplot"]


def test_checker_finds_upward_imports_in_pipelines_and_benchmarks_importing_tests(tmp_path):
    files = {
        "pipelines/__init__.py": "",
        "pipelines/run_cmd.py": "from pipelines.reporting import verdict\n",
        "pipelines/stray.py": "",
        "pipelines/reporting/__init__.py": "",
        "pipelines/reporting/verdict.py": "def f():\n    from pipelines.tools.gate import decide\n",
        "pipelines/tools/__init__.py": "",
        "pipelines/tools/gate.py": "from pipelines.reporting.verdict import f\ndecide = f\n",
        "pipelines/extensions/__init__.py": "",
        "pipelines/extensions/registry.py": "from pipelines.reporting.verdict import f\n",
        "pipelines/extensions/gate.py": "from pipelines.tools.gate import decide\n",
        "benchmarks/bench_x.py": "from timing import best\nfrom tests.conftest import sample_field\n",
    }
    root = _write_project(tmp_path, files)
    layers = (("commands", ("pipelines", "pipelines.*_cmd")), ("extensions", ("pipelines.extensions.*",)),
              ("tools", ("pipelines.tools", "pipelines.tools.*")),
              ("registry", ("pipelines.extensions", "pipelines.extensions.registry")),
              ("reporting", ("pipelines.reporting", "pipelines.reporting.*")))
    modules = frozenset(module_name(path, root) for path in source_files(root, ("pipelines",)))
    assert unplaced_modules(modules, layers) == ["pipelines.stray"]
    assert [pipelines_layer(m, layers) for m in ("pipelines.extensions.gate", "pipelines.extensions.registry",
                                                 "pipelines.extensions", "pipelines.run_cmd")] == [1, 3, 3, 0]
    assert upward_import_violations(all_imports(root, ("pipelines",)), modules, layers) == [
        "pipelines/reporting/verdict.py:2: reporting (pipelines.reporting.verdict) imports "
        "pipelines.tools.gate of the layer tools above it (from pipelines.tools.gate import decide)"]
    assert benchmark_test_imports(root) == [
        "benchmarks/bench_x.py:2: from tests.conftest import sample_field"]


def test_checker_finds_oversized_tool_modules_and_an_impure_gate_decision(tmp_path):
    files = {"pipelines/tools/small.py": "x = 1\n" * 3, "pipelines/tools/big/part.py": "x = 1\n" * 5,
             "pipelines/tools/gate/decide.py": "import numpy\nfrom mlflow.tracking import MlflowClient\n"
                                               "def f():\n    from pipelines.tools.gate import fetch\n"}
    root = _write_project(tmp_path, files)
    assert oversized_modules(root, limit=4) == ["pipelines/tools/big/part.py: 5 lines (at most 4)"]
    assert impure_gate_imports(all_imports(root, ("pipelines",))) == [
        "pipelines/tools/gate/decide.py:2: from mlflow.tracking import MlflowClient",
        "pipelines/tools/gate/decide.py:4: from pipelines.tools.gate import fetch"]


# --- one flag name for the LLM endpoint across commands ---------------------------------------------------

ENDPOINT_DESTS = {"base_url", "llm_base_url"}


def _actions(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)
        else:
            yield action


def test_every_command_takes_the_llm_endpoint_as_llm_base_url():
    import argparse
    import importlib

    from pipelines.cli import SUBCOMMANDS

    missing = []
    for name, (module_name, _) in SUBCOMMANDS.items():
        parser = argparse.ArgumentParser(prog=f"ccrs {name}")
        importlib.import_module(module_name).add_arguments(parser, name)
        for action in _actions(parser):
            shown = action.help != argparse.SUPPRESS  # not an old spelling kept one release
            if action.dest in ENDPOINT_DESTS and "--llm-base-url" not in action.option_strings and shown:
                missing.append(f"ccrs {name}: {'/'.join(action.option_strings)} (dest {action.dest})")
    assert not missing, "commands taking an LLM endpoint without --llm-base-url:\n" + "\n".join(missing)
