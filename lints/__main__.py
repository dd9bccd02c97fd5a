"""``python -m lints``: see ``lints.cli``."""
import os
import sys

from .cli import main

try:
    sys.exit(main())
except BrokenPipeError:  # `python -m lints rules | head`: the reader left; not an error of ours
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(1)
