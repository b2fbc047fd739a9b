"""How the daemon's log lines look: text for people, or `--log-format json`: one JSON object
a line, with a request's fields (server/http/request_log.py) as an object of its own."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request = getattr(record, "request", None)
        if request is not None:
            entry["request"] = request
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(level: int, json_lines: bool) -> None:
    logging.basicConfig(level=level, format=TEXT)
    if json_lines:
        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonFormatter())
