"""The command line, the Python client and the notebooks."""
