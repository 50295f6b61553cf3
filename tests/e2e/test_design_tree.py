#!/usr/bin/env python3
"""test_design_tree.py - docs/DESIGN.md's tree ("The tree") matches the
folders of the repository.

The tree is the first thing a newcomer reads; it must name every folder
that holds code and no folder that is gone. The rules, both ways:
- every folder under service/ and include/, at any depth, is in the tree;
- every other folder down to two levels (bench/, tests/unit/, web/js/, ...)
  is in the tree;
- every folder the tree names exists.
Folders are those git knows (tracked, or new and not ignored), so build
folders, node_modules and caches never count. The tree is the first
fenced block under "## The tree": one folder per line, a name ending in
"/" (a line may name a path, "include/commitwatch/"), indented two spaces
per level under its parent; text after the name is its description.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import SOURCE, Checks  # noqa: E402
from cwtest import require  # noqa: E402

FULL_DEPTH = ("service", "include")  # every folder below these, at any depth


def tree_folders(design_text):
    """The folders DESIGN.md's tree names, as paths relative to the root."""
    m = re.search(r"^## The tree\s*\n(.*?)^```[^\n]*\n(.*?)^```", design_text, re.S | re.M)
    if not m:
        return None
    stack = []  # (indent, path) of the enclosing folders
    out = []
    for line in m.group(2).splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        name = line.strip().split()[0]
        if not name.endswith("/"):
            continue  # a description continued on its own line
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = (stack[-1][1] + "/" if stack else "") + name.rstrip("/")
        out.append(path)
        stack.append((indent, path))
    return out


def repo_folders(root):
    """Every folder holding a file git tracks or would track."""
    r = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"],
                       capture_output=True, text=True)
    require(r.returncode == 0, "git ls-files in the source tree (" + r.stderr.strip() + ")")
    folders = set()
    for f in r.stdout.splitlines():
        parts = f.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            folders.add("/".join(parts[:i]))
    return {d for d in folders if not d.startswith(".") and os.path.isdir(os.path.join(root, d))}


def must_be_listed(folder):
    top = folder.split("/")[0]
    return top in FULL_DEPTH or folder.count("/") <= 1


def main():
    t = Checks()
    with open(os.path.join(SOURCE, "docs", "DESIGN.md"), encoding="utf-8") as f:
        listed = tree_folders(f.read())
    if not t.check("DESIGN.md has a fenced tree under '## The tree'", listed is not None):
        t.done()
    listed_set = set(listed)
    t.check("the tree names each folder once", len(listed) == len(listed_set),
            sorted({d for d in listed if listed.count(d) > 1}))
    real = repo_folders(SOURCE)
    # A listed path implies its parents ("include/commitwatch/" names include too).
    implied = set()
    for d in listed_set:
        parts = d.split("/")
        implied.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    missing = sorted(d for d in real if must_be_listed(d) and d not in implied)
    t.check("every folder of the repository is in the tree", not missing, missing)
    gone = sorted(d for d in listed_set if not os.path.isdir(os.path.join(SOURCE, d)))
    t.check("every folder the tree names exists", not gone, gone)
    print(f"{len(listed_set)} folders in the tree, {len(real)} in the repository", flush=True)
    t.done()


if __name__ == "__main__":
    main()
