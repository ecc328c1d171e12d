"""Imports every adapter module so that each registers its connection type."""

from codesearch.hosts import azuredevops, bitbucket, gerrit, generic, gitea, github, gitlab  # noqa: F401
