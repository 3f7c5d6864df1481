"""The import layering of docs/architecture.md: rules ← game ← store ← app ← api and
workers, and the web pages beside the API, each package importing only from the layers
below it (and the configuration), the API and the workers never from each other, the web
pages only the few modules of the API they share with it, and the API never the web pages
(but for the app factory, which serves both). Checked on the source (every import
statement, those inside functions too), so that a new upward import fails here and not in
review."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: What each layer may import of ours (itself included). The entry points (the CLI,
#: ``ddz serve``, gunicorn's settings and worker class) wire everything and may import all.
ALLOWED = {
    "config": {"config"},
    "rules": {"rules"},
    "game": {"game", "rules"},
    "store": {"store", "game", "rules", "config"},
    "app": {"app", "store", "game", "rules", "config"},
    "api": {"api", "app", "store", "game", "rules", "config"},
    "web": {"web", "api", "app", "store", "game", "rules", "config"},
    "workers": {"workers", "app", "store", "game", "rules", "config"},
}
ENTRY = "entry"
#: The entry points, by module: named one by one, so that a new package under service/ is
#: given a layer instead of escaping the check as an entry point.
#: The process's own tools belong with them: the census reads every layer's caches, for
#: the entry points that start it.
ENTRIES = {"cli", "serve", "embedded", "gunicorn_conf", "gunicorn_worker", "census", "memory"}
#: The app factory (``service.api.create_app``) and the WSGI module that makes its app
#: (``service.api.wsgi:app``, as deployments name it): in the API's package, they serve the
#: API and the web pages from one app, and are entry points as importers, not as imported.
FACTORY = {"service.api", "service.api.wsgi"}
#: What the web pages may use of the API (docs/architecture.md): its problem documents,
#: the process's services (its connections), its documents of a match (a hand's public
#: replay, which the replay's page shows) and its JSON rules (which the page of problems
#: states). Its blueprints, schemas and routing are the contract's, and none of the pages'
#: business.
SHARED_WITH_WEB = {
    "service.api.problems",
    "service.api.services",
    "service.api.documents",
    "service.api.encoding",
}
#: What the store may not use of the game, although it stores the game's events and folds
#: them into states: anything that decides (the store decides nothing).
DECIDING = {
    "service.game.decider",
    "service.game.table_decider",
    "service.game.actions",
    "service.game.record",
    "service.game.policies",
    "service.game.bot",
    "service.game.simulate",
    "service.game.decide",
    "service.game.can",
    "service.game.verify",
}
UNKNOWN = "no layer"


def layer(module: str) -> str | None:
    """The layer of one of our modules (dotted name), or None for a module not ours."""
    parts = module.split(".")
    if parts[0] == "workers":
        return "workers"
    if parts[0] != "service":
        return None
    if len(parts) == 1 or parts[1] in ENTRIES:
        return ENTRY
    return parts[1] if parts[1] in ALLOWED else UNKNOWN


def own_layer(module: str) -> str | None:
    """The layer of one of our modules as an importer: the factory's modules wire the API
    and the web pages, as the entry points do."""
    return ENTRY if module in FACTORY else layer(module)


def shared_with_web(target: str) -> bool:
    return any(target == m or target.startswith(m + ".") for m in SHARED_WITH_WEB)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, root: Path = ROOT) -> set[str]:
    """The modules (dotted names) ``path`` imports, relative imports resolved; for ``from X
    import y`` both X and X.y (y may be a module)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def sources(root: Path = ROOT) -> list[Path]:
    return sorted([*(root / "service").rglob("*.py"), *(root / "workers").rglob("*.py")])


def violations(root: Path = ROOT) -> list[str]:
    wrong = []
    for path in sources(root):
        own = own_layer(module_name(path, root))
        if own == ENTRY:
            continue
        if own == UNKNOWN:
            wrong.append(f"{path.relative_to(root)} belongs to no layer")
            continue
        for target in sorted(imported(path, root)):
            other = layer(target)
            if other is None or target == "service":
                continue
            if other not in ALLOWED[own]:
                wrong.append(f"{path.relative_to(root)} ({own}) imports {target} ({other})")
            elif own == "web" and other == "api" and not shared_with_web(target):
                wrong.append(f"{path.relative_to(root)} (web) imports {target}, the API's own")
            elif own == "store" and any(
                target == d or target.startswith(d + ".") for d in DECIDING
            ):
                wrong.append(f"{path.relative_to(root)} (store) imports {target}, which decides")
    return wrong


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sources():
        own = own_layer(module_name(path))
        for target in imported(path):
            other = layer(target)
            if other is not None and other != own:
                graph.setdefault(own, set()).add(other)
    return graph


def test_every_package_imports_only_the_layers_below_it():
    assert violations() == []


def test_no_cycle_between_packages():
    graph = {k: v for k, v in package_graph().items() if k != ENTRY}
    seen: dict[str, str] = {}

    def visit(node: str, trail: list[str]) -> None:
        assert seen.get(node) != "open", f"import cycle: {' -> '.join(trail + [node])}"
        if node in seen:
            return
        seen[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if nxt != ENTRY:
                visit(nxt, trail + [node])
        seen[node] = "done"

    for node in sorted(graph):
        visit(node, [])


def test_the_check_sees_an_upward_import(tmp_path):
    """A store module importing the API, and the API importing the workers, are reported:
    the check can fail."""
    (tmp_path / "service" / "store").mkdir(parents=True)
    (tmp_path / "service" / "api").mkdir()
    (tmp_path / "workers").mkdir()
    (tmp_path / "service" / "store" / "events.py").write_text("from ..api import matches\n")
    (tmp_path / "service" / "api" / "health.py").write_text(
        "def f():\n    from workers.dispatch import queue\n"
    )
    assert violations(tmp_path) == [
        "service/api/health.py (api) imports workers.dispatch (workers)",
        "service/api/health.py (api) imports workers.dispatch.queue (workers)",
        "service/store/events.py (store) imports service.api (api)",
        "service/store/events.py (store) imports service.api.matches (api)",
    ]


def test_the_check_sees_the_api_and_the_web_pages_crossing(tmp_path):
    """An API module importing the web pages, and a page importing a blueprint of the API or
    its app factory, are reported; the factory serving both, and a page using what it
    shares with the API, are not."""
    api = tmp_path / "service" / "api"
    web = tmp_path / "service" / "web"
    api.mkdir(parents=True)
    web.mkdir()
    (api / "__init__.py").write_text("from .. import web\nfrom . import matches\n")
    (api / "matches.py").write_text("def f():\n    from ..web.front import asset_url\n")
    (web / "console.py").write_text(
        "from ..api.services import services\nfrom ..api.matches import load\n"
    )
    (web / "replay.py").write_text(
        "from ..api import create_app\nfrom ..api.documents import public_replay\n"
    )
    assert violations(tmp_path) == [
        "service/api/matches.py (api) imports service.web.front (web)",
        "service/api/matches.py (api) imports service.web.front.asset_url (web)",
        "service/web/console.py (web) imports service.api.matches, the API's own",
        "service/web/console.py (web) imports service.api.matches.load, the API's own",
        "service/web/replay.py (web) imports service.api, the API's own",
        "service/web/replay.py (web) imports service.api.create_app, the API's own",
    ]


def test_the_check_sees_the_store_deciding_and_a_module_of_no_layer(tmp_path):
    (tmp_path / "service" / "store").mkdir(parents=True)
    (tmp_path / "service" / "lobby").mkdir()
    (tmp_path / "service" / "store" / "ledger.py").write_text(
        "from ..game import State\nfrom ..game.record import verify\n"
    )
    (tmp_path / "service" / "lobby" / "match.py").write_text("x = 1\n")
    assert violations(tmp_path) == [
        "service/lobby/match.py belongs to no layer",
        "service/store/ledger.py (store) imports service.game.record, which decides",
        "service/store/ledger.py (store) imports service.game.record.verify, which decides",
    ]


def test_every_job_the_app_names_is_a_function_of_the_workers():
    """The app names the workers' job functions by path (it may not import them): each path
    must resolve, or RQ would fail every such job at run time."""
    import importlib

    from service.app.work import JOBS

    for kind, path in JOBS.items():
        module, _, name = path.rpartition(".")
        assert module.startswith("workers."), path
        assert callable(getattr(importlib.import_module(module), name, None)), (kind, path)


def blueprints(root: Path = ROOT) -> set[str]:
    """The blueprint modules of the API and of the web pages: those that define a
    module-level ``bp``."""
    found = set()
    for path in sorted([*root.glob("service/api/*.py"), *root.glob("service/web/*.py")]):
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "bp" for t in node.targets
            ):
                found.add(module_name(path, root))
    return found


def blueprint_imports(root: Path = ROOT) -> list[str]:
    """Each import of one blueprint module by another: what blueprints share lives in a
    module of its own, so that a resource's routes change without touching another's."""
    modules = blueprints(root)
    return [
        f"{module} imports {target}"
        for module in sorted(modules)
        for target in sorted(
            imported(Path(root, *module.split(".")).with_suffix(".py"), root) & modules
        )
        if target != module
    ]


def test_no_blueprint_imports_another():
    assert blueprint_imports() == []


def test_the_check_sees_a_blueprint_importing_another(tmp_path):
    api = tmp_path / "service" / "api"
    api.mkdir(parents=True)
    (api / "matches.py").write_text("bp = Blueprint('matches', __name__)\n")
    (api / "ledger.py").write_text(
        "from .matches import load\nbp = Blueprint('ledger', __name__)\n"
    )
    (api / "documents.py").write_text("from .matches import load\n")
    assert blueprint_imports(tmp_path) == ["service.api.ledger imports service.api.matches"]


def test_test_modules_hold_tests_and_helpers_are_named_otherwise():
    """pytest collects ``test_*.py``: a helper module named so would be collected for nothing
    and read as a suite by whoever looks for the tests of a feature."""
    empty = [
        path.name
        for path in sorted((ROOT / "tests").glob("test_*.py"))
        if not any(
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.name.lower().startswith("test")
            for node in ast.walk(ast.parse(path.read_text(), str(path)))
        )
    ]
    assert empty == []


#: Where what test modules share belongs, said by the check below.
SHARED_CODE = (
    "fixtures shared by test modules go in a fixture module (a plugin named in "
    "tests/conftest.py's pytest_plugins, as tests/jobs.py; or conftest.py), helpers in a "
    "support module not named test_*.py (as tests/api_support.py)"
)


def imports_of_test_modules(root: Path = ROOT) -> list[str]:
    """Each import of a test module (``tests/test_*.py``) by a module of the tests: pytest
    finds fixtures by name in fixture modules, and imported fixtures would shadow them."""
    tests = root / "tests"
    modules = {path.stem for path in tests.glob("test_*.py")}
    return [
        f"{path.relative_to(root)} imports {name}"
        for path in sorted(tests.rglob("*.py"))
        for name in sorted(
            {
                target.removeprefix("tests.").split(".")[0]
                for target in imported(path, root)
                if target.removeprefix("tests.").split(".")[0] in modules
            }
        )
    ]


def test_no_test_module_imports_another():
    found = imports_of_test_modules()
    assert not found, f"{'; '.join(found)}: {SHARED_CODE}"


def test_the_check_sees_a_test_module_imported(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_a.py").write_text("from test_b import new_player\nimport api_support\n")
    (tests / "test_b.py").write_text("def test_b():\n    import test_a.helpers\n")
    (tests / "jobs.py").write_text("from tests.test_a import db\nfrom servers import ROOT\n")
    assert imports_of_test_modules(tmp_path) == [
        "tests/jobs.py imports test_a",
        "tests/test_a.py imports test_b",
        "tests/test_b.py imports test_a",
    ]


def test_the_python_client_imports_only_the_standard_library_and_its_two_dependencies():
    """clients/python installs on its own: it speaks HTTP to the service, and needs nothing
    of it (nor of anything but httpx and httpx-sse)."""
    client = ROOT / "clients" / "python"
    allowed = {"ddz_client", "httpx", "httpx_sse", "__future__"}
    wrong = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((client / "ddz_client").rglob("*.py"))
        for name in imported(path, client)
        if name.split(".")[0] not in allowed | sys.stdlib_module_names
    }
    assert not wrong, sorted(wrong)
