"""Fake code-host REST APIs (one module per host) for adapter tests, served on 127.0.0.1."""
