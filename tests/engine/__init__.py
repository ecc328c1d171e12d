"""The engine: index format and build, query parsing and planning, search against a brute-force oracle."""
