"""Pulling from a hub on 127.0.0.1 that serves real GGUF bytes: names, references, failures."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from localserve.ground.errors import ModelNotFound
from localserve.store.hub import PullError
from localserve.store.library import Library
from localserve.store.names import parse_name
from tests.support.hub_server import Hub, sha256_of
from tests.support.store_support import (  # noqa: F401 - fixtures
    SMOL_FILE,
    SMOL_REPO,
    Events,
    blobs,
    hub,
    hub_env,
    library,
    partials,
    smol_bytes,
    truncated_copy,
)


def listed(library: Library) -> set[str]:
    return {str(m.name) for m in library.models()}


def test_pull_by_catalog_name_registers_the_verified_file(library: Library) -> None:
    events = Events()
    manifest = library.pull("tiny:135m", events)
    assert str(manifest.name) == "tiny:135m"
    assert manifest.files[0].digest == "sha256:" + sha256_of(smol_bytes())
    assert "tiny:135m" in listed(library)
    assert events.statuses[0] == "pulling manifest" and events.statuses[-1] == "success"
    assert "writing manifest" in events.statuses


def test_pull_reports_download_progress_with_total_and_completed(library: Library) -> None:
    events = Events()
    library.pull("tiny:135m", events)
    progress = [e for e in events.seen if "completed" in e]
    size = smol_bytes().stat().st_size
    assert progress and progress[-1]["completed"] == progress[-1]["total"] == size


def test_pull_by_hf_reference_is_stored_under_the_file_name(library: Library) -> None:
    manifest = library.pull(f"hf://{SMOL_REPO}/{SMOL_FILE}", Events())
    assert manifest.name.short == "smollm2-135m-instruct-q4_1"
    assert library.resolve("smollm2-135m-instruct-q4_1").path == str(
        library.store.blob_path(manifest.files[0].digest)
    )


def test_pull_by_repo_and_quant_picks_that_quant(library: Library) -> None:
    manifest = library.pull(f"{SMOL_REPO}:Q4_1", Events())
    assert str(manifest.name) == "smollm2-135m-instruct:q4_1"
    assert manifest.files[0].path == SMOL_FILE


def test_pull_of_a_quant_the_repo_lacks_names_the_ones_it_has(library: Library) -> None:
    with pytest.raises(PullError, match="no Q8_0 GGUF; it has: Q4_1"):
        library.pull(f"{SMOL_REPO}:Q8_0", Events())


def test_the_embedded_default_needs_no_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    lib = Library(tmp_path / "store")
    events = Events()
    lib.pull("smollm2", events)
    assert events.statuses[-1] == "success"
    assert "smollm2:latest" in listed(lib)
    assert Path(lib.resolve("smollm2").path).is_file()


def test_wrong_bytes_from_the_server_are_rejected_and_nothing_is_registered(
    library: Library, hub: Hub, tmp_path: Path
) -> None:
    impostor = tmp_path / "impostor.gguf"
    impostor.write_bytes(smol_bytes().read_bytes()[::-1])
    hub.add("evil/repo", "model.gguf", smol_bytes(), serve_instead=impostor)
    with pytest.raises(PullError, match="does not match its sha256"):
        library.pull("hf://evil/repo/model.gguf", Events())
    assert "model:latest" not in listed(library)
    assert blobs(library) == set() and partials(library) == []


def test_a_truncated_gguf_is_refused_at_pull(library: Library, hub: Hub, tmp_path: Path) -> None:
    hub.add("broken/repo", "half.gguf", truncated_copy(smol_bytes(), tmp_path))
    with pytest.raises(PullError, match="not a usable GGUF"):
        library.pull("hf://broken/repo/half.gguf", Events())
    assert "half:latest" not in listed(library)
    assert blobs(library) == set()


def test_an_interrupted_download_never_appears_in_list(library: Library, hub: Hub) -> None:
    hub.add("slow/repo", "stalls.gguf", smol_bytes(), stall_after=4 << 20)
    with pytest.raises(PullError, match="pull again to resume"):
        library.pull("hf://slow/repo/stalls.gguf", Events())
    assert "stalls:latest" not in listed(library)
    assert partials(library)  # kept, so the next pull resumes


def test_a_missing_file_is_a_clear_404(library: Library) -> None:
    with pytest.raises(PullError, match="no file nothere.gguf") as info:
        library.pull(f"hf://{SMOL_REPO}/nothere.gguf", Events())
    assert info.value.status == 404


def test_an_unknown_repo_is_a_clear_404(library: Library) -> None:
    with pytest.raises(PullError, match=r"not found on the hub \(404\)"):
        library.pull("hf://nobody/nothing/x.gguf", Events())


def test_a_gated_file_says_to_set_hf_token(library: Library, hub: Hub) -> None:
    hub.add("gated/repo", "model.gguf", smol_bytes(), status=401)
    with pytest.raises(PullError, match="HF_TOKEN") as info:
        library.pull("hf://gated/repo/model.gguf", Events())
    assert info.value.status == 401


def test_an_unknown_name_suggests_catalog_names(library: Library) -> None:
    with pytest.raises(ModelNotFound, match="did you mean llama3"):
        library.pull("lama3", Events())


def test_concurrent_pulls_of_one_blob_download_it_once(library: Library, hub: Hub) -> None:
    errors: list[BaseException] = []

    def pull(text: str) -> None:
        try:
            library.pull(text, Events())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=pull, args=(t,))
        for t in ("tiny:135m", f"hf://{SMOL_REPO}/{SMOL_FILE}")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    downloads = [r for r in hub.requests if r[0].endswith("/" + SMOL_FILE)]
    assert len(downloads) == 1
    assert len(blobs(library)) == 1


def test_delete_frees_only_blobs_no_other_model_references(
    library: Library, hub: Hub, tmp_path: Path
) -> None:
    from localserve.store.importer import import_model

    library.pull("tiny:135m", Events())
    library.pull(f"hf://{SMOL_REPO}/{SMOL_FILE}", Events())  # the same blob, a second name
    other = tmp_path / "other.gguf"
    other.write_bytes(smol_bytes().read_bytes())
    import_model(library.store, other, "copied", copy=True)
    assert len(blobs(library)) == 1  # identical bytes are one blob

    assert library.delete("tiny:135m") == 0  # still referenced twice
    assert len(blobs(library)) == 1
    library.delete("smollm2-135m-instruct-q4_1")
    assert len(blobs(library)) == 1  # "copied" still holds it
    assert library.delete("copied") == smol_bytes().stat().st_size
    assert blobs(library) == set()
    assert listed(library) == {"smollm2:latest"}


def test_deleting_the_embedded_default_is_refused(library: Library) -> None:
    from localserve.ground.errors import BadRequest

    with pytest.raises(BadRequest, match="ships inside"):
        library.delete("smollm2")


def test_a_pulled_model_resolves_to_its_blob(library: Library) -> None:
    manifest = library.pull("tiny:135m", Events())
    ref = library.resolve("tiny:135m")
    assert ref.name == "tiny:135m" and ref.format == "gguf"
    assert ref.path == str(library.store.blob_path(manifest.files[0].digest))
    assert parse_name("TINY:135M") == manifest.name
