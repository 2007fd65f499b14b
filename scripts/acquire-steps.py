#!/usr/bin/env python3
"""What each top-level statement of the uncontended exclusive acquire script costs inside Redis.

    cargo build --release --example load
    scripts/acquire-steps.py

It records the acquire script of the `load` example's `uncontended exclusive` scenario (as
scripts/script-costs.py does), then replays it 20,000 times on fresh locks, each time with
`do return 1 end` inserted before another top-level statement, and prints Redis's µs per call from
INFO commandstats: the difference between two rows is what the statements between them cost.
Beside them: `return 1` with the same arguments (the call itself) and the hand-rolled lock's
compare-and-delete script.
"""
import hashlib
import importlib.util
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("script_costs", os.path.join(HERE, "script-costs.py"))
sc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sc)
cli, words, resp = sc.cli, sc.words, sc.resp
CALLS = 20000


def main():
    with sc.own_server():
        lines = sc.record("exclusive", "/tmp/acquire-steps-monitor.txt")
        scripts, firsts = {}, {}
        for line in lines:
            if re.search(r'"(?:script|SCRIPT)" "(?:load|LOAD)"', line):
                text = words(line)[-1]
                scripts[hashlib.sha1(text.encode("latin1")).hexdigest()] = text
            elif '"EVALSHA"' in line:
                args = words(line)
                firsts.setdefault(args[1], args)
        args = list(firsts.values())[0]
        text = scripts[args[1]]
        lock = re.search(r"load%3A\d+", args[3]).group(0)

        def cost(body):
            cli("flushall")
            sha = cli("script", "load", body).strip()
            calls = "".join(
                resp(["EVALSHA", sha] + [a.replace(lock, f"bench%3A{i}") for a in args[2:]])
                for i in range(CALLS)
            )
            cli("config", "resetstat")
            cli("--pipe", stdin=calls)
            stats = re.search(r"cmdstat_evalsha:calls=(\d+),usec=(\d+)", cli("info", "commandstats"))
            return int(stats.group(2)) / int(stats.group(1))

        print(f"{'the whole acquire':<40} {cost(text):6.2f} µs")
        print(f"{'return 1, same arguments':<40} {cost('return 1'):6.2f} µs")
        cad = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
        print(f"{'compare-and-delete (hand-rolled lock)':<40} {cost(cad):6.2f} µs")
        body = text.split("\n")
        for i, line in enumerate(body):
            top = line and not line[0].isspace() and not line.startswith(("--", "end", "else", "local function"))
            if top:
                cut = "\n".join(body[:i] + ["do return 1 end"] + body[i:])
                print(f"{'cut before: ' + line[:60]:<72} {cost(cut):6.2f} µs")


if __name__ == "__main__":
    sys.exit(main())
