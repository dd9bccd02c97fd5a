"""``python -m lints.codemod`` and ``gradmode-fix``: rewrite what the GM1xx rules report.

Exit status: 0 nothing left to report; 1 findings remain after fixing (or, with
``--check``, a file would change); 2 usage error or a file that could not be
read, parsed or written (it is left byte-identical). The run itself: ``lints.fix_run``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from . import __version__
from .command_line import add_config_options, program_name
from .fix_run import run_fixes
from .fixer import STYLES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=program_name("lints.codemod"),
        description="Rewrite GM1xx findings (inference_mode in warmup/autotune/capture paths). "
                    "GM2xx findings are reported, not rewritten.",
        epilog="Exit status: 0 nothing left to report, 1 findings remain (or --check: files would change), "
               "2 usage error or unreadable/unparsable/unwritable file (left unchanged).",
    )
    parser.add_argument("paths", nargs="*", metavar="PATH")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any file would change")
    parser.add_argument("--diff", action="store_true",
                        help="print a unified diff (writes nothing; exit 1 if any file would change)")
    parser.add_argument("--style", choices=STYLES, default="remove",
                        help="remove: drop the inference_mode wrapper (upstream fix); no_grad: use torch.no_grad()")
    parser.add_argument("--unsafe-fixes", action="store_true", help="also apply fixes marked unsafe")
    parser.add_argument("--fix-only", action="store_true",
                        help="say nothing of the findings left and do not exit 1 for them (as ruff's --fix-only)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no remaining findings or summary")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="default .gradmode_cache in the project root (or $GRADMODE_CACHE_DIR)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    parser.add_argument("--version", action="version", version=f"gradmode-fix {__version__}")
    add_config_options(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_fixes(build_parser().parse_args(argv), tool="gradmode-fix")


if __name__ == "__main__":
    sys.exit(main())
