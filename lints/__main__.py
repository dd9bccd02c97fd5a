"""``python -m lints`` and the ``gradmode-lint`` script: the linter (``lints.cli``), or with ``server`` first, the
language server (``lints.server``). The one module that starts either front end; neither imports the other."""
import sys


def entry() -> None:
    if sys.argv[1:2] == ["server"]:
        from .server import main as serve

        sys.exit(serve(sys.argv[2:]))
    from .cli import entry as lint

    lint()


if __name__ == "__main__":
    entry()
