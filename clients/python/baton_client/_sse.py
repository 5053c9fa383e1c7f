"""A bounded reader of a ``text/event-stream`` body (the server-sent events format).

Rules:

- Lines end with LF (a CR before it is dropped); a blank line ends an event;
  ``event:`` names it, ``data:`` lines are joined with LF, ``:`` lines
  (keep-alives) and other fields are ignored.
- Bounded: a line, or an event's data, longer than ``max_bytes`` raises
  StreamTooLong instead of growing without end.
- The end of the body ends the iteration; a partial event at a cut is dropped,
  never dispatched.
"""

from typing import Iterator, List, Tuple

__all__ = ["StreamTooLong", "events", "MAX_EVENT_BYTES"]

#: A LockEvent is well under 2 KB; an error message a few hundred bytes.
MAX_EVENT_BYTES = 1024 * 1024


class StreamTooLong(Exception):
    """The stream sent a line or an event over the bound."""


def events(response, max_bytes: int = MAX_EVENT_BYTES, chunk_size: int = 65536) -> Iterator[Tuple[str, str]]:
    """Yields ``(event name, data)`` for each complete event read from ``response`` (anything with ``read1``)."""
    buffer = b""
    name = ""
    data: List[bytes] = []
    size = 0
    while True:
        chunk = response.read1(chunk_size)
        if not chunk:
            return
        buffer += chunk
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            line = buffer[start:end]
            start = end + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if data or name:
                    yield (name or "message", b"\n".join(data).decode("utf-8", "replace"))
                name, data, size = "", [], 0
                continue
            if line.startswith(b":"):
                continue
            field, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if field == b"event":
                name = value.decode("utf-8", "replace")
            elif field == b"data":
                size += len(value) + 1
                if size > max_bytes:
                    raise StreamTooLong(f"an event over {max_bytes} bytes")
                data.append(value)
        buffer = buffer[start:]
        if len(buffer) > max_bytes:
            raise StreamTooLong(f"a line over {max_bytes} bytes")
