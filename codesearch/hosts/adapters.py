"""Imports every adapter module so that each registers its connection type."""

from codesearch.hosts import azuredevops, bitbucket, generic, gerrit, gitea, github, gitlab  # noqa: F401
