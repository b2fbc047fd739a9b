"""Frames to an engine worker keep their order, and a large one does not hold its sender until
the worker reads it (engine/worker_client/sender.py)."""

from __future__ import annotations

import socket

from localserve.engine.worker_client.sender import INLINE, Sender


def read_all(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        data += sock.recv(1 << 20)
    return bytes(data)


def test_a_large_frame_returns_before_the_worker_reads_it() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        big = b"x" * (16 << 20)  # far more than the socket's buffer holds
        Sender(ours, "test").send(big)  # would block here if sent on the caller's thread
        assert read_all(theirs, len(big)) == big


def test_small_frames_after_a_large_one_arrive_after_it() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        sender = Sender(ours, "test")
        frames = [b"a" * (4 * INLINE), b"b", b"c" * 10, b"d" * (2 * INLINE), b"e"]
        for frame in frames:
            sender.send(frame)
        expected = b"".join(frames)
        assert read_all(theirs, len(expected)) == expected


def test_a_closed_socket_drops_the_frame_quietly() -> None:
    ours, theirs = socket.socketpair()
    theirs.close()
    with ours:
        sender = Sender(ours, "test")
        sender.send(b"small")
        sender.send(b"x" * (4 * INLINE))
