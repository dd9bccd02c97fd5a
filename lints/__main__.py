"""``python -m lints``: see ``lints.cli``."""
from .cli import entry

entry()
