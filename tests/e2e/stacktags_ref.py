"""stacktags_ref.py - an independent reference for stack tags: reads the
WPA .stacktags rule files themselves (xml.etree) and tags a stack by the
rules of docs/STACKTAGS.md, without the binary. Tests compare the
service's tags with it, so a tagging bug in the C matcher (or in `tags
explain`, which shares it) no longer agrees with itself.

    tag_of = stacktags_ref.tagger("windows")                  # the defaults
    tag_of = stacktags_ref.tagger("windows", rules=[FILE])    # named files
    tag_of(("app.exe!main", "ntdll.dll!RtlAllocateHeap"))      # -> "Windows Heap"

The rules (docs/STACKTAGS.md, ../shared/ARCHITECTURE.md "Stack tags"):
- a tag's name is its path from the top joined with "\\" (a Name may hold
  "\\" itself); the root Tag with an empty name only groups; a tag without
  Priority inherits its parent's, a top-level one has 0;
- patterns: "*" is any run of characters, all else literal; Method
  omitted or empty matches any function; modules compare ASCII
  case-insensitively by base name, .dll/.exe/.sys optional on either side
  (a pattern without one matches a module with one; a pattern with one
  matches a module without any extension); functions case-sensitively,
  a trailing "+0x1f" offset ignored; a frame without "!" is a module;
- a frame maps to the deepest tag with a matching entrypoint; equal
  depth: higher priority, then the rule loaded first;
- a stack's tag: the highest priority among its frames' tags; equal
  priorities go to the frame nearest the allocating call (the last);
  nothing matched: "Other"; a last frame "(...)" is a pseudo-stack, tagged
  with its own text;
- several files load in order: a later file's Priority (if given) and
  entrypoints (if any) replace those of a tag path defined before; within
  one file a repeated tag merges; unknown elements are transparent.
"""

import os
import re
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("CW_SOURCE", os.path.join(HERE, "..", ".."))
WIN_EXTS = (".dll", ".exe", ".sys")
OTHER = "Other"
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def default_rules(platform):
    return os.path.join(SOURCE, "service", "stacks", "rules", f"{platform}.stacktags")


def _glob(pattern):
    """A compiled full match for a pattern whose only wildcard is '*'."""
    return re.compile("(?s)" + ".*".join(re.escape(p) for p in pattern.split("*")) + r"\Z")


def _win_ext(name):
    return name.endswith(WIN_EXTS)


class Rule:
    def __init__(self, path, module, method, order):
        self.path, self.order = path, order
        self.module_pattern, self.method_pattern = module, method  # as written
        self.module = module.translate(_LOWER)
        self.method = method or ""
        self._mod = _glob(self.module)
        self._mod_noext = _glob(self.module[:-4]) if _win_ext(self.module) else None
        self._fn = _glob(self.method) if self.method else None

    def module_matches(self, module):
        if self._mod.match(module):
            return True
        if self._mod_noext is None:  # a pattern without an extension...
            return _win_ext(module) and bool(self._mod.match(module[:-4]))  # ...a module with one
        return "." not in module and bool(self._mod_noext.match(module))  # ...and the other way

    def matches(self, module, function):
        return self.module_matches(module) and (self._fn is None or bool(self._fn.match(function)))


class Rules:
    """The rule set of files loaded in order."""

    def __init__(self, files):
        self.prio = {}  # path tuple -> explicit priority, or None
        self.entries = {}  # path tuple -> [(module, method, order)]
        self.order = 0
        for f in files:
            self._load(f)
        self.rules = sorted((Rule(p, m, fn, o) for p, es in self.entries.items() for m, fn, o in es),
                            key=lambda r: r.order)

    def _load(self, file):
        prio, entries = {}, {}  # this file's, merged per path

        def walk(el, path):
            if el.tag == "Tag":
                name = el.get("Name", "")
                if name:
                    path = path + tuple(name.split("\\"))
                    prio.setdefault(path, None)
                    entries.setdefault(path, [])
                    if el.get("Priority") is not None:
                        prio[path] = int(el.get("Priority"))
            elif el.tag == "Entrypoint":
                self.order += 1
                entries[path].append((el.get("Module"), el.get("Method"), self.order))
            for child in el:
                walk(child, path)

        walk(ET.parse(file).getroot(), ())
        for path in entries:
            for i in range(1, len(path) + 1):  # the containers of A\B exist too
                self.prio.setdefault(path[:i], None)
            if prio[path] is not None:
                self.prio[path] = prio[path]
            if entries[path]:
                self.entries[path] = entries[path]

    def priority(self, path):
        while path:
            if self.prio.get(path) is not None:
                return self.prio[path]
            path = path[:-1]
        return 0

    def frame_tag(self, frame):
        """(path, priority, rule) of the frame's tag, or None."""
        module, _, function = frame.partition("!")
        module = re.split(r"[/\\]", module)[-1].translate(_LOWER)
        function = re.sub(r"\+0x[0-9a-fA-F]+\Z", "", function)
        best = None
        for r in self.rules:
            if r.matches(module, function):
                key = (len(r.path), self.priority(r.path), -r.order)
                if best is None or key > best[0]:
                    best = (key, r)
        if best is None:
            return None
        return best[1].path, best[0][1], best[1]

    def explain(self, frames):
        """(tag, the deciding frame's index or None, its Rule or None): what
        `tags explain --json` says."""
        if frames and len(frames[-1]) >= 2 and frames[-1][0] == "(" and frames[-1][-1] == ")":
            return frames[-1], len(frames) - 1, None
        best = None  # (priority, index, rule); a later frame of equal priority wins
        for i, fr in enumerate(frames):
            m = self.frame_tag(fr)
            if m and (best is None or m[1] >= best[0]):
                best = (m[1], i, m[2])
        if best is None:
            return OTHER, None, None
        return "\\".join(best[2].path), best[1], best[2]

    def stack_tag(self, frames):
        return self.explain(tuple(frames))[0]


def tagger(platform, rules=()):
    """tag_of(frames) by the given files, or the platform's defaults (the
    source tree's service/stacks/rules/), cached per stack."""
    r = Rules(list(rules) or [default_rules(platform)])
    cache = {}

    def tag_of(frames):
        frames = tuple(frames)
        if frames not in cache:
            cache[frames] = r.stack_tag(frames)
        return cache[frames]

    tag_of.rules = r
    return tag_of
