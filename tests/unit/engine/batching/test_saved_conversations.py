"""Which conversations are kept on disk while their model is unloaded, and which are found again
(pure logic on files: no model involved)."""

from __future__ import annotations

import os
from pathlib import Path

from localserve.engine.batching.prompt_cache import PromptCache, SavedPrompt
from localserve.engine.batching.saved_conversations import SavedConversations

CONFIG = "0.3.36:4:4096:False"


def model_file(tmp_path: Path, content: bytes = b"GGUF weights") -> str:
    path = tmp_path / "model.gguf"
    path.write_bytes(content)
    return str(path)


def shelf(
    tmp_path: Path, model: str, config: str = CONFIG, limit: int = 1000
) -> SavedConversations:
    return SavedConversations(tmp_path / "conversations", model, config, limit)


def test_a_written_conversation_is_found_and_read_by_the_next_load(tmp_path: Path) -> None:
    model = model_file(tmp_path)
    shelf(tmp_path, model).write([1, 2, 3, 4], b"cells")
    again = shelf(tmp_path, model)
    entry, shared = again.longest_prefix([1, 2, 3, 9])
    assert entry is not None and entry.tokens == [1, 2, 3, 4] and shared == 3
    assert again.read(entry) == bytearray(b"cells")


def test_another_configuration_finds_nothing(tmp_path: Path) -> None:
    model = model_file(tmp_path)
    shelf(tmp_path, model).write([1, 2, 3], b"cells")
    assert shelf(tmp_path, model, config="0.3.36:4:2048:False").longest_prefix([1, 2, 3]) == (
        None,
        0,
    )


def test_a_changed_model_file_drops_its_conversations(tmp_path: Path) -> None:
    model = model_file(tmp_path)
    first = shelf(tmp_path, model)
    first.write([1, 2, 3], b"cells")
    Path(model).write_bytes(b"other weights")
    assert shelf(tmp_path, model).entries == []
    assert not first.folder.exists()


def test_a_model_file_edited_in_its_middle_at_the_same_size_and_time_drops_them(
    tmp_path: Path,
) -> None:
    """Past the first and last MiB, which the fingerprint hashes, with the modification time
    set back: only the file's change time tells."""
    model = model_file(tmp_path, bytes(3 << 20))
    first = shelf(tmp_path, model)
    first.write([1, 2, 3], b"cells")
    before = os.stat(model)
    with open(model, "r+b") as f:
        f.seek(3 << 19)
        f.write(b"\x01")
    os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(model)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert shelf(tmp_path, model).entries == []
    assert not first.folder.exists()


def test_a_conversation_that_an_entry_holds_already_is_not_written_again(tmp_path: Path) -> None:
    saved = shelf(tmp_path, model_file(tmp_path))
    assert saved.write([1, 2, 3], b"cells")
    assert not saved.write([1, 2], b"cell")
    assert len(saved.entries) == 1


def test_a_longer_conversation_replaces_the_entry_it_extends(tmp_path: Path) -> None:
    saved = shelf(tmp_path, model_file(tmp_path))
    saved.write([1, 2], b"cell")
    saved.write([1, 2, 3], b"cells")
    assert [e.tokens for e in saved.entries] == [[1, 2, 3]]
    assert len(list(saved.folder.iterdir())) == 1


def test_the_least_recently_used_files_go_first_to_stay_within_the_limit(tmp_path: Path) -> None:
    saved = shelf(tmp_path, model_file(tmp_path), limit=60)  # two of these 28-byte files
    for first in (1, 2, 3):
        saved.write([first, 0], b"x" * 10)
    old = next(e for e in saved.entries if e.tokens[0] == 1)
    os.utime(next(e for e in saved.entries if e.tokens[0] == 2).path, ns=(1, 1))
    saved.trim()
    assert sorted(e.tokens[0] for e in saved.entries) == [1, 3]
    assert saved.read(old) == bytearray(b"x" * 10)


def test_an_unreadable_file_is_dropped_at_load(tmp_path: Path) -> None:
    model = model_file(tmp_path)
    saved = shelf(tmp_path, model)
    saved.write([1, 2, 3], b"cells")
    saved.entries[0].path.write_bytes(b"garbage")
    assert shelf(tmp_path, model).entries == []


def test_the_prompt_cache_spills_its_entries_and_finds_them_after_a_reload(tmp_path: Path) -> None:
    model = model_file(tmp_path)
    cache = PromptCache(1000, shelf(tmp_path, model))
    cache.add([1, 2, 3], bytearray(b"first"))
    assert cache.spill([SavedPrompt([7, 8, 9], bytearray(b"slot"))]) == 2
    reloaded = PromptCache(1000, shelf(tmp_path, model))
    entry, shared = reloaded.longest_prefix([7, 8, 9, 10])
    assert entry is not None and shared == 3
    assert reloaded.state_of(entry) == bytearray(b"slot")
    reloaded.used(entry, shared)
    assert reloaded.stats()["disk_hits"] == 1 and reloaded.stats()["disk_entries"] == 2


def test_a_spilled_entry_the_backend_refuses_is_dropped(tmp_path: Path) -> None:
    model = model_file(tmp_path)
    PromptCache(1000, shelf(tmp_path, model)).spill([SavedPrompt([1, 2, 3], bytearray(b"x"))])
    reloaded = PromptCache(1000, shelf(tmp_path, model))
    entry, _ = reloaded.longest_prefix([1, 2, 3])
    assert entry is not None
    reloaded.refused(entry)
    assert reloaded.longest_prefix([1, 2, 3]) == (None, 0)
    assert PromptCache(1000, shelf(tmp_path, model)).longest_prefix([1, 2, 3]) == (None, 0)


def test_saved_conversations_are_readable_by_their_user_only(tmp_path: Path) -> None:
    saved = shelf(tmp_path, model_file(tmp_path))
    saved.write([1, 2, 3], b"cells")
    assert saved.entries[0].path.stat().st_mode & 0o777 == 0o600
    assert saved.folder.stat().st_mode & 0o777 == 0o700
