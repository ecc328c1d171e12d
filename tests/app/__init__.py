"""The application layer and what it calls: search hints, code navigation, language models."""
