"""gradmode-lint: grad-mode boundary checks for PyTorch serving engines."""
__version__ = "0.2.0"
