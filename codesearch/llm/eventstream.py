"""AWS event-stream framing (``application/vnd.amazon.eventstream``), in which Amazon Bedrock's
ConverseStream sends its answer.

    for message in decode(response.iter_bytes()):
        message.headers[":event-type"], json.loads(message.payload)

A message is, big-endian throughout::

    total length (4) | headers length (4) | prelude CRC32 (4) | headers | payload | message CRC32 (4)

The prelude CRC covers the first 8 bytes, the message CRC every byte before it. A header is
``name length (1) | name | value type (1) | value``; the value types are 0/1 true/false, 2 byte,
3 int16, 4 int32, 5 int64, 6 byte array and 7 string (a 2-byte length first), 8 timestamp
(int64 milliseconds), 9 UUID (16 bytes). Any inconsistency — a CRC that does not match,
lengths that do not add up, an unknown value type, a stream that ends inside a message — is
a `FrameError`: a corrupted stream is never read as an answer.

`encode` writes a message with string headers (what Bedrock sends); the tests' fake Bedrock
uses it, and checks it against published frames.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from codesearch.llm.sse import StreamError

PRELUDE_LENGTH = 12
#: Prelude, its CRC and the message CRC: a message with no headers and no payload.
MIN_LENGTH = 16
#: Limits of the format (larger lengths mean a corrupted prelude).
MAX_HEADERS_LENGTH = 128 * 1024
MAX_PAYLOAD_LENGTH = 16 * 1024 * 1024
STRING = 7


class FrameError(StreamError):
    """The bytes are not a well-formed event-stream message."""


@dataclass
class Message:
    headers: dict[str, Any] = field(default_factory=dict)
    payload: bytes = b""


def _crc(data: bytes, start: int = 0) -> int:
    return zlib.crc32(data, start) & 0xFFFFFFFF


def encode(headers: dict[str, str], payload: bytes) -> bytes:
    """One message with string-valued `headers` and `payload`."""
    raw = b""
    for name, value in headers.items():
        n, v = name.encode("utf-8"), value.encode("utf-8")
        raw += struct.pack("!B", len(n)) + n + struct.pack("!BH", STRING, len(v)) + v
    total = PRELUDE_LENGTH + len(raw) + len(payload) + 4
    prelude = struct.pack("!II", total, len(raw))
    head = prelude + struct.pack("!I", _crc(prelude)) + raw + payload
    return head + struct.pack("!I", _crc(head))


_FIXED = {2: "!b", 3: "!h", 4: "!i", 5: "!q", 8: "!q"}


def _headers(raw: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    i = 0
    try:
        while i < len(raw):
            n = raw[i]
            name = raw[i + 1 : i + 1 + n].decode("utf-8")
            i += 1 + n
            kind = raw[i]
            i += 1
            if kind in (0, 1):
                value: Any = kind == 0
            elif kind in _FIXED:
                size = struct.calcsize(_FIXED[kind])
                (value,) = struct.unpack(_FIXED[kind], raw[i : i + size])
                i += size
            elif kind in (6, STRING):
                (length,) = struct.unpack("!H", raw[i : i + 2])
                value = raw[i + 2 : i + 2 + length]
                if len(value) != length:
                    raise FrameError("a header value runs past the headers")
                value = value.decode("utf-8") if kind == STRING else value
                i += 2 + length
            elif kind == 9:
                value = raw[i : i + 16]
                i += 16
            else:
                raise FrameError(f"header {name!r} has an unknown value type {kind}")
            if name in out:
                raise FrameError(f"header {name!r} appears twice")
            out[name] = value
    except (IndexError, struct.error, UnicodeDecodeError):
        raise FrameError("the headers of a message are malformed") from None
    if i != len(raw):
        raise FrameError("a header value runs past the headers")
    return out


def decode(chunks: Iterable[bytes]) -> Iterator[Message]:
    """The messages of a byte stream arriving in `chunks` of any size, each checked."""
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        while len(buffer) >= PRELUDE_LENGTH:
            total, headers_length, prelude_crc = struct.unpack("!III", buffer[:PRELUDE_LENGTH])
            if _crc(buffer[:8]) != prelude_crc:
                raise FrameError("a message's prelude CRC does not match (the stream is corrupted)")
            if (
                total < MIN_LENGTH
                or headers_length > MAX_HEADERS_LENGTH
                or headers_length > total - MIN_LENGTH
                or total - MIN_LENGTH - headers_length > MAX_PAYLOAD_LENGTH
            ):
                raise FrameError(f"a message's lengths do not add up (total {total}, headers {headers_length})")
            if len(buffer) < total:
                break
            message, buffer = buffer[:total], buffer[total:]
            (message_crc,) = struct.unpack("!I", message[-4:])
            if _crc(message[:-4]) != message_crc:
                raise FrameError("a message's CRC does not match (the stream is corrupted)")
            end = PRELUDE_LENGTH + headers_length
            yield Message(_headers(message[PRELUDE_LENGTH:end]), message[end:-4])
    if buffer:
        raise FrameError(f"the stream ended inside a message ({len(buffer)} bytes left over)")
