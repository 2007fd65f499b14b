#!/usr/bin/env python3
"""Redis's own time per call of the lock scripts on the uncontended path, without the network.

    cargo build --release --example load
    scripts/script-costs.py                    # exclusive and fair, 40,000 calls each, twice
    LOAD_BIN=/tmp/load-old scripts/script-costs.py    # another build of the scripts

It starts a redis-server of its own (PORT, 7120 by default), records with MONITOR the calls that the
`load` example's `uncontended` scenario makes for one second, then replays each script's first call
40,000 times on fresh lock names through `redis-cli --pipe` (every acquire before its release) and
reads the microseconds Redis spent per call from INFO commandstats. The figure is the script's
execution alone: no round trip, no client, no event loop. Compare two builds in one invocation (run
it once per LOAD_BIN, alternately): the machine's speed drifts between hours.
"""
import codecs
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time

PORT = os.environ.get("PORT", "7120")
LOAD = os.environ.get("LOAD_BIN", "target/release/examples/load")
CALLS = int(os.environ.get("CALLS", "40000"))


def cli(*args, stdin=None):
    return subprocess.run(
        ["redis-cli", "-p", PORT, *args], capture_output=True, text=True, input=stdin
    ).stdout


def words(line):
    """The quoted words of a MONITOR line, unescaped."""
    quoted = re.findall(r'"((?:[^"\\]|\\.)*)"', line.split("]", 1)[1])
    return [codecs.decode(w.encode("latin1"), "unicode_escape") for w in quoted]


def resp(args):
    out = f"*{len(args)}\r\n"
    for arg in args:
        out += f"${len(arg.encode('latin1'))}\r\n{arg}\r\n"
    return out


def record(mode, path):
    """MONITOR's lines while the load example runs `uncontended <mode>` for a second."""
    cli("script", "flush")
    with open(path, "w") as out:
        monitor = subprocess.Popen(["redis-cli", "-p", PORT, "monitor"], stdout=out)
        time.sleep(0.3)
        env = dict(os.environ, REDIS_URL=f"redis://127.0.0.1:{PORT}", LOAD_SECS="1")
        subprocess.run([LOAD, f"uncontended {mode}"], env=env, capture_output=True)
        time.sleep(0.3)
        monitor.terminate()
        monitor.wait()
    return open(path, encoding="latin1").read().splitlines()


def replay(lines):
    """Per script (in order of first use): its name and Redis's µs per call."""
    cli("flushall")
    firsts = {}
    for line in lines:
        if re.search(r'"(?:script|SCRIPT)" "(?:load|LOAD)"', line):
            cli("script", "load", words(line)[-1])
        elif '"EVALSHA"' in line:
            args = words(line)
            firsts.setdefault(args[1], args)
    acquire, release = list(firsts.values())[:2]
    # the release replayed must be the acquire's owner's (ARGV[1], after the keys), or it would
    # find nothing to release and return at once
    owner_at = lambda args: 3 + int(args[2])
    release[owner_at(release)] = acquire[owner_at(acquire)]
    costs = []
    for name, args in [("acquire", acquire), ("release", release)]:
        lock = re.search(r"load%3A\d+", args[3]).group(0)
        calls = "".join(
            resp([a.replace(lock, f"bench%3A{i}") for a in args]) for i in range(CALLS)
        )
        cli("config", "resetstat")
        cli("--pipe", stdin=calls)
        stats = re.search(r"cmdstat_evalsha:calls=(\d+),usec=(\d+)", cli("info", "commandstats"))
        costs.append((name, int(stats.group(2)) / int(stats.group(1))))
    left = int(cli("dbsize"))
    if left:
        sys.exit(f"the releases left {left} keys, so they released nothing")
    return costs


@contextlib.contextmanager
def own_server(runner=()):
    """A redis-server of this script's own on PORT, run by `runner` (e.g. valgrind and its options)
    if given, shut down when the block ends; the block gets its process."""
    server = subprocess.Popen(
        [*runner, "redis-server", "--port", PORT, "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL if runner else None,
    )
    try:
        while cli("ping").strip() != "PONG":
            time.sleep(0.1)
        yield server
    finally:
        cli("shutdown", "nosave")
        server.wait()


def main():
    with own_server():
        with tempfile.TemporaryDirectory() as dir:
            recorded = {m: record(m, f"{dir}/{m}.txt") for m in ["exclusive", "fair"]}
            for run in [1, 2]:
                for mode, lines in recorded.items():
                    costs = replay(lines)
                    total = sum(us for _, us in costs)
                    parts = ", ".join(f"{name} {us:.2f} µs" for name, us in costs)
                    print(f"{mode:<9} {parts}; together {total:.2f} µs  (run {run})")


if __name__ == "__main__":
    sys.exit(main())
