"""A SIMULATED OpenAI-compatible judge endpoint, for benchmarking the orchestration only.

    .venv/bin/python benchmarks/llm_simulator.py [--port 0] [--latency-ms 0] [--port-file PATH]

It is not an LLM and not a test double for the project's tests (they run the real CPU stack): it exists so
that `benchmarks/bench_orchestration.py` can drive the real fan-out, checkpoints, cache and output writing
at the paper's request count (141,570 judge calls) in minutes. It answers `GET /v1/models` and
`POST /v1/chat/completions` with a valid CCRS score (an integer 0-100, or `{"score": N}` when the request
asks for a JSON `response_format`) derived from a hash of the request body, so the same request always
gets the same score, at once or after `--latency-ms`. `usage.prompt_tokens` is a character estimate.

A bare asyncio HTTP/1.1 server (keep-alive, Content-Length bodies), so that on a 2-core machine the
simulator takes as little CPU as possible away from the orchestration it measures. It counts the
completions it served and prints the count on SIGTERM/SIGINT.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
import zlib
from pathlib import Path

MODEL = "simulated-judge"


class Simulator(asyncio.Protocol):
    served = 0

    def __init__(self, latency_s: float):
        self.latency_s = latency_s
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            end = head_end + 4 + length
            if len(self.buffer) < end:
                return
            body, self.buffer = self.buffer[head_end + 4:end], self.buffer[end:]
            method, path = head.split(" ", 2)[:2]
            reply = self.respond(method, path, body)
            if self.latency_s and path.endswith("/chat/completions"):
                asyncio.get_running_loop().call_later(self.latency_s, self._write, reply)
            else:
                self._write(reply)

    def _write(self, reply: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(reply)

    @staticmethod
    def respond(method: str, path: str, body: bytes) -> bytes:
        if method == "GET" and path.rstrip("/").endswith("/models"):
            return _http(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        if method == "POST" and path.endswith("/chat/completions"):
            Simulator.served += 1
            digest = zlib.crc32(body)
            score = digest % 101
            content = json.dumps({"score": score}) if b'"response_format"' in body else str(score)
            return _http(200, {
                "id": f"sim-{digest:08x}", "object": "chat.completion", "model": MODEL,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(body) // 4, "completion_tokens": 2,
                          "total_tokens": len(body) // 4 + 2},
            })
        return _http(404, {"error": f"no route {method} {path}"})

    def connection_lost(self, exc) -> None:
        self.transport = None


def _http(status: int, payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    reason = "OK" if status == 200 else "Not Found"
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def serve(port: int, latency_s: float, port_file: Path | None) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Simulator(latency_s), "127.0.0.1", port, backlog=1024)
    bound = server.sockets[0].getsockname()[1]
    if port_file:
        port_file.write_text(str(bound))
    print(f"llm simulator on http://127.0.0.1:{bound}/v1 (latency {latency_s * 1000:.0f} ms)", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()
    print(f"llm simulator served {Simulator.served} completions", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 = a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--port-file", type=Path, help="write the bound port here once listening")
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.latency_ms / 1000.0, args.port_file))


if __name__ == "__main__":
    main()
