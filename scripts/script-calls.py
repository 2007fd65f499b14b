#!/usr/bin/env python3
"""The script calls per HTTP request in a MONITOR capture of the `http_load` service, by script and
by the commands each call ran (the path it took): `scripts/command-stats.sh` with MONITOR=1. With
--slowlog, each script's median microseconds per call in a SLOWLOG dump (`redis-cli --json
slowlog get`): `scripts/command-stats.sh` with SLOWLOG=1.

    scripts/script-calls.py monitor.txt
    scripts/script-calls.py --slowlog slowlog.json

A request is counted by the service's `INCRBY served`; each `EVALSHA` line is followed by the
commands its script ran (`[0 lua]`).
"""
import collections
import json
import re
import statistics
import sys


def slowlog(path):
    """Median, quartiles and count of each script's and command's microseconds per call."""
    times = collections.defaultdict(list)
    for entry in json.load(open(path)):
        words = entry[3]
        name = f"{words[1][:8]} ({words[2]} keys)" if words[0].upper() == "EVALSHA" else words[0]
        times[name].append(entry[2])
    print("microseconds per call (median; quartiles; calls):")
    for name, spent in sorted(times.items(), key=lambda item: -sum(item[1]))[:12]:
        spent.sort()
        quartiles = f"{spent[len(spent) // 4]}–{spent[3 * len(spent) // 4]}"
        print(f"  {name:22s} {statistics.median(spent):5.1f}; {quartiles:7s}; {len(spent)}")


if sys.argv[1] == "--slowlog":
    slowlog(sys.argv[2])
    sys.exit()

requests, calls, current = 0, collections.Counter(), None
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r'^[\d.]+ \[\d+ ([^\]]+)\] "([^"]+)"(.*)$', line)
    if not m:
        continue
    who, command, rest = m.groups()
    if who == "lua":
        if current is not None:
            current.append(command)
        continue
    if current is not None:
        calls[" ".join(current)] += 1
    current = None
    if command == "INCRBY" and '"served"' in rest:
        requests += 1
    elif command == "EVALSHA":
        words = rest.split('"')
        current = [f"{words[1][:8]} ({words[3]} keys):"]
if current is not None:
    calls[" ".join(current)] += 1
print(f"script calls per request, by the commands they ran ({requests} requests under MONITOR):")
for shape, count in calls.most_common(12):
    print(f"  {count / max(requests, 1):.3f}  {shape}")
