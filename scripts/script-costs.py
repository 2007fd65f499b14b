#!/usr/bin/env python3
"""Redis's own time per call of the lock scripts on the uncontended path, without the network.

    cargo build --release --example load
    scripts/script-costs.py                    # exclusive and fair, 40,000 calls each, twice
    LOAD_BIN=/tmp/load-old scripts/script-costs.py    # another build of the scripts

It starts a redis-server of its own (PORT, 7120 by default), records with MONITOR the calls that the
`load` example's `uncontended` scenario makes for one second, then replays the first acquire (its
script, or the plain path's four commands) and the first release 40,000 times on fresh lock names
through `redis-cli --pipe` (every acquire before its release) and reads the microseconds Redis
spent per call from INFO commandstats. The figure is the script's
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


def client_of(line):
    """The client address of a MONITOR line (`... [0 127.0.0.1:5432] ...`)."""
    return line.split("]", 1)[0].rsplit(" ", 1)[-1]


def plain_acquire(lines):
    """The first acquire taken on the plain path (`SET NX PX`, then `GET`, `TIME`, `EXISTS` from
    the same client), as a list of commands; None when every acquire was a script."""
    for at, line in enumerate(lines):
        if '"SET"' in line and '"NX"' in line:
            client = client_of(line)
            rest = [l for l in lines[at + 1:] if client_of(l) == client][:3]
            return [words(line)] + [words(l) for l in rest]
    return None


def lock_name(args):
    """The recorded lock's name in a command's arguments (`load%3A<n>`)."""
    return next(re.search(r"load%3A\d+", a).group(0) for a in args if re.search(r"load%3A\d+", a))


def usec_per_call(calls, commands):
    """Send `calls` (each a list of commands) and read Redis's µs per call from commandstats."""
    cli("config", "resetstat")
    cli("--pipe", stdin="".join(resp(c) for call in calls for c in call))
    stats = cli("info", "commandstats")
    usec = sum(
        int(m.group(1))
        for command in set(commands)
        for m in [re.search(rf"cmdstat_{command}:calls=\d+,usec=(\d+)", stats)]
        if m
    )
    return usec / len(calls)


def replay(lines):
    """Per step (the acquire, the release): its name and Redis's µs per call."""
    cli("flushall")
    firsts = {}
    for line in lines:
        if re.search(r'"(?:script|SCRIPT)" "(?:load|LOAD)"', line):
            cli("script", "load", words(line)[-1])
        elif '"EVALSHA"' in line:
            args = words(line)
            firsts.setdefault(args[1], args)
    scripts = list(firsts.values())
    plain = plain_acquire(lines)
    # the release replayed must be the acquire's owner's (ARGV[1], after the keys), or it would
    # find nothing to release and return at once
    owner_at = lambda args: 3 + int(args[2])
    if plain:
        # a plain release names its hold by the lock's value (its last argument), `[!]owner|n`
        acquire, release = plain, scripts[0]
        value = plain[0][2]
        release[owner_at(release)] = value.lstrip("!").split("|")[0]
        release[-1] = value
    else:
        acquire, release = [scripts[0]], scripts[1]
        release[owner_at(release)] = acquire[0][owner_at(acquire[0])]
    costs = []
    for name, commands in [("acquire", acquire), ("release", [release])]:
        lock = lock_name(commands[0])
        calls = [
            [[a.replace(lock, f"bench%3A{i}") for a in c] for c in commands] for i in range(CALLS)
        ]
        names = [c[0].lower() for c in commands]
        label = "plain acquire" if name == "acquire" and plain else name
        costs.append((label, usec_per_call(calls, names)))
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
