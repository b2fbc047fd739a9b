"""Hugging Face references and the hub's HTTP layout.

A reference names files on a hub: `hf://ORG/REPO/FILE.gguf` (one file), `hf://ORG/REPO/FOLDER`
or `hf://ORG/REPO` (an ONNX model folder), and `ORG/REPO:QUANT` (the repo's GGUF of that
quantization). The hub's address comes from HF_ENDPOINT, as in huggingface_hub, which serves
mirrors and lets the tests run a hub on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from localserve.store.names import BadName, check_relative_path

DEFAULT_ENDPOINT = "https://huggingface.co"
_REPO_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
_QUANT = re.compile(r"[A-Za-z0-9_]{1,32}")
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,127}")


class PullError(RuntimeError):
    """A download that failed, said so that a person knows what to do."""

    def __init__(self, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class HubRef:
    org: str
    repo: str
    path: str = ""  # a file, a folder, or "" for the whole repo
    quant: str | None = None
    revision: str = "main"

    @property
    def repo_id(self) -> str:
        return f"{self.org}/{self.repo}"

    @property
    def is_file(self) -> bool:
        return self.path.lower().endswith(".gguf")

    def __str__(self) -> str:
        tail = f"/{self.path}" if self.path else ""
        quant = f":{self.quant}" if self.quant else ""
        return f"hf://{self.repo_id}{tail}{quant}"


def looks_like_ref(text: str) -> bool:
    """`hf://...` or `org/repo:QUANT`; anything else is a name (or a local path)."""
    return text.startswith("hf://") or bool(re.fullmatch(r"[^/:\s]+/[^/:\s]+:[^/:\s]+", text))


def parse_ref(text: str, revision: str = "main") -> HubRef:
    """Parse and check a reference; nothing in it may escape a URL path or the store."""
    if "\0" in text or "\\" in text or "?" in text or "#" in text or "%" in text:
        raise BadName(f"invalid model reference '{text[:120]!r}'")
    body = text[len("hf://") :] if text.startswith("hf://") else text
    body, _, quant = body.partition(":")
    parts = body.split("/")
    if len(parts) < 2:
        raise BadName(
            f"invalid model reference '{text}': expected hf://ORG/REPO/FILE or ORG/REPO:QUANT"
        )
    org, repo, rest = parts[0], parts[1], "/".join(parts[2:])
    for part in (org, repo):
        if not _REPO_PART.fullmatch(part) or ".." in part:
            raise BadName(f"invalid model reference '{text}': bad organisation or repo name")
    if rest:
        check_relative_path(rest)
    if quant and not _QUANT.fullmatch(quant):
        raise BadName(f"invalid quantization '{quant}' in '{text}'")
    if not _REVISION.fullmatch(revision) or ".." in revision:
        raise BadName(f"invalid revision '{revision}'")
    return HubRef(org, repo, rest, quant or None, revision)


@dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int | None
    sha256: str | None


def timeout_s() -> float:
    """Seconds without a byte before a pull gives up (LOCALSERVE_PULL_TIMEOUT, default 30)."""
    return float(os.environ.get("LOCALSERVE_PULL_TIMEOUT", "30"))


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


def auth_headers() -> dict[str, str]:
    token = os.environ.get("HF_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


def file_url(ref: HubRef, path: str) -> str:
    quoted = urllib.parse.quote(path)
    rev = urllib.parse.quote(ref.revision, safe="")
    return f"{endpoint()}/{ref.repo_id}/resolve/{rev}/{quoted}"


def explain_http_error(status: int, url: str) -> PullError:
    if status == 404:
        return PullError(
            f"not found on the hub (404): {url}; check the name, file and revision", 404
        )
    if status in (401, 403):
        return PullError(
            f"the hub refused access ({status}) to {url}: the repo may be gated or private; "
            "accept its license on the hub and set HF_TOKEN",
            status,
        )
    return PullError(f"the hub answered {status} for {url}", 502)


def list_files(ref: HubRef) -> list[RemoteFile]:
    """Every file of the repo at the revision, with LFS sizes and sha256 where the hub has them."""
    rev = urllib.parse.quote(ref.revision, safe="")
    url = f"{endpoint()}/api/models/{ref.repo_id}/revision/{rev}?blobs=true"
    request = urllib.request.Request(url, headers=auth_headers())
    try:
        with urllib.request.urlopen(request, timeout=timeout_s()) as response:
            listing = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise explain_http_error(exc.code, url) from None
    except (TimeoutError, OSError) as exc:
        raise PullError(f"cannot reach the hub at {endpoint()}: {exc}", 504) from None
    except ValueError:
        raise PullError(f"the hub's listing at {url} is not JSON") from None
    files = []
    for sibling in listing.get("siblings", []):
        lfs = sibling.get("lfs") or {}
        sha = lfs.get("sha256") or lfs.get("oid")
        size = lfs.get("size", sibling.get("size"))
        files.append(RemoteFile(sibling["rfilename"], size, sha if isinstance(sha, str) else None))
    return files


def pick_files(ref: HubRef, files: list[RemoteFile]) -> list[RemoteFile]:
    """The files a reference means: one GGUF, the GGUF of a quant, or every file of a folder."""
    if ref.quant:
        want = ref.quant.lower()
        ggufs = [f for f in files if f.path.lower().endswith(".gguf")]
        hits = [f for f in ggufs if re.search(rf"[-_.]{re.escape(want)}\.gguf$", f.path.lower())]
        if not hits:
            quants = sorted(
                {
                    m.group(1)
                    for f in ggufs
                    if (m := re.search(r"[-_.]([A-Za-z0-9_]+)\.gguf$", f.path))
                }
            )
            raise PullError(
                f"{ref.repo_id} has no {ref.quant} GGUF; "
                f"it has: {', '.join(quants) or 'no GGUF files'}",
                404,
            )
        return [min(hits, key=lambda f: len(f.path))]
    if ref.is_file:
        hit = [f for f in files if f.path == ref.path]
        if not hit:
            raise PullError(f"{ref.repo_id} has no file {ref.path}", 404)
        return hit
    prefix = f"{ref.path}/" if ref.path else ""
    folder = [f for f in files if f.path.startswith(prefix)]
    if not folder:
        raise PullError(f"{ref.repo_id} has no folder {ref.path or '/'}", 404)
    return folder
