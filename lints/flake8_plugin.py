"""flake8 entry point (code prefix ``GM``): the same engine and findings as ``python -m lints``.

flake8 only reads INI files, so ``[tool.gradmode]`` is read from pyproject.toml
here; ``--gradmode-*`` options (command line or flake8 config) override it.
flake8 applies ``# noqa`` and ``--select``/``--ignore`` itself.
"""
from __future__ import annotations

import ast
from typing import Any, ClassVar, Iterator, Optional, Sequence

from . import __version__
from .config import OPT_IN_CODES, SERVING_GRAD_MODES, Config, ConfigError, load_config
from .engine import analyze_text
from .model import FileError


class GradModeChecker:
    name = "gradmode-lint"
    version = __version__
    config: ClassVar[Optional[Config]] = None

    def __init__(self, tree: ast.AST, filename: str, lines: Sequence[str]) -> None:
        self.filename = filename
        self.lines = lines

    @classmethod
    def add_options(cls, parser: Any) -> None:
        for flag, help_text in (
            ("--gradmode-path-patterns", "function-name globs that mark warmup/autotune/capture paths"),
            ("--gradmode-extend-path-patterns", "globs added to the default path patterns"),
            ("--gradmode-class-patterns", "class-name globs whose methods are such paths"),
            ("--gradmode-module-globs", "file globs whose functions are all such paths"),
        ):
            parser.add_option(flag, default=None, parse_from_config=True, comma_separated_list=True, help=help_text)
        parser.add_option("--gradmode-serving-grad-mode", default=None, parse_from_config=True,
                          choices=SERVING_GRAD_MODES, help="grad mode serving runs under (default no_grad)")
        parser.add_option("--gradmode-config", default=None, parse_from_config=True,
                          help="pyproject.toml holding [tool.gradmode] (default: nearest one)")
        # Opt-in rules stay off unless flake8's own --select/--extend-select names them.
        parser.extend_default_ignore(sorted(OPT_IN_CODES))

    @classmethod
    def parse_options(cls, options: Any) -> None:
        try:
            base, _ = load_config(getattr(options, "gradmode_config", None))
        except ConfigError as exc:
            raise SystemExit(f"gradmode-lint: error: {exc}") from exc

        def listed(name: str) -> Optional[tuple[str, ...]]:
            value = getattr(options, name, None)
            return tuple(v for v in value if v) if value else None

        config = base.replace(
            path_patterns=listed("gradmode_path_patterns"),
            class_patterns=listed("gradmode_class_patterns"),
            module_globs=listed("gradmode_module_globs"),
            serving_grad_mode=getattr(options, "gradmode_serving_grad_mode", None),
        )
        # An opt-in code runs only when flake8's own selection names it (see add_options); asking the
        # engine for it otherwise would analyse every file with a tensor factory for nothing.
        chosen = [c for c in (getattr(options, "select", None) or []) + (getattr(options, "extend_select", None)
                                                                       or []) if c]
        wanted = tuple(code for code in sorted(OPT_IN_CODES) if any(code.startswith(c) for c in chosen))
        config = config.replace(extend_select=config.extend_select + wanted)
        extra = listed("gradmode_extend_path_patterns")
        if extra:
            config = config.replace(path_patterns=config.path_patterns + extra)
        cls.config = config

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        config = self.config or Config()
        result = analyze_text("".join(self.lines), self.filename, config, apply_noqa=False)
        if isinstance(result, FileError):
            # flake8 already reports real syntax errors as E999; this is libcst-only trouble.
            yield 1, 0, f"GM001 gradmode-lint could not analyze this file: {result.message}", type(self)
            return
        for hit in result.hits:
            yield hit.line, hit.col, f"{hit.code} {hit.message}", type(self)
