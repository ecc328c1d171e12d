"""The state database."""
