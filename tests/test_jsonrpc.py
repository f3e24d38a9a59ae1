"""The peer layer: the one read loop's verdict on every kind of line, and the pending table
(fast tier)."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from typing import Any

import pytest

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import BadLine
from acpctl.jsonrpc.channel import memory_pair
from acpctl.jsonrpc.peer import Peer
from acpctl.jsonrpc.pending import PendingRequests


def read_all(data: bytes, max_line: int = jsonrpc.MAX_LINE_BYTES) -> list[Any]:
    async def main() -> list[Any]:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return [item async for batch in jsonrpc.read_messages(reader, max_line) for item in batch]

    return asyncio.run(main())


def test_each_kind_of_bad_line_gets_a_parse_error_and_reading_goes_on() -> None:
    items = read_all(
        b'{"a":1}\n\nnot json\n\xc3\x28\n' + b"[" * 50_000 + b"\n" + b"x" * 200 + b"\n" + b'{"b":2}'
    )
    assert items[0] == ({"a": 1}, b'{"a":1}')
    bad = items[1:5]
    assert all(isinstance(b, BadLine) and b.error.code == acp.PARSE_ERROR for b in bad)
    messages = [b.error.message for b in bad]
    assert "invalid UTF-8" in messages[1] and "nested too deeply" in messages[2]
    assert items[5] == ({"b": 2}, b'{"b":2}')  # a last line without a newline still counts


def test_an_oversized_line_is_skipped_whole() -> None:
    items = read_all(b"1\n" + b"y" * 5000 + b"\n2\n", max_line=1000)
    assert items[0] == (1, b"1") and items[2] == (2, b"2")
    assert isinstance(items[1], BadLine) and "exceeds" in items[1].error.message


def expected_lines(data: bytes, max_line: int) -> list[bytes | None]:
    """What read_lines must give, whatever the reads: every line, None for one too long,
    and a last line without its newline at the end."""
    *lines, last = data.split(b"\n")
    if last:
        lines.append(last)
    return [line if len(line) <= max_line else None for line in lines]


def test_lines_come_whole_however_the_reads_cut_them() -> None:
    """Reads that end anywhere: inside a line, on its newline, inside a line too long
    (skipped whole, to its newline), several lines at once."""

    async def read(pieces: list[bytes], max_line: int) -> list[bytes | None]:
        reader = asyncio.StreamReader()

        async def feed() -> None:
            for piece in pieces:
                reader.feed_data(piece)
                await asyncio.sleep(0)  # the reader takes this piece alone
            reader.feed_eof()

        feeding = asyncio.create_task(feed())
        lines = [line async for batch in jsonrpc.read_lines(reader, max_line) for line in batch]
        await feeding
        return lines

    generator = random.Random(16)
    for _ in range(300):
        lines = [b"x" * generator.choice([0, 1, 5, 20, 40, 41, 90]) for _ in range(12)]
        data = b"\n".join(lines) + generator.choice([b"", b"\n"])
        cuts = sorted(generator.sample(range(1, len(data)), min(len(data) - 1, 6)))
        pieces = [data[a:b] for a, b in itertools.pairwise([0, *cuts, len(data)])]
        assert asyncio.run(read(pieces, 40)) == expected_lines(data, 40), pieces


def test_pending_requests() -> None:
    async def main() -> None:
        seen: list[Any] = []
        table: PendingRequests[int] = PendingRequests(itertools.count(1))
        first, future = table.register("a", on_response=seen.append)
        second, other = table.register("b")
        assert (first, second) == (1, 2) and table.id_of(other) == 2
        assert table.resolve(99, {}) is None and table.resolve([1], {}) is None
        table.resolve(1, {"result": 1})
        assert future.result() == {"result": 1} and seen == [{"result": 1}]
        table.register("b")
        table.settle("b", {"result": "settled"})
        assert other.result() == {"result": "settled"} and len(table) == 0
        _, last = table.register("c")
        table.fail_all(lambda entry: {"error": entry.method})
        assert last.result() == {"error": "c"}

    asyncio.run(main())


def test_unwrap_and_ids() -> None:
    assert jsonrpc.unwrap({"result": 5}) == 5
    with pytest.raises(jsonrpc.RpcError) as raised:
        jsonrpc.unwrap({"error": {"code": "x", "message": "m"}})
    assert (raised.value.code, raised.value.message) == (acp.INTERNAL_ERROR, "m")
    assert jsonrpc.is_id(1) and jsonrpc.is_id("a") and jsonrpc.is_id(None)
    assert not jsonrpc.is_id(True) and not jsonrpc.is_id(1.5)
    assert jsonrpc.id_key(1) != jsonrpc.id_key("1")


def test_a_peer_matches_answers_hands_on_the_rest_and_settles_what_waits_at_the_end() -> None:
    async def main() -> None:
        ours, theirs = memory_pair()
        peer: Peer[int] = Peer(ours.write)
        heard: list[Any] = []
        bad: list[BadLine] = []
        batches = 0

        async def batch_end() -> None:
            nonlocal batches
            batches += 1

        async def closed() -> Any:
            return lambda entry: jsonrpc.error(None, -1, f"gone during {entry.method}")

        reading = asyncio.ensure_future(
            peer.read(
                ours.incoming(), lambda m, line: heard.append(m), bad.append, batch_end, closed
            )
        )
        answered = peer.call("first", {"x": 1})
        waiting = peer.call("second")
        sent = [item async for batch in _first_batch(theirs) for item in batch]
        assert [m["method"] for m, _ in sent] == ["first", "second"]
        theirs.write(
            b'{"jsonrpc":"2.0","id":1,"result":7}\n'
            b'{"jsonrpc":"2.0","id":99,"result":0}\n'
            b'{"jsonrpc":"2.0","method":"note"}\nnot json\n'
        )
        assert (await answered)["result"] == 7
        theirs.close()
        await reading
        assert (await waiting)["error"]["message"] == "gone during second"
        assert [m.get("method") or m.get("id") for m in heard] == [99, "note"]
        assert len(bad) == 1 and batches >= 1

    asyncio.run(main())


def test_a_peer_settles_what_waits_even_when_its_reader_fails() -> None:
    async def main() -> None:
        ours, theirs = memory_pair()
        peer: Peer[int] = Peer(ours.write)

        async def failing_batch_end() -> None:
            raise RuntimeError("a bug in the owner")

        waiting = peer.call("q")
        theirs.write(b'{"jsonrpc":"2.0","method":"note"}\n')
        with pytest.raises(RuntimeError):
            await peer.read(ours.incoming(), lambda m, line: None, None, failing_batch_end)
        assert "the connection closed during q" in (await waiting)["error"]["message"]

    asyncio.run(main())


def test_a_call_after_the_stream_ended_is_answered_at_once() -> None:
    """Issue 40: `sessions attach` waited forever for a prompt typed after the host went,
    since a call made after the stream's end was registered and never answered."""

    async def main() -> None:
        ours, theirs = memory_pair()
        written: list[bytes] = []
        peer: Peer[int] = Peer(written.append)

        async def closed() -> Any:
            return lambda entry: jsonrpc.error(None, -1, f"gone during {entry.method}")

        theirs.close()
        await peer.read(ours.incoming(), lambda m, line: None, None, None, closed)
        late = peer.call("session/prompt", {})
        assert late.done() and late.result()["error"]["message"] == "gone during session/prompt"
        pi_style = peer.command("prompt", {})
        assert pi_style.done() and "gone during prompt" in pi_style.result()["error"]["message"]
        assert written == []  # nothing sent into a stream that ended
        assert len(peer.pending) == 0

    asyncio.run(main())


async def _first_batch(channel: Any) -> Any:
    async for batch in channel.incoming():
        yield batch
        return


def test_a_peers_batch_is_taken_member_by_member_in_order() -> None:
    """Issue 32, 4: JSON-RPC 2.0 allows batches both ways; a batch from the agent was
    dropped whole. Its responses settle their requests; the rest go on, each with a line
    of its own."""

    async def main() -> None:
        ours, theirs = memory_pair()
        peer: Peer[int] = Peer(ours.write)
        heard: list[tuple[Any, bytes]] = []
        reading = asyncio.ensure_future(
            peer.read(ours.incoming(), lambda m, line: heard.append((m, line)))
        )
        answered = peer.call("first")
        theirs.write(
            b'[{"jsonrpc":"2.0","method":"a","params":{"n":1}},'
            b'{"jsonrpc":"2.0","id":1,"result":"done"},'
            b'{"jsonrpc":"2.0","id":"q","method":"b"}]\n'
        )
        assert (await answered)["result"] == "done"
        theirs.close()
        await reading
        assert [m["method"] for m, _ in heard] == ["a", "b"]
        assert [json.loads(line) for _, line in heard] == [m for m, _ in heard]

    asyncio.run(main())


def test_a_memory_pipe_carries_lines_holds_back_a_writer_ahead_and_ends() -> None:
    """The in-process pipe between the terminal and its link (issue 53, 3): lines arrive
    whole, a writer far ahead of its reader waits in room() until the reader takes some,
    and a close ends the reader's lines; what is written after it is dropped."""
    from acpctl.jsonrpc.framing import READ_CHUNK, read_lines
    from acpctl.jsonrpc.streams import MemoryPipe

    async def scenario() -> None:
        pipe = MemoryPipe()
        pipe.write(b'{"a": 1}\n{"b"')
        pipe.write(b": 2}\n")
        lines = read_lines(pipe.reader)
        assert await anext(lines) == [b'{"a": 1}', b'{"b": 2}']
        pipe.write(b"x" * (3 * READ_CHUNK) + b"\n")  # past twice the reader's limit
        room = asyncio.ensure_future(pipe.room())
        await asyncio.sleep(0)
        assert not room.done()  # held back
        await pipe.reader.read(2 * READ_CHUNK + 1)
        await asyncio.wait_for(room, 5)  # the reader is back within its limit: room again
        pipe.close()
        pipe.write(b"dropped\n")
        rest = await pipe.reader.read()
        assert rest == b"x" * (READ_CHUNK - 1) + b"\n"

    asyncio.run(scenario())
