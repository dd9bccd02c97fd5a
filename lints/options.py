"""The options every front end shares (CLI, codemod, flake8 plugin, libcst command).

Read from ``[tool.gradmode]`` in the nearest pyproject.toml above the linted files (flake8 only
reads INI files, so we read pyproject ourselves); command-line options override it. Rule codes
are checked here, once for all front ends: a misspelt code is an error, not a silent no-op.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any, Iterable, Optional

from .globs import path_match, relative_to
from .rule_codes import rule_codes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.9/3.10 only
    import tomli as tomllib

# Names that make a function a warm root by themselves (when it does some work: not arithmetic alone), model
# loading included: it runs before serving, as warmup does.
LOADING_PATTERNS = ("load_weights", "post_load_weights", "load_model", "*after_loading*")
DEFAULT_PATH_PATTERNS = ("*warmup*", "*warm_up*", "*autotune*", "*dummy_run*", "*profile_run*", *LOADING_PATTERNS)
# Names that count only where graph or autotune use confirms them (K/V "capture" is not graph capture).
DEFAULT_CAPTURE_PATTERNS = ("*capture*", "*cuda_graph*", "*graph_capture*")
# Classes whose capture-pattern methods are confirmed without visible graph use.
DEFAULT_CLASS_PATTERNS = ("*GraphRunner", "*CudaGraph*", "*Autotuner")
# Serving entry points (functions that replay a captured graph are serving roots too).
DEFAULT_SERVING_PATTERNS = ("execute_model", "forward_batch*", "event_loop*", "run_batch", "generate",
                            "serve", "handle_request*", "step")
# "auto": inferred from the serving entry points (the run says what it inferred and from where).
SERVING_GRAD_MODES = ("auto", "no_grad", "inference_mode")
# How a host calls the functions no project code calls (a plugin's API, a registered callback).
ENTRY_GRAD_MODES = ("unknown", "inference_mode", "no_grad", "grad")
# ruff's default excludes (build outputs, tools' caches, virtual environments, other VCS folders), and ours
DEFAULT_EXCLUDE = (".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache",
                   ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv",
                   ".vscode", "__pypackages__", "_build", "buck-out", "dist", "node_modules", "site-packages", "venv",
                   "__pycache__", ".gradmode_cache")


# The prefix of every code (flake8 registers the plugin under it): selecting it is not naming an opt-in rule.
CODE_FAMILY = "GM"


class ConfigError(ValueError):
    """A setting is missing, misspelt or has the wrong type."""


@dataclasses.dataclass(frozen=True)
class Config:
    path_patterns: tuple[str, ...] = DEFAULT_PATH_PATTERNS
    capture_patterns: tuple[str, ...] = DEFAULT_CAPTURE_PATTERNS
    class_patterns: tuple[str, ...] = DEFAULT_CLASS_PATTERNS
    serving_patterns: tuple[str, ...] = DEFAULT_SERVING_PATTERNS
    module_globs: tuple[str, ...] = ()
    serving_grad_mode: str = "auto"
    entry_grad_mode: str = "unknown"
    select: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (path glob, code prefixes), as in ruff
    # The folder of the pyproject.toml the settings come from (with none, the current folder): the paths
    # that exclude, per-file-ignores and module-globs match are counted from it, as in ruff.
    root: str = ""
    force_exclude: bool = False  # exclude applies to paths given too (ruff's force-exclude: for pre-commit)
    respect_gitignore: bool = True  # walks leave out what .gitignore files ignore (ruff's respect-gitignore)
    # installed libraries the project imports are analysed with it (lints/libraries.py): from the running
    # interpreter's site-packages, or those of `python` (an interpreter, a venv or a site-packages folder)
    libraries: bool = True
    python: str = ""

    def __post_init__(self) -> None:
        if self.serving_grad_mode not in SERVING_GRAD_MODES:
            raise ConfigError(
                f"serving-grad-mode must be one of {', '.join(SERVING_GRAD_MODES)}, "
                f"not {self.serving_grad_mode!r}"
            )
        if self.entry_grad_mode not in ENTRY_GRAD_MODES:
            raise ConfigError(f"entry-grad-mode must be one of {', '.join(ENTRY_GRAD_MODES)}, "
                              f"not {self.entry_grad_mode!r}")

    def is_selected(self, code: str, default_enabled: bool = True) -> bool:
        """Prefix matching as in flake8/ruff: the longest matching prefix wins, ignore wins ties.

        Opt-in codes run only when a select/extend-select entry narrower than the whole family
        (``GM2``, ``GM201``; not ``G`` or ``GM``) matches them, as bugbear's B9 codes need ``B9``:
        ``--select GM`` is the default set, in the CLI and in flake8 alike.
        """

        def longest(prefixes: tuple[str, ...]) -> int:
            return max((len(p) for p in prefixes if code.startswith(p)), default=-1)

        chosen = self.select + self.extend_select
        if not default_enabled:
            chosen = tuple(p for p in chosen if len(p) > len(CODE_FAMILY))
        if not default_enabled or self.select:
            selected = longest(chosen)
        else:
            selected = max(0, longest(chosen))
        return selected >= 0 and longest(self.ignore) < max(selected, 1)

    def ignored_in(self, path: str, code: str) -> bool:
        """``per-file-ignores``: is ``code`` ignored in ``path`` (globs match the path from ``root``, or any
        tail of it)?"""
        normalized = relative_to(path, self.root)
        for glob, codes in self.per_file_ignores:
            if any(code.startswith(c) for c in codes) and path_match(normalized, (glob,)) is not None:
                return True
        return False

    def fingerprint(self) -> str:
        """Stable hash of everything that can change a file's findings (for the cache)."""
        data = dataclasses.asdict(self)
        data.pop("exclude")
        data.pop("force_exclude")  # which files are linted, not what is found in one
        data.pop("respect_gitignore")
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def replace(self, **changes: Any) -> "Config":
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    def with_rule_selection(self, select: Optional[tuple[str, ...]] = None,
                            extend_select: Optional[tuple[str, ...]] = None,
                            ignore: Optional[tuple[str, ...]] = None) -> "Config":
        """The command line's rule codes over the configuration's, as ruff layers them: ``select``
        starts over (the configuration's select, extend-select and ignore go), ``extend_select`` and
        ``ignore`` add to what is there."""
        config = self
        if select is not None:
            config = dataclasses.replace(config, select=select, extend_select=(), ignore=())
        return dataclasses.replace(config, extend_select=config.extend_select + (extend_select or ()),
                                   ignore=config.ignore + (ignore or ()))


_KEYS = {
    "path-patterns": "path_patterns",
    "extend-path-patterns": "extend_path_patterns",
    "class-patterns": "class_patterns",
    "extend-class-patterns": "extend_class_patterns",
    "capture-patterns": "capture_patterns",
    "serving-patterns": "serving_patterns",
    "extend-serving-patterns": "extend_serving_patterns",
    "module-globs": "module_globs",
    "serving-grad-mode": "serving_grad_mode",
    "entry-grad-mode": "entry_grad_mode",
    "libraries": "libraries",
    "python": "python",
    "select": "select",
    "extend-select": "extend_select",
    "ignore": "ignore",
    "exclude": "exclude",
    "extend-exclude": "extend_exclude",
    "force-exclude": "force_exclude",
    "per-file-ignores": "per_file_ignores",
    "respect-gitignore": "respect_gitignore",
}


def find_pyproject(start: Path) -> Optional[Path]:
    """The nearest pyproject.toml at or above ``start`` that has [tool.gradmode]."""
    start = Path(os.path.abspath(start))  # as the path is given (a link to a shared package: its project's)
    folder = str(start) if start.is_dir() else os.path.dirname(start)
    while True:  # by dirname: Path.parents makes every parent's parts, quadratic in a tree 1,000 deep
        if declares_config(folder):
            return Path(folder) / "pyproject.toml"
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def declares_config(folder: "str | Path") -> bool:
    """Whether ``folder`` has a pyproject.toml with [tool.gradmode] (ConfigError if it cannot be read).
    Paths as strings: parsing a Path costs a pass over its parts, 1,000 of them in a deep tree."""
    candidate = os.path.join(folder, "pyproject.toml")
    try:
        if not stat.S_ISREG(os.stat(candidate).st_mode):
            return False
    except (OSError, ValueError):
        return False
    return _table_of(candidate) is not None


def _table_of(path: "str | Path") -> Optional[dict]:
    """``_gradmode_table``, parsed once per process while the file stays the same (walks ask of every
    folder, and loading a config asks again); a file that is not a regular one is read each time."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return _gradmode_table(path)  # its own error
    if not stat.S_ISREG(info.st_mode):
        return _gradmode_table(path)
    # ctime too: an edit of the same size with its mtime set back (copy2, utime) still changes it
    signature = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    known = _tables.get(str(path))
    if known is None or known[0] != signature:
        try:
            answer: object = _gradmode_table(path)
        except ConfigError as exc:
            answer = exc
        _tables[str(path)] = known = (signature, answer)
    if isinstance(known[1], ConfigError):
        raise known[1]
    return known[1]  # shared: read only (config_from_mapping copies what it takes)


_tables: dict[str, tuple[tuple, object]] = {}  # pyproject.toml -> (its stat, its table, None or the error)
# A pyproject.toml larger than this is not read (they are a few KB; a checkout may plant a huge one).
MAX_CONFIG_BYTES = 1 << 20


def _gradmode_table(path: Path) -> Optional[dict]:
    """The [tool.gradmode] table of ``path``, None if it has none. A file that cannot be read or
    parsed is an error, not skipped: the user meant something by it."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: cannot read config: larger than {MAX_CONFIG_BYTES >> 20} MiB")
        data = tomllib.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise ConfigError(f"{path}: cannot read config: {why}") from None
    tool = data.get("tool")
    if not isinstance(tool, dict) or "gradmode" not in tool:  # `tool = 5` is someone else's business
        return None
    if not isinstance(tool["gradmode"], dict):
        raise ConfigError(f"{path}: [tool.gradmode] must be a table")
    return tool["gradmode"]


def _as_tuple(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"[tool.gradmode] {key} must be a list of strings")
    return tuple(value)


def config_from_mapping(table: dict[str, Any], base: Config = Config()) -> Config:
    changes: dict[str, Any] = {}
    extend: dict[str, tuple[str, ...]] = {}
    for raw_key, value in table.items():
        key = _KEYS.get(raw_key.replace("_", "-"))
        if key is None:
            raise ConfigError(f"unknown [tool.gradmode] setting {raw_key!r} (known: {', '.join(sorted(_KEYS))})")
        if key == "per_file_ignores":
            if not isinstance(value, dict):
                raise ConfigError("[tool.gradmode] per-file-ignores must be a table of glob = [codes]")
            changes[key] = tuple((str(glob), _as_tuple(f"per-file-ignores.{glob}", codes))
                                 for glob, codes in value.items())
        elif key == "respect_gitignore":
            if not isinstance(value, bool):
                raise ConfigError("[tool.gradmode] respect-gitignore must be true or false")
            changes[key] = value
        elif key in ("force_exclude", "libraries"):
            if not isinstance(value, bool):
                raise ConfigError(f"[tool.gradmode] {raw_key} must be true or false")
            changes[key] = value
        elif key in ("serving_grad_mode", "entry_grad_mode", "python"):
            if not isinstance(value, str):
                raise ConfigError(f"[tool.gradmode] {raw_key} must be a string")
            changes[key] = value
        elif key.startswith("extend_") and key != "extend_select":  # extend-select is a setting of its own
            extend[key[len("extend_"):]] = _as_tuple(raw_key, value)
        else:
            changes[key] = _as_tuple(raw_key, value)
    cfg = dataclasses.replace(base, **changes)
    for key, more in extend.items():
        cfg = dataclasses.replace(cfg, **{key: getattr(cfg, key) + more})
    check_codes(cfg.select + cfg.extend_select + cfg.ignore + tuple(c for _, codes in cfg.per_file_ignores
                                                                    for c in codes), "[tool.gradmode]")
    return cfg


def check_codes(codes: Iterable[str], where: str) -> None:
    """Every code or prefix must name at least one rule (``GM1``, ``GM202``)."""
    codes = tuple(codes)
    if not codes:
        return
    known = rule_codes()
    unknown = [c for c in codes if not any(code.startswith(c) for code in known)]
    if unknown:
        raise ConfigError(f"{where}: unknown rule code(s): {', '.join(unknown)} (known: {', '.join(known)})")


def load_config(pyproject: Optional[Path] = None, start: Optional[Path] = None) -> tuple[Config, Optional[Path]]:
    """Config from ``pyproject`` (or the nearest one above ``start``/cwd)."""
    path = pyproject or find_pyproject(start or Path.cwd())
    if path is None:  # path settings then count from the current folder (and the caches know it)
        return Config(root=os.path.abspath(os.curdir)), None
    table = _table_of(Path(path)) or {}
    try:
        return config_from_mapping(table).replace(root=os.path.dirname(os.path.abspath(path))), Path(path)
    except ConfigError as exc:  # a setting of the wrong kind: name the file it is in
        raise ConfigError(f"{path}: {exc}") from None


def split_codes(values: Optional[Iterable[str]]) -> Optional[tuple[str, ...]]:
    """`--select GM1,GM202` and repeated flags both work."""
    if values is None:
        return None
    out: list[str] = []
    for value in values:
        out.extend(v.strip() for v in value.split(",") if v.strip())
    return tuple(out)


def default_cache_dir() -> Optional[Path]:
    """$GRADMODE_CACHE_DIR, else None: the cache then lives in the project root's `.gradmode_cache`."""
    folder = os.environ.get("GRADMODE_CACHE_DIR")
    return Path(folder) if folder else None


def user_cache_root() -> Optional[Path]:
    """The user's cache folder for this tool (``$XDG_CACHE_HOME/gradmode-lint``, else
    ``~/.cache/gradmode-lint``): installed libraries' summaries, and packages without a project
    marker, whose folder may be ``/tmp`` or a home folder. None where no home folder is known."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not base or base == os.path.join("~", ".cache"):
        return None
    return Path(base) / "gradmode-lint"
