#!/usr/bin/env python3
"""What other shapes of the uncontended acquire + release would cost Redis, beside the crate's.

    cargo build --release --example load
    scripts/script-shapes.py              # 5 rounds of every shape, alternated

It records the `uncontended exclusive-uncohorted` scenario of the `load` example (scripted acquires:
without cohorting there is no plain path) as scripts/script-costs.py
does (its own redis-server, PORT 7121 by default), then replays each script's first call 40,000
times on fresh lock names in each shape, one round after the other:

- `evalsha`: the scripts as the crate sends them;
- `fcall`: the same sources, each wrapped whole in a function of a Redis 7 library (its helpers
  are still created on every call);
- `fcall, helpers once`: a library that defines the helpers of common.lua once, when it is
  loaded, and the two bodies as functions (the clock's memo reset on every call);
- `string record`: a sketch of a lock kept as a plain string (`<owner>|<token>`, `SET ... PX`)
  instead of a hash, with the same clock-floored token and the same retired block: the free
  lock's path only (no re-entry, no waiters), to tell what the record's shape costs.

Printed: Redis's µs per call (INFO commandstats) of the acquire and the release, and their sum,
beside the hand-rolled lock's `SET NX PX` and compare-and-delete replayed the same way. A
measurement only (BENCHMARKS.md, "What an acquisition costs Redis and the client").

    CALLGRIND=1 CALLS=4000 ROUNDS=1 scripts/script-shapes.py

counts instead the instructions redis-server runs per call (thousands; valgrind's callgrind,
zeroed before and dumped after each replay), which unlike µs do not move with the VM's hour.
"""
import contextlib
import glob
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

os.environ.setdefault("PORT", "7121")
HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("costs", os.path.join(HERE, "script-costs.py"))
costs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(costs)
cli, words, resp = costs.cli, costs.words, costs.resp

SOURCES = os.path.join(HERE, "..", "src", "backend", "redis")
ROUNDS = int(os.environ.get("ROUNDS", "5"))
CALLGRIND = os.environ.get("CALLGRIND") == "1"
UNIT = "k instructions" if CALLGRIND else "µs"


# The string-record sketch, with the keys and arguments of the crate's calls: the acquire's KEYS
# are lock, waiting managers, fencing counter, fair queue; the release's lock, waiting managers,
# fair queue, fencing counter; ARGV[1] is the owner, the acquire's ARGV[2] the lease.
STRING_ACQUIRE = """
if redis.call('EXISTS', KEYS[1], KEYS[4]) == 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local token = math.max(now, tonumber(redis.call('GET', KEYS[3]) or '0') + 1)
  redis.call('SET', KEYS[1], ARGV[1] .. '|' .. string.format('%d', token), 'PX', ARGV[2])
  return token
end
return -1
"""
STRING_RELEASE = """
local held = redis.call('GET', KEYS[1])
if not held then return -1 end
local bar = string.find(held, '|', 1, true)
if string.sub(held, 1, bar - 1) ~= ARGV[1] then return -1 end
redis.call('DEL', KEYS[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(string.sub(held, bar + 1)) + 63
if last >= now and last > tonumber(redis.call('GET', KEYS[4]) or '0') then
  redis.call('SET', KEYS[4], string.format('%d', last), 'PX', '60000')
end
return 0
"""


def first_calls(lines):
    """The loaded sources by sha, and the first acquire and release calls (in that order)."""
    sources, firsts = {}, {}
    for line in lines:
        if re.search(r'"(?:script|SCRIPT)" "(?:load|LOAD)"', line):
            # MONITOR escapes each byte: the source's UTF-8 (comments say µs) comes back whole
            source = words(line)[-1].encode("latin1").decode("utf-8")
            sources[cli("script", "load", source).strip()] = source
        elif '"EVALSHA"' in line:
            args = words(line)
            firsts.setdefault(args[1], args)
    return sources, list(firsts.values())[:2]


def library(name, prefix, acquire, release, helpers=""):
    """A function library with `<prefix>_acquire` and `<prefix>_release`."""
    def body(fn, source):
        return f"local function {fn}(KEYS, ARGV)\n{source}\nend\n"

    reset = "clock_us = nil; " if helpers else ""
    return (
        f"#!lua name={name}\n{helpers}\n"
        + body("acquire_body", acquire)
        + body("release_body", release)
        + f"redis.register_function('{prefix}_acquire', function(k, a) {reset}return acquire_body(k, a) end)\n"
        + f"redis.register_function('{prefix}_release', function(k, a) {reset}return release_body(k, a) end)\n"
    )


def per_call(calls, command):
    """µs per call of `command` (thousands of instructions under CALLGRIND) sending `calls`."""
    if CALLGRIND:
        return instructions_per_call(calls)
    cli("config", "resetstat")
    cli("--pipe", stdin="".join(resp(c) for c in calls))
    stats = re.search(rf"cmdstat_{command}:calls=(\d+),usec=(\d+)", cli("info", "commandstats"))
    return int(stats.group(2)) / int(stats.group(1))


CALLGRIND_OUT = os.path.join(tempfile.gettempdir(), f"script-shapes-{os.getpid()}.cg")
callgrind_pid = []


@contextlib.contextmanager
def server_under_callgrind():
    """The replays' redis-server on PORT, run by valgrind's callgrind."""
    runner = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={CALLGRIND_OUT}"]
    try:
        with costs.own_server(runner) as server:
            callgrind_pid.append(str(server.pid))
            yield
    finally:
        for dump in glob.glob(CALLGRIND_OUT + "*"):
            os.remove(dump)


def instructions_per_call(calls):
    """Thousands of instructions redis-server ran per call while `calls` were sent."""
    subprocess.run(["callgrind_control", "-z", callgrind_pid[0]], capture_output=True)
    cli("--pipe", stdin="".join(resp(c) for c in calls))
    subprocess.run(["callgrind_control", "-d", callgrind_pid[0]], capture_output=True)
    dump = max(glob.glob(CALLGRIND_OUT + ".*"), key=os.path.getmtime)
    with open(dump) as f:
        total = int(re.search(r"^summary: (\d+)", f.read(), re.M).group(1))
    return total / len(calls) / 1000


def replay(first, call):
    """µs per call of `first` (a recorded EVALSHA) replayed on fresh locks, sent as `call`."""
    lock = re.search(r"load%3A\d+", first[3]).group(0)
    calls = [
        call([a.replace(lock, f"bench%3A{i}") for a in first]) for i in range(costs.CALLS)
    ]
    return per_call(calls, call(first)[0].lower())


def main():
    with server_under_callgrind() if CALLGRIND else costs.own_server():
        with tempfile.TemporaryDirectory() as dir:
            # without cohorting: the acquire is the script, not the plain path
            lines = costs.record("exclusive-uncohorted", f"{dir}/exclusive.txt")
        sources, (acquire, release) = first_calls(lines)
        # the release replayed must be the acquire's owner's, or it would find nothing to release
        release = release[:7] + [acquire[7]] + release[8:]
        bodies = [open(os.path.join(SOURCES, f)).read() for f in ("acquire.lua", "release.lua")]
        helpers = open(os.path.join(SOURCES, "common.lua")).read()
        cli("function", "flush")
        cli("function", "load", library("tl_whole", "whole", sources[acquire[1]], sources[release[1]]))
        cli("function", "load", library("tl_once", "once", *bodies, helpers=helpers))
        cad = cli("script", "load", "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                  "return redis.call('DEL', KEYS[1]) end return 0").strip()
        record = {
            "acquire": cli("script", "load", STRING_ACQUIRE).strip(),
            "release": cli("script", "load", STRING_RELEASE).strip(),
        }
        ways = {
            "evalsha": lambda script: lambda a: a,
            "string record": lambda script: lambda a: ["EVALSHA", record[script]] + a[2:],
            "fcall": lambda script: lambda a: ["FCALL", f"whole_{script}"] + a[2:],
            "fcall, helpers once": lambda script: lambda a: ["FCALL", f"once_{script}"] + a[2:],
        }
        for round in range(1, ROUNDS + 1):
            for way, call in ways.items():
                cli("flushall")
                a = replay(acquire, call("acquire"))
                r = replay(release, call("release"))
                left = int(cli("dbsize"))
                if left:
                    sys.exit(f"{way}: the releases left {left} keys, so they released nothing")
                print(f"{way:<20} acquire {a:.2f} + release {r:.2f} = {a + r:.2f} {UNIT}  (round {round})")
            cli("flushall")
            owner = "1aa1dc3bbd474e5cab828cd1cf0d9f6c:2"
            sets = [["SET", f"{{bench%3A{i}}}", owner, "NX", "PX", "30000"] for i in range(costs.CALLS)]
            dels = [["EVALSHA", cad, "1", f"{{bench%3A{i}}}", owner] for i in range(costs.CALLS)]
            s, d = per_call(sets, "set"), per_call(dels, "evalsha")
            print(f"{'hand-rolled':<20} SET NX {s:.2f} + compare-and-delete {d:.2f} = {s + d:.2f} {UNIT}")


if __name__ == "__main__":
    sys.exit(main())
