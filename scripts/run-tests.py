#!/usr/bin/env python3
"""Runs every test binary of `cargo test --all-features --locked`, several at a time.

Most of the suite waits: on redis-server processes it starts, on leases running out, on fault
schedules. One after another, the binaries took their times added up while the two cores were
mostly idle; three at a time, longest first, they share the cores. The binaries that keep the
cores busy (the protocol model's exhaustive checks) run alone afterwards, so that they take no
time from the timing bounds of the others. Then the doctests run, as `cargo test` runs them.

    python3 scripts/run-tests.py      # exit status 0 when every binary passed

Each binary's output is printed whole when it ends, with its time; a summary comes last.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

# Test binaries that keep both cores busy: run alone, after the others.
ALONE = {"model"}

# How many binaries run at once (`TESTS_AT_ONCE` overrides): more, and the timing bounds of some
# tests (a hand-off within so long, a cluster's nodes answering) no longer hold on 2 cores.
AT_ONCE = int(os.environ.get("TESTS_AT_ONCE", "3"))

# The chaos run keeps about one core busy: it counts as two.
WEIGHT = {"chaos": 2}

# The longest binaries start first, so that the short ones fill in beside them.
LONGEST_FIRST = ["backend", "safety", "chaos", "max_hold", "differential", "crash", "cli"]

CARGO = ["cargo", "test", "--all-features", "--locked"]


def test_binaries():
    """(name, executable) of every test binary `cargo test` runs, built now."""
    build = subprocess.run(
        CARGO + ["--no-run", "--message-format=json-render-diagnostics"],
        stdout=subprocess.PIPE,
        check=True,
        text=True,
    )
    binaries = []
    for line in build.stdout.splitlines():
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message["profile"]["test"]:
            continue
        target = message["target"]
        name = target["name"] if "test" in target["kind"] else f"{target['kind'][0]} {target['name']}"
        binaries.append((name, message["executable"]))
    return binaries


def start(name, executable):
    """Starts one binary with its output going to a temporary file."""
    output = tempfile.TemporaryFile()
    env = dict(os.environ, CARGO_MANIFEST_DIR=os.getcwd())
    process = subprocess.Popen(
        [executable], stdout=output, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL
    )
    return {"name": name, "process": process, "output": output, "began": time.monotonic()}


def finish(run):
    """Waits for one started binary, prints its output; returns (name, seconds, passed)."""
    status = run["process"].wait()
    seconds = time.monotonic() - run["began"]
    run["output"].seek(0)
    print(f"\n===== {run['name']}: {'ok' if status == 0 else f'FAILED (exit {status})'}, {seconds:.1f} s")
    sys.stdout.flush()
    sys.stdout.buffer.write(run["output"].read())
    sys.stdout.flush()
    return run["name"], seconds, status == 0


def run_at_once(binaries):
    """Runs `binaries`, up to AT_ONCE at a time, longest first; results in the order they ended."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    waiting = sorted(binaries, key=lambda b: rank.get(b[0], len(rank)))
    running, results = [], []
    while waiting or running:
        busy = sum(WEIGHT.get(r["name"], 1) for r in running)
        if waiting and (not running or busy + WEIGHT.get(waiting[0][0], 1) <= AT_ONCE):
            running.append(start(*waiting.pop(0)))
            continue
        ended = next((r for r in running if r["process"].poll() is not None), None)
        if ended is None:
            time.sleep(0.2)
            continue
        running.remove(ended)
        results.append(finish(ended))
    return results


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    binaries = test_binaries()
    began = time.monotonic()
    results = run_at_once([b for b in binaries if b[0] not in ALONE])
    for binary in (b for b in binaries if b[0] in ALONE):
        results += run_at_once([binary])
    doc_began = time.monotonic()
    doctests = subprocess.run(CARGO + ["--doc"])
    results.append(("doctests", time.monotonic() - doc_began, doctests.returncode == 0))
    print(f"\n===== {len(results)} test binaries in {time.monotonic() - began:.0f} s")
    for name, seconds, passed in sorted(results, key=lambda r: -r[1]):
        print(f"  {'ok    ' if passed else 'FAILED'} {seconds:6.1f} s  {name}")
    failed = [name for name, _, passed in results if not passed]
    if failed:
        print(f"failed: {', '.join(failed)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
