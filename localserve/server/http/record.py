"""A request's record: what its log line and its metrics say of it, kept on the request from
its arrival (server/http/request_log.py) to its end (request_log and metrics read it once)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from localserve.engine.worker_client.stream import RequestStream

# nginx's status for a client that left before its answer was whole.
CLIENT_LEFT = 499


@dataclass
class Record:
    id: str
    face: str
    path: str
    started: float
    model: str | None = None
    sequence: RequestStream | None = None
    status: int = 0
    seconds: float = 0.0
    # What the server changed of the request instead of refusing it, by response header (a
    # num_ctx above the loaded context, schema keywords left unenforced): sent and logged.
    notices: dict[str, str] = field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        seq = self.sequence
        out: dict[str, Any] = {
            "id": self.id,
            "face": self.face,
            "path": self.path,
            "model": self.model,
            "status": self.status,
            "seconds": round(self.seconds, 4),
        }
        if self.notices:
            out["notices"] = dict(self.notices)
        if seq is not None:
            ttft = seq.timings().ttft_s
            out.update(
                prompt_tokens=seq.prompt_tokens,
                cached_tokens=seq.cached_tokens,
                generated_tokens=seq.completion_tokens,
                ttft=round(ttft, 4) if ttft is not None else None,
                ended=seq.finish_reason or ("cancelled" if self.status == CLIENT_LEFT else None),
            )
        return out

    def line(self, fields: dict[str, Any] | None = None) -> str:
        f = fields or self.fields()
        text = f"{f['id']} {f['face']} {f['path']} {f['model'] or '-'} {f['status']}"
        if self.sequence is not None:
            ttft = f"{f['ttft']:.3f}s" if f["ttft"] is not None else "-"
            text += (
                f" prompt={f['prompt_tokens']} cached={f['cached_tokens']} "
                f"generated={f['generated_tokens']} ttft={ttft}"
            )
        text += f" total={self.seconds:.3f}s"
        if self.sequence is not None:
            text += f" ended={f['ended'] or '-'}"
        for header, notice in self.notices.items():
            text += f" {header.removeprefix('X-Localserve-').lower()}={notice!r}"
        return text
