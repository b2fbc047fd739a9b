"""Conversations kept on disk while their model is not loaded, so that they survive a swap.

When a model is unloaded (evicted for another, its keep-alive over), the cells its free slots
hold and its prompt cache's entries are written under the state folder, one file each. When
the same file loads again with the same context configuration, a returning conversation
restores its cells from there instead of prefilling the whole chat. No peer keeps them:
llama.cpp's server saves a slot only when asked to, by hand.

Entries never cross models or configurations: a model file's entries live in a folder named for
its path, and within it a folder per file fingerprint and configuration. A fingerprint that no
longer matches the file (replaced, re-pulled, edited) drops its folders at the next load. All
models' entries share one disk limit (`--saved-conversations`), least recently used out first.

An entry is a short header (magic, the tokens' length, the tokens as little-endian int32) and
the backend's serialization of the cells: loading a model reads only the headers; a restore
reads one entry's cells, about 23 KB a token for SmolLM2.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from localserve.engine.batching.prefix import common_prefix, extends

log = logging.getLogger(__name__)

MAGIC = b"LSKV1\n"
SUFFIX = ".kv"
# The file's head and its tail are hashed with its size and its modification and change times:
# hashing a whole multi-gigabyte file at every load would cost seconds. A file replaced or
# edited in place gets a new change time, which no call sets back (restoring the modification
# time with utime sets it too), so an edit at the same size and modification time is seen. A
# chmod or a new hard link changes it as well: that costs the saved conversations, never a
# wrong answer.
FINGERPRINT_SAMPLE = 1 << 20


@dataclass(frozen=True)
class SpilledPrompt:
    """A conversation's tokens, and the file that holds its cells."""

    tokens: list[int]
    path: Path
    size: int


def fingerprint(model_path: str) -> str:
    """What identifies a model file's contents, cheaply (see FINGERPRINT_SAMPLE)."""
    st = os.stat(model_path)
    stamp = f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
    digest = hashlib.sha256(stamp.encode())
    with open(model_path, "rb") as f:
        digest.update(f.read(FINGERPRINT_SAMPLE))
        if st.st_size > FINGERPRINT_SAMPLE:
            f.seek(max(FINGERPRINT_SAMPLE, st.st_size - FINGERPRINT_SAMPLE))
            digest.update(f.read(FINGERPRINT_SAMPLE))
    return digest.hexdigest()[:20]


class SavedConversations:
    """The saved conversations of one model file under one context configuration."""

    def __init__(self, root: Path, model_path: str, config: str, limit_bytes: int) -> None:
        self.root = root
        self.limit_bytes = limit_bytes
        real = os.path.realpath(model_path)
        self.model_folder = root / hashlib.sha256(real.encode()).hexdigest()[:16]
        self.print = fingerprint(real)
        tag = hashlib.sha256(config.encode()).hexdigest()[:12]
        self.folder = self.model_folder / f"{self.print}-{tag}"
        self._drop_stale()
        self.entries: list[SpilledPrompt] = self._read_index()

    def longest_prefix(self, prompt: list[int]) -> tuple[SpilledPrompt | None, int]:
        best, best_n = None, 0
        for entry in self.entries:
            n = common_prefix(entry.tokens, prompt)
            if n > best_n:
                best, best_n = entry, n
        return best, best_n

    def read(self, entry: SpilledPrompt) -> bytearray | None:
        """The entry's cells; None (and the entry dropped) if its file cannot be read."""
        try:
            with open(entry.path, "rb") as f:
                f.seek(len(MAGIC) + 4 + 4 * len(entry.tokens))
                state = bytearray(f.read())
            os.utime(entry.path)  # the least recently used go first
            return state
        except OSError as exc:
            log.warning("cannot read saved conversation %s: %s", entry.path, exc)
            self.drop(entry)
            return None

    def drop(self, entry: SpilledPrompt) -> None:
        if entry in self.entries:
            self.entries.remove(entry)
        entry.path.unlink(missing_ok=True)

    def write(self, tokens: list[int], state: bytes | bytearray) -> bool:
        """Keep a conversation's cells, unless an entry holds them already; entries they extend
        are dropped. False where it cannot be kept."""
        n = len(tokens)
        if len(state) > self.limit_bytes or any(extends(e.tokens, tokens) for e in self.entries):
            return False
        for entry in [e for e in self.entries if extends(tokens, e.tokens)]:
            self.drop(entry)
        name = hashlib.sha256(struct.pack(f"<{n}i", *tokens)).hexdigest()[:24] + SUFFIX
        path = self.folder / name
        head = MAGIC + struct.pack("<I", n) + struct.pack(f"<{n}i", *tokens)
        partial = path.with_suffix(".partial")
        try:
            # The tokens are the conversation itself: only this user may read them.
            for folder in (self.root, self.model_folder, self.folder):
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(head)
                f.write(state)
            os.replace(partial, path)
        except OSError as exc:
            log.warning("cannot save a conversation under %s: %s", self.folder, exc)
            partial.unlink(missing_ok=True)
            return False
        self.entries.append(SpilledPrompt(tokens, path, len(state)))
        return True

    def trim(self) -> None:
        """Keep every model's entries within the limit, the least recently used out first."""
        files = []
        for path in self.root.glob(f"*/*/*{SUFFIX}"):
            try:
                st = path.stat()
            except OSError:
                continue
            files.append((st.st_mtime_ns, st.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.limit_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
        self.entries = [e for e in self.entries if e.path.exists()]

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries)

    def _drop_stale(self) -> None:
        """Entries of an older version of this file can never be restored: drop them."""
        if not self.model_folder.is_dir():
            return
        for folder in self.model_folder.iterdir():
            if not folder.name.startswith(self.print + "-"):
                shutil.rmtree(folder, ignore_errors=True)

    def _read_index(self) -> list[SpilledPrompt]:
        entries = []
        for path in sorted(self.folder.glob(f"*{SUFFIX}")):
            try:
                with open(path, "rb") as f:
                    if f.read(len(MAGIC)) != MAGIC:
                        raise ValueError("not a saved conversation")
                    (n,) = struct.unpack("<I", f.read(4))
                    tokens = list(struct.unpack(f"<{n}i", f.read(4 * n)))
                size = path.stat().st_size - len(MAGIC) - 4 - 4 * n
            except (OSError, ValueError, struct.error) as exc:
                log.warning("dropping unreadable saved conversation %s: %s", path, exc)
                path.unlink(missing_ok=True)
                continue
            entries.append(SpilledPrompt(tokens, path, size))
        return entries
