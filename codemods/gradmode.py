"""libcst codemod command: the same fixes as ``python -m lints.codemod``.

The findings come from the whole-project analysis, handed to each file through a metadata
provider whose ``gen_cache`` runs once over the repository (libcst's ``FullRepoManager``, the hook
Fixit uses), so the command sees cross-module bugs as the linter does. Nothing here decides what
is a finding.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import os
from pathlib import Path
from typing import Any, List, Mapping, Optional

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext, SkipFile
from libcst.metadata import BatchableMetadataProvider

from lints.fix_inputs import file_identity, first_path_per_file, names_imported_elsewhere, run_to_fix_from
from lints.options import Config, ConfigError, check_codes, default_cache_dir, load_config, split_codes
from lints.engine import lint_project
from lints.globs import within
from lints.model import finding_from_dict
from lints.project_roots import ProjectLocator, project_groups
from lints.walk import excluded_below
from lints.fixer import STYLES, apply_fixes, plans_for

_NOTHING = ((), None, "", "")


class ProjectConfigError(Exception):
    """The project of a file has settings that cannot be read: the file is left as it is, and counts as
    failed, so that libcst's exit status says so."""


class OutsideTheProject(Exception):
    """A file reached through a symbolic link is outside its project: libcst would write through the link
    (a checkout can link a file of its to any file its user may write), so the file is left as it is and
    counts as failed. libcst hands over the files it found, not the paths it was given, so this holds for
    a link named on the command line too: ``gradmode-fix`` fixes one named there."""


@dataclasses.dataclass(frozen=True)
class CommandSettings:
    """What the command line says over the projects' own settings, as ``python -m lints.codemod``
    takes ``--config`` (one file for every project) and ``--select`` (over each project's)."""

    config: Optional[Config] = None
    select: Optional[tuple[str, ...]] = None

    def for_project(self, start: str) -> Config:
        own = self.config or load_config(start=Path(start))[0]
        return own.with_rule_selection(select=self.select)


def _project_findings(root: Path, paths: List[str], settings: CommandSettings = CommandSettings()
                      ) -> dict[str, tuple]:
    """given path -> (its findings as dicts, the names other modules import from it: see
    ``names_imported_elsewhere``, why its project could not be analysed or "", why it is outside its
    project, reached through a symbolic link, or ""). A file given under
    several paths has them all under the first, none under the others (``first_path_per_file``). Each
    project is analysed on its own, as the CLI does (``project_groups``), under its own settings and
    the command line's (``settings``)."""
    first = first_path_per_file(paths, str(root))
    found: dict[str, list[dict]] = {p: [] for p in first.values()}
    imported: dict = {}
    broken: dict[str, str] = {}  # given path -> why its project's settings cannot be read
    outside: dict[str, str] = {}  # given path -> the file outside its project it links to
    locator = ProjectLocator()
    # libcst hands over the files it found, not the paths it was given: what they share stands for those
    shared = os.path.commonpath([os.path.abspath(os.path.join(root, p)) for p in paths]) if paths else ""
    for group in project_groups([os.path.join(root, p) for p in paths], locator):
        # a project with a marker is walked instead, so that its `exclude` keeps out what it names
        project = locator.marked_root(group[0])
        if project is not None and locator.excluded_by_the_project_around(project) \
                and not locator.reaches(project, shared):
            continue  # the project around leaves it out (given inside it, or above it by a walk that reaches it)
        try:
            own = settings.for_project(project or os.path.dirname(os.path.abspath(group[0])))
        except ConfigError as exc:  # that project's files are left as they are, and fail with it
            for path in group:
                given = first.get(file_identity(path))
                if given is not None:
                    broken[given] = str(exc)
            continue
        # what it was given, where the project's exclude keeps the walk out, is linted, as by the CLI
        named = [p for p in group if within(os.path.abspath(p), shared)] if project is not None and shared \
            and excluded_below(shared, project, own.exclude, own.root) else []
        members = [project, *named] if project is not None else group
        run = lint_project(members, own, cache_dir=default_cache_dir())
        # the caches are the checkout's: what they say does not choose what is written
        run = run_to_fix_from(run, own, functools.partial(lint_project, members, own, use_cache=False))
        if any(f.fixes for f in run.findings):
            imported.update(names_imported_elsewhere(run, own))
        for path in group:
            given = first.get(file_identity(path))
            if given is not None and not within(os.path.realpath(path), os.path.realpath(run.root)):
                outside[given] = (f"reached through a symbolic link, {given} is {os.path.realpath(path)}, outside "
                                  f"the project: not written (`gradmode-fix {given}` fixes it)")
        for finding in run.findings:
            given = first.get(file_identity(finding.path))
            if given is not None:
                found[given].append(finding.to_dict())
    fixes = {p: (tuple(found[p]), imported.get(identity), broken.get(p, ""), outside.get(p, ""))
             for identity, p in first.items()}
    return {p: fixes.get(p, _NOTHING) for p in paths}


class ProjectFindingsProvider(BatchableMetadataProvider[tuple]):
    """The project analysis' findings for the module being transformed (as plain dicts), and the names
    other modules import from it, under each project's own settings (libcst hands ``gen_cache`` no
    option of the command)."""

    @classmethod
    def gen_cache(cls, root_path: Path, paths: List[str], timeout: Optional[int] = None,
                  **kwargs: Any) -> Mapping[str, object]:
        return _project_findings(Path(root_path), list(paths))

    def visit_Module(self, node: cst.Module) -> None:
        self.set_metadata(node, self.cache or _NOTHING)


class FixInferenceMode(CodemodCommand):
    DESCRIPTION = ("Remove torch.inference_mode() from warmup/autotune/CUDA-graph capture paths "
                   "(gradmode-lint GM101-GM104 fixes, from the whole-project analysis).")
    METADATA_DEPENDENCIES = (ProjectFindingsProvider,)

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument("--style", choices=STYLES, default="remove",
                                help="remove the wrapper (default) or use torch.no_grad()")
        arg_parser.add_argument("--unsafe-fixes", action="store_true", help="also apply fixes marked unsafe")
        arg_parser.add_argument("--gradmode-config", default=None, help="pyproject.toml with [tool.gradmode]")
        arg_parser.add_argument("--select", default=None, help="comma-separated codes or prefixes")

    def __init__(self, context: CodemodContext, style: str = "remove", unsafe_fixes: bool = False,
                 gradmode_config: Optional[str] = None, select: Optional[str] = None) -> None:
        super().__init__(context)
        # each file's own project's settings (not those above the cwd), with the command line's over them
        codes = split_codes([select]) if select else None
        check_codes(codes or (), "--select")
        self.settings = CommandSettings(load_config(Path(gradmode_config))[0] if gradmode_config else None, codes)
        self.style = style
        self.unsafe_fixes = unsafe_fixes

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        filename = self.context.filename or ""
        if self.context.metadata_manager is not None and self.settings == CommandSettings():
            data, imported, broken, outside = self.get_metadata(ProjectFindingsProvider, tree, _NOTHING)
        elif filename:  # no repository root, or settings of the command's: the project around this file
            # (its result is cached: the other files of the project reuse it)
            data, imported, broken, outside = _project_findings(Path("."), [filename], self.settings).get(
                filename, _NOTHING)
        else:
            raise SkipFile("no file name: the project analysis needs one")
        if broken:
            raise ProjectConfigError(broken)
        if outside and data:  # nothing to write otherwise
            raise OutsideTheProject(outside)
        findings = [finding_from_dict(d) for d in data]
        plans = plans_for(tree, findings, self.unsafe_fixes, style=self.style)
        if not plans:
            raise SkipFile("nothing to fix")
        # CodemodCommand.transform_module adds/removes the scheduled imports afterwards.
        return apply_fixes(tree, plans, self.style, self.context, update_imports=False, imported_elsewhere=imported)
