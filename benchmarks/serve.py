"""`ctxengine serve` against the CLI: one build of the demo through the MCP client over stdio.

    python benchmarks/serve.py [--repeat N]

Measured in one run, on the bundled demo with the same request: a build through the MCP SDK's
own client talking to ``python -m ctxengine serve`` over stdio (warm: after the first call), the
same build in-process (the build alone, no server), ``ctxengine build`` as a fresh process, and
one tiktoken pass over the context. Target (issue 13): serve <= 30 ms + one tiktoken pass.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time

from timing import median_seconds

REQUEST = "Fix the login endpoint: a bad password must return 401"
TARGET_MS = 30.0


async def serve_seconds(project: str, repeat: int) -> tuple[float, float, str]:
    """(first call, median warm call) seconds of build_context through the MCP client, and the context."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "ctxengine", "serve"], env=dict(os.environ))
    arguments = {"project": project, "request": REQUEST}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        start = time.perf_counter()
        result = await session.call_tool("build_context", arguments)
        first = time.perf_counter() - start
        if result.is_error:
            raise SystemExit(f"serve: {result.content[0].text}")
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            await session.call_tool("build_context", arguments)
            times.append(time.perf_counter() - start)
    times.sort()
    return first, times[len(times) // 2], result.content[0].text


def cli_command() -> list[str]:
    """``ctxengine build`` on the demo: the console script beside this interpreter, else ``-m ctxengine``."""
    script = shutil.which("ctxengine", path=os.path.dirname(sys.executable))
    head = [script] if script else [sys.executable, "-m", "ctxengine"]
    return head + ["build", "--request", REQUEST]


def main() -> None:
    import anyio

    import ctxengine
    from ctxengine.nodes.lib.tokens import token_counter_for

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30, help="warm calls to time (default 30)")
    args = parser.parse_args()
    demo = str(ctxengine.bundled_example())

    first, serve, context = anyio.run(serve_seconds, demo, args.repeat)
    ctxengine.build_context(demo, REQUEST)  # warm-up of this process
    in_process = median_seconds(lambda: ctxengine.build_context(demo, REQUEST), args.repeat)
    counter = token_counter_for("cl100k_base")
    tiktoken_pass = median_seconds(lambda: counter.count(context), args.repeat)
    cli_out = subprocess.run(cli_command(), check=True, capture_output=True, text=True).stdout
    cli = median_seconds(lambda: subprocess.run(cli_command(), check=True, capture_output=True), max(3, args.repeat // 6))
    same = "same context" if cli_out.rstrip("\n") == context.rstrip("\n") else "CONTEXT DIFFERS from the CLI's"

    print(f"demo build, {counter.count(context)} tokens ({same}); medians of {args.repeat} warm calls\n")
    rows = [("serve (MCP client over stdio, warm)", serve), ("serve, first call (after warm-up)", first),
            ("in-process build_context (no server)", in_process), ("ctxengine build (CLI subprocess)", cli),
            ("one tiktoken pass of the output", tiktoken_pass)]
    for name, seconds in rows:
        print(f"{name:<40} {seconds * 1000:>9.1f} ms")
    budget = TARGET_MS / 1000 + tiktoken_pass
    verdict = "within" if serve <= budget else "OVER"
    print(f"\nserve / CLI:                {serve / cli:.3f} (CLI is {cli / serve:.0f}x slower)")
    print(f"serve / tiktoken pass:      {serve / tiktoken_pass:.1f}")
    print(f"serve - in-process build:   {(serve - in_process) * 1000:.1f} ms (the server's own path)")
    print(f"target serve <= {TARGET_MS:.0f} ms + one tiktoken pass = {budget * 1000:.1f} ms: {verdict}")


if __name__ == "__main__":
    main()
