"""The package version (one place: the model files record it, --version prints it)."""

__version__ = "0.1.0"
