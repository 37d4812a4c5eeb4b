"""Fixtures of the robustness suite (the helpers live in robust_helpers, a unique module name)."""

from robust_helpers import (  # noqa: F401 - fixtures are registered by being imported here
    _private_cache,
    cli,
    features_file,
    folder_dataset,
    http_folder,
    mutated_model,
    runner,
)
