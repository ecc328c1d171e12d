"""Mirrors of remote repositories: one bare, full clone per repository id (docs/indexing.md#mirrors).

`MirrorStore(root).sync(repo_id, clone_url, username=..., password=...)` makes ``<root>/<repo_id>``
an exact copy of the remote's branches and tags and points its HEAD where the remote's HEAD
points, so the indexer can read every revision from the object store:

- **First sync** clones (``git clone --bare``, never shallow) into a hidden temporary folder next
  to the target and renames it into place only once complete, so a crash or a failed clone never
  leaves a half clone at `path_for` (a leftover temporary folder is removed by the next `sync` or
  `remove` of that id).
- **Later syncs** fetch ``+refs/heads/*:refs/heads/*`` and ``+refs/tags/*:refs/tags/*`` with
  ``--prune --prune-tags`` (forced), so force-pushes and deleted branches and tags are mirrored,
  then ask the remote where its HEAD points (``git ls-remote --symref``) and follow a changed
  default branch.
- **Credentials never touch the disk or the command line.** They travel in the environment of
  the network commands only (``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_n=http.extraHeader`` /
  ``GIT_CONFIG_VALUE_n=Authorization: Basic …``), which neither ``ps`` nor the clone's config
  shows; ``remote.origin.url`` is the credential-free URL. Every command runs through
  `codesearch.git.process` (no prompts, no credential helpers, no inherited ``GIT_TRACE*`` that
  would print the header, a time limit), and git's output is scrubbed of the credentials before
  it goes into a message.
- **Damaged clones heal.** A folder that is not a git repository, an unreadable HEAD, a ref to
  a missing object, or a fetch that fails the way a corrupt repository fails, is logged and
  re-cloned from scratch (the damaged folder is replaced only when the new clone is complete).
- **Errors** are `GitError`s naming the repository (its URL without credentials) and the cause:
  host unreachable, authentication failed, repository not found, timed out, empty repository.
  They are recorded as the repository's last error and shown to users, so they never name a
  folder of this server: git's own words have the mirrors' folder written ``<mirrors>``.

Local repositories (``file://`` URLs and paths) are indexed in place and rejected here. Two
`sync` calls for the same id in one process are serialised; one store per root per process.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from codesearch.errors import GitError
from codesearch.git.process import Git, GitFailed
from codesearch.redaction import Scrubber

log = logging.getLogger(__name__)

_CLONE_TAG = ".clone-"
_TRASH_TAG = ".trash-"
_REFSPECS = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")
_ALLOWED_SCHEMES = {"http", "https", "ssh", "git"}

_UNREACHABLE = re.compile(
    r"connection refused|could not resolve host|couldn't resolve host|failed to connect|couldn't connect"
    r"|network is unreachable|no route to host|connection timed out|connection reset|operation timed out"
    r"|empty reply from server|could not read from remote repository|ssl_connect|recv failure"
    r"|returned error: 50[234]",
    re.I,
)
_AUTH = re.compile(
    r"returned error: 40[13]|authentication failed|could not read username|could not read password"
    r"|terminal prompts disabled|invalid username or password|permission denied \(publickey|access denied"
    r"|http basic: access denied",
    re.I,
)
_NOT_FOUND = re.compile(
    r"returned error: 404|repository not found|not found|does not appear to be a git repository"
    r"|no such repository|repository .* does not exist",
    re.I,
)
_CORRUPT = re.compile(
    r"not a git repository|bad object|missing (blob|tree|commit|tag|object)|did not send all necessary objects"
    r"|is corrupt|corrupt (loose|pack)|invalid sha1 pointer|bad ref|broken ref|unable to read [0-9a-f]{7,}"
    r"|object file .* is empty|loose object .* is corrupt|bad (tree|commit|tag) object|packfile .* (cannot|does not)"
    r"|fatal: unable to read tree|cannot lock ref|unable to resolve reference|could not parse object",
    re.I,
)


@dataclass
class MirrorResult:
    path: str  # the bare clone
    default_branch: str  # full ref the remote's HEAD points to, e.g. refs/heads/main ("HEAD" when detached)
    created: bool  # cloned now (False: fetched into an existing clone)
    head_commit: str  # hex sha of the commit HEAD resolves to


def public_url(url: str) -> str:
    """`url` without any user name or password, safe for messages and for the clone's config."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid url>"
    if parts.scheme and "@" in parts.netloc:
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return url


class MirrorStore:
    """Bare mirrors under `root`, one folder per repository id (see the module docstring)."""

    def __init__(self, root: str, *, timeout_s: float = 600.0):
        self.root = os.path.abspath(root)
        self.timeout_s = float(timeout_s)
        os.makedirs(self.root, exist_ok=True)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    # ----------------------------------------------------------------- layout

    def path_for(self, repo_id: int | str) -> str:
        return os.path.join(self.root, self._name(repo_id))

    @staticmethod
    def _name(repo_id: int | str) -> str:
        name = str(repo_id)
        if (
            not name
            or name.startswith(".")
            or "/" in name
            or os.sep in name
            or "\0" in name
            or (os.altsep and os.altsep in name)
        ):
            raise GitError(f"invalid repository id {name!r} for a mirror folder")
        return name

    def _lock(self, name: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(name, threading.Lock())

    def list_ids(self) -> list[str]:
        """Ids with something on disk: a clone, or a temporary folder left by a crash."""
        ids = set()
        try:
            entries = os.listdir(self.root)
        except FileNotFoundError:
            return []
        for entry in entries:
            if not entry.startswith("."):
                ids.add(entry)
                continue
            for tag in (_CLONE_TAG, _TRASH_TAG):
                if tag in entry:
                    ids.add(entry[1:].rsplit(tag, 1)[0])
        return sorted(i for i in ids if i)

    def remove(self, repo_id: int | str) -> None:
        """Delete the clone of `repo_id` (and any temporary leftovers); no error when absent."""
        name = self._name(repo_id)
        with self._lock(name):
            self._remove_leftovers(name)
            _rmtree(self.path_for(name))

    def _remove_leftovers(self, name: str) -> None:
        for entry in os.listdir(self.root):
            for tag in (_CLONE_TAG, _TRASH_TAG):
                if entry.startswith(f".{name}{tag}"):
                    _rmtree(os.path.join(self.root, entry))

    # ----------------------------------------------------------------- sync

    def sync(
        self, repo_id: int | str, clone_url: str, *, username: str | None = None, password: str | None = None
    ) -> MirrorResult:
        """Clone or fetch `clone_url` into `path_for(repo_id)`; see the module docstring."""
        name = self._name(repo_id)
        url = self._check_url(clone_url)
        job = _Job(url, username, password, time.monotonic() + self.timeout_s, self.timeout_s, private=self.root)
        with self._lock(name):
            self._remove_leftovers(name)
            path = self.path_for(name)
            if os.path.lexists(path):
                problem = self._damage(job, path)
                if problem is None:
                    try:
                        return self._fetch(job, path)
                    except _Corrupt as e:
                        problem = str(e)
                log.warning("mirror %s (%s): clone is damaged (%s); cloning again from scratch", name, url, problem)
            return self._clone(job, name, path)

    @staticmethod
    def _check_url(clone_url: str) -> str:
        url = (clone_url or "").strip()
        if not url:
            raise GitError("no clone URL given")
        shown = public_url(url)
        if url.startswith("-"):
            raise GitError(f"{shown}: not a usable clone URL")
        m = re.match(r"^([a-zA-Z][\w+.-]*)://", url)
        if m:
            scheme = m.group(1).lower()
            if scheme == "file":
                raise GitError(f"{shown}: local repositories are indexed in place, not mirrored")
            if scheme not in _ALLOWED_SCHEMES:
                raise GitError(f"{shown}: unsupported URL scheme {scheme!r} (use https, http, ssh or git)")
            try:
                parts = urlsplit(url)
            except ValueError:
                raise GitError(f"{shown}: not a valid URL") from None
            if ":" in parts.netloc.rpartition("@")[0]:
                raise GitError(f"{shown}: credentials must not be part of the clone URL; pass them separately")
            return url
        if re.match(r"^[^/:]+:", url) and not re.match(r"^[a-zA-Z]:[\\/]", url):
            return url  # scp-like: git@host:owner/repo.git
        raise GitError(f"{shown}: local repositories are indexed in place, not mirrored")

    def _damage(self, job: _Job, path: str) -> str | None:
        """Why the clone at `path` cannot be fetched into, or None when it looks sound."""
        if os.path.islink(path) or not os.path.isdir(path):
            return "not a folder"
        try:
            git_dir = job.run(["rev-parse", "--git-dir"], git_dir=path, network=False).strip()
            if os.path.realpath(os.path.join(path, git_dir)) != os.path.realpath(path):
                return "not a bare repository"
            if job.run(["rev-parse", "--is-bare-repository"], git_dir=path, network=False).strip() != "true":
                return "not a bare repository"
            if not job.run(
                ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], git_dir=path, network=False, check=False
            ).strip():
                return "HEAD does not resolve to a commit"
            refs = job.run(["for-each-ref", "--format=%(objectname) %(refname)"], git_dir=path, network=False)
            shas = [line.split(" ", 1)[0] for line in refs.splitlines() if line]
            if shas:
                out = job.run(["cat-file", "--batch-check"], git_dir=path, network=False, stdin="\n".join(shas) + "\n")
                if "missing" in out:
                    return "a ref points to a missing object"
        except GitFailed as e:
            if e.timed_out:
                raise job.error(e) from None
            return (e.stderr.strip().splitlines() or ["git failed"])[-1]
        return None

    def _clone(self, job: _Job, name: str, path: str) -> MirrorResult:
        tmp = tempfile.mkdtemp(prefix=f".{name}{_CLONE_TAG}", dir=self.root)
        target = os.path.join(tmp, "repo.git")
        try:
            try:
                job.run(["clone", "--bare", "--quiet", "--", job.url, target])
            except GitFailed as e:
                raise job.error(e) from None
            default, head = self._head(job, target)
            job.run(["config", "remote.origin.url", job.url], git_dir=target, network=False)
            trash = None
            if os.path.lexists(path):
                trash = tempfile.mkdtemp(prefix=f".{name}{_TRASH_TAG}", dir=self.root)
                os.rename(path, os.path.join(trash, "old"))
            os.rename(target, path)
            if trash:
                _rmtree(trash)
        except GitFailed as e:
            raise job.error(e) from None
        except OSError as e:
            raise GitError(f"{job.shown}: cannot move the new clone into place: {e.strerror}") from None
        finally:
            _rmtree(tmp)
        log.info("mirror %s: cloned %s (%s at %s)", name, job.url, default, head[:12])
        return MirrorResult(path, default, True, head)

    def _fetch(self, job: _Job, path: str) -> MirrorResult:
        try:
            current = job.run(
                ["config", "--get", "remote.origin.url"], git_dir=path, network=False, check=False
            ).strip()
            if current != job.url:
                job.run(["config", "remote.origin.url", job.url], git_dir=path, network=False)
            try:
                job.run(
                    [
                        "fetch",
                        "--quiet",
                        "--force",
                        "--prune",
                        "--prune-tags",
                        "--no-write-fetch-head",
                        "--update-head-ok",
                        "origin",
                        *_REFSPECS,
                    ],
                    git_dir=path,
                )
            except GitFailed as e:
                if not e.timed_out and _CORRUPT.search(e.stderr) and not _UNREACHABLE.search(e.stderr):
                    raise _Corrupt((e.stderr.strip().splitlines() or ["fetch failed"])[-1]) from None
                raise job.error(e) from None
            try:
                remote_head = _symref(job.run(["ls-remote", "--symref", "origin", "HEAD"], git_dir=path))
            except GitFailed as e:
                raise job.error(e) from None
            if remote_head:
                local = job.run(["symbolic-ref", "-q", "HEAD"], git_dir=path, network=False, check=False).strip()
                if remote_head != local:
                    if job.run(
                        ["rev-parse", "--verify", "--quiet", remote_head + "^{commit}"],
                        git_dir=path,
                        network=False,
                        check=False,
                    ).strip():
                        job.run(["symbolic-ref", "HEAD", remote_head], git_dir=path, network=False)
                        log.info("mirror %s: default branch is now %s (was %s)", path, remote_head, local or "?")
                    else:
                        log.warning(
                            "mirror %s: the remote's HEAD %s was not fetched; keeping %s", path, remote_head, local
                        )
            default, head = self._head(job, path)
        except GitFailed as e:
            raise job.error(e) from None
        return MirrorResult(path, default, False, head)

    @staticmethod
    def _head(job: _Job, git_dir: str) -> tuple[str, str]:
        """(default branch ref, commit) of a clone; GitError for an empty repository."""
        head = job.run(
            ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], git_dir=git_dir, network=False, check=False
        ).strip()
        ref = job.run(["symbolic-ref", "-q", "HEAD"], git_dir=git_dir, network=False, check=False).strip()
        if not head:
            if job.run(["for-each-ref", "--count=1"], git_dir=git_dir, network=False, check=False).strip():
                raise GitError(f"{job.shown}: the default branch {ref or 'HEAD'} does not exist on the remote")
            raise GitError(f"{job.shown}: empty repository (no commits, no HEAD)")
        return ref or "HEAD", head


class _Corrupt(Exception):
    pass


def _symref(out: str) -> str | None:
    for line in out.splitlines():
        if line.startswith("ref: ") and line.endswith("\tHEAD"):
            return line[5:-5].strip()
    return None


def _rmtree(path: str) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)


class _Job:
    """The git runners, deadline and credentials of one `sync` call: `run` picks the runner with
    the credentials for network commands (clone, fetch, ls-remote) and the one without for the
    rest; both scrub the credentials and write the mirrors' folder `private` as ``<mirrors>``."""

    def __init__(
        self,
        url: str,
        username: str | None,
        password: str | None,
        deadline: float,
        timeout_s: float,
        private: str | None = None,
    ):
        self.url = url
        self.shown = public_url(url)
        self.timeout_s = timeout_s
        config: tuple[tuple[str, str], ...] = ()
        secrets: tuple[str, ...] = ()
        if username or password:
            raw = f"{username or ''}:{password or ''}"
            token = base64.b64encode(raw.encode()).decode()
            config = (("http.extraHeader", f"Authorization: Basic {token}"),)
            secrets = (raw, token, password or "")
        scrubber = Scrubber.hiding({private: "<mirrors>"} if private else {}, secrets)
        self.local = Git(scrubber=scrubber, timeout_s=timeout_s, deadline=deadline)
        self.network = dataclasses.replace(self.local, config=config)

    def run(
        self,
        args: list[str],
        *,
        git_dir: str | None = None,
        network: bool = True,
        check: bool = True,
        stdin: str | None = None,
    ) -> str:
        """Run git with `args` (on the repository at `git_dir`, if given); its stdout, or a
        GitFailed (scrubbed stderr) on failure or timeout."""
        git = dataclasses.replace(self.network if network else self.local, git_dir=git_dir)
        return git.text(args, stdin=stdin, check=check)

    def error(self, e: GitFailed) -> GitError:
        """A GitError naming the repository and the cause of `e`."""
        if e.timed_out:
            return GitError(f"{self.shown}: timed out after {self.timeout_s:g}s")
        detail = _last_lines(e.stderr)
        if _AUTH.search(e.stderr):
            cause = "authentication failed (the host refused the credentials, or they are missing)"
        elif _NOT_FOUND.search(e.stderr):
            cause = "repository not found (or not visible with these credentials)"
        elif _UNREACHABLE.search(e.stderr):
            cause = "host unreachable"
        elif _CORRUPT.search(e.stderr):
            cause = "the local clone is damaged"
        else:
            cause = f"git {e.command} failed"
        return GitError(f"{self.shown}: {cause}" + (f": {detail}" if detail else ""))


def _last_lines(stderr: str, n: int = 3) -> str:
    lines = [
        ln.strip()
        for ln in stderr.splitlines()
        if ln.strip() and not ln.startswith("hint:") and "unable to read askpass response" not in ln
    ]
    return " / ".join(lines[-n:])[:500]
