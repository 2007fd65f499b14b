#!/usr/bin/env python3
"""Check the Markdown documents, without the network.

    python3 scripts/check-docs.py

- Every relative link of README.md, BENCHMARKS.md and src/guide/*.md names a file or directory
  that exists, and its #anchor (if any) a heading of that Markdown file, spelled as GitHub spells
  heading anchors. Links with a scheme (https:, mailto:) and rustdoc paths (crate::..., super::...)
  are left out: `cargo doc` with -D warnings checks the latter.
- README.md is at most 250 lines and BENCHMARKS.md at most 400: the README is a first day's read
  and BENCHMARKS.md a report of current figures, not a history.

Exits 1, listing every problem, when one is found.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = {"README.md": 250, "BENCHMARKS.md": 400}

LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def documents():
    yield "README.md"
    yield "BENCHMARKS.md"
    guide = os.path.join(ROOT, "src", "guide")
    for name in sorted(os.listdir(guide)):
        if name.endswith(".md"):
            yield os.path.join("src", "guide", name)


def prose_lines(text, keep_code=False):
    """The lines outside fenced code blocks, with their numbers; inline code removed unless kept."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line if keep_code else re.sub(r"`[^`]*`", "", line)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen, found = {}, set()
    with open(path, encoding="utf-8") as f:
        for _, line in prose_lines(f.read(), keep_code=True):
            m = re.match(r"^#{1,6}\s+(.*)$", line)
            if not m:
                continue
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def check_links(doc, problems):
    path = os.path.join(ROOT, doc)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for number, line in prose_lines(text):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or "::" in target:
                continue  # a URL, or a rustdoc path
            file_part, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            where = f"{doc}:{number}: {target}"
            if not os.path.exists(full):
                problems.append(f"{where}: no such file")
                continue
            if anchor and full.endswith(".md") and anchor not in anchors(full):
                problems.append(f"{where}: no heading with that anchor")


def main():
    problems = []
    for doc in documents():
        check_links(doc, problems)
    for doc, limit in MAX_LINES.items():
        with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
            lines = len(f.read().splitlines())
        if lines > limit:
            problems.append(f"{doc}: {lines} lines, more than {limit}")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"check-docs: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("check-docs: links and lengths ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
