"""The installed package's version (``grpo-power --version``, trace and report metadata); a
leaf: it imports nothing of grpo-power."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("grpo-power")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
