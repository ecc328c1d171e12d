"""A generated test corpus: a git repository with branches and tags, and a plain directory.

Deterministic (fixed seed). It holds what the engine must get right: code in several languages
with symbols ctags can see, repeated words in every case, non-ASCII text (é, ß, the Kelvin sign),
CRLF lines, a file without a final newline, an empty file, non-UTF-8 bytes, a binary file, a
file over the size limit and one over the trigram limit, and files that differ between branches.
"""

from __future__ import annotations

import os
import random
import subprocess

WORDS = [
    "foo", "bar", "baz", "Foo", "FOO", "fooBar", "foo_bar", "handler", "Handler", "handler_123", "useState",
    "return", "value", "parse", "Parse", "PARSE", "café", "CAFÉ", "straße", "STRASSE", "\u212aelvin", "kelvin",
    "x", "ab", "a", "b", "c", "d", "test", "index", "-foo", "foo(", "test()", "or", "hello", "Hello",
]

MAX_FILE_SIZE = 6000
MAX_TRIGRAMS = 1500


def _text(rng: random.Random, lines: int) -> str:
    return "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 9))) for _ in range(lines))


def _python(rng, i):
    name = f"Handler{i}"
    return (
        f"import os\n\nclass {name}:\n    def parse_{i}(self, value):\n        return value  # {_text(rng, 1)}\n\n"
        f"def main():\n    h = {name}()\n    return h.parse_{i}({rng.choice(WORDS)!r})\n\n# {_text(rng, 3).replace(chr(10), chr(10) + '# ')}\n"
    )


def _go(rng, i):
    return (
        f"package main\n\nimport \"fmt\"\n\n// Foo{i} does {_text(rng, 1)}\nfunc Foo{i}(x int) int {{\n\treturn x + {i}\n}}\n\n"
        f"func main() {{\n\tfmt.Println(Foo{i}(1), \"{rng.choice(WORDS)}\")\n}}\n"
    )


def _c(rng, i):
    return f"#include <stdio.h>\n\nstatic int handler_{i}(int value) {{\n  return value * {i}; /* {_text(rng, 1)} */\n}}\n"


def write_files(root: str, rng: random.Random, variant: int) -> None:
    files = {
        "README.md": f"# Demo {variant}\n\n{_text(rng, 6)}\n",
        "src/app.py": _python(rng, 1),
        "src/util.py": _python(rng, 2 + variant),
        "src/main.go": _go(rng, 3),
        "src/handler.c": _c(rng, 4),
        "src/web/app.ts": f"export function useState{variant}() {{ return '{_text(rng, 1)}'; }}\n",
        "tests/test_app.py": "from src.app import Handler1\n\ndef test_parse():\n    assert Handler1().parse_1('foo bar') == 'foo bar'\n",
        "docs/notes.txt": _text(rng, 30),
        "docs/crlf.txt": _text(rng, 5).replace("\n", "\r\n") + "\r\n",
        "docs/no-newline.txt": "foo bar\nlast line foo",
        "docs/empty.txt": "",
        "docs/unicode.txt": "café CAFÉ Café\nstraße STRASSE\n\u212aelvin kelvin KELVIN\nſtraße\n",
    }
    for k in range(6):
        files[f"pkg/mod{k}/file{k}.txt"] = _text(rng, rng.randint(1, 40))
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(text.encode())
    raw = {
        "data/latin1.txt": "caf\xe9 foo bar\nna\xefve\n".encode("latin-1"),
        "data/blob.bin": bytes(range(256)) * 4 + b"foo",
        "data/big.txt": (("foo " * 20 + "\n") * 100).encode(),  # over MAX_FILE_SIZE
        "data/trigrams.txt": " ".join(f"w{n:05d}" for n in range(900)).encode(),  # over MAX_TRIGRAMS
    }
    for path, data in raw.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)


def git(repo: str, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z"}
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True, text=True, env=env).stdout


def make_git_repo(root: str, seed: int = 7) -> str:
    """A repo with main, dev and release/1.0 branches and a v1.0 tag."""
    rng = random.Random(seed)
    os.makedirs(root, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    write_files(root, rng, 0)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    git(root, "tag", "v1.0")
    git(root, "checkout", "-q", "-b", "release/1.0")
    with open(os.path.join(root, "src/release.py"), "w") as f:
        f.write("def release_only():\n    return 'foo release'\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "release")
    git(root, "checkout", "-q", "main")
    git(root, "checkout", "-q", "-b", "dev")
    write_files(root, random.Random(seed + 1), 1)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "dev")
    git(root, "checkout", "-q", "main")
    return root


def make_plain_dir(root: str, seed: int = 11) -> str:
    write_files(root, random.Random(seed), 2)
    return root


def make_local_repo(path: str, files: dict[str, str], message: str = "initial") -> str:
    """A non-bare git repository at `path` (created) with one commit of `files` on `main`."""
    os.makedirs(path)
    git(path, "init", "-q", "-b", "main")
    for name, text in files.items():
        full = os.path.join(path, name)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", message)
    return path
