# Until the pytest11 entry point is in pyproject.toml, load the plugin by name.
pytest_plugins = ["kwire.pytest_plugin"]
