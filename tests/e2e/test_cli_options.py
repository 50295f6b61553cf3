#!/usr/bin/env python3
"""test_cli_options.py - every command and option of the command line has
a test that shows its documented effect (issue 30, item 5; README "Using
it", each command's --help).

1. The inventory (INVENTORY below): (command, option) -> the test that
   shows its effect. The commands are read at test time from `commitwatch
   --help`, the options from each command's --help (`tags check`, `tags
   explain` and `etl info` from theirs): a command or option the binary
   gains without a line here, or a line for one it no longer has, fails
   the test; each named test file must mention the option (or command).

2. The effects no other test showed:
   - `analyze --output FILE`: the export in FILE, byte for byte what `-o`
     and standard output give;
   - `install --print-config`: a configuration `run --config` takes
     without a warning, every key at its default (`listen =
     127.0.0.1:8470`, `# token =` for a key without one);
   - `--help`, `-h` and `help`: the same text on stdout, exit 0; `COMMAND
     -h` is `COMMAND --help`.
   (`record --verbose` / `-v` needs the perf source: test_config_perf_root.py.)
"""

import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BIN, BUILD, MTA, SOURCE, Checks, require_fixture  # noqa: E402
from cwtest import file_text  # noqa: E402

require_fixture()
HERE = "test_cli_options.py"
# (command, option) -> (test file in tests/e2e, how it shows the effect).
# option None: the command itself.
INVENTORY = {
    ("run", None): ("test_cli.py", "ingests into a database and serves it"),
    ("run", "--source"): ("test_cli.py", "the command line wins: --source"),
    ("run", "--db"): ("test_cli.py", "the command line wins: --db"),
    ("run", "--config"): ("test_config_keys.py", "every key's effect from a config file"),
    ("run", "--stacktags"): ("test_cli.py", "the command line wins: --stacktags"),
    ("run", "--rebase-now"): ("test_analyze.py", "the trace replayed again, moved to now"),
    ("run", "--speed"): ("test_cli.py", "--speed 6: serves while it ingests"),
    ("run", "--images"): ("test_etl.py", "frames named by the images' exports"),
    ("run", "--listen"): ("test_cli.py", "the command line wins: --listen"),
    ("run", "--token"): ("test_cli.py", "the command line wins: --token"),
    ("run", "--no-http"): ("test_cli.py", "nothing listens; exits at the end of input"),
    ("run", "--exit-at-end"): ("test_cli.py", "exits by itself at the end of input"),
    ("serve", None): ("test_serve.py", "a database served read-only with no source"),
    ("serve", "--db"): ("test_serve.py", "either platform's database, its bytes unchanged"),
    ("serve", "--config"): ("test_serve.py", "the config's listen is where it serves"),
    ("serve", "--listen"): ("test_serve.py", "serves there"),
    ("analyze", None): ("test_analyze.py", "the figures of a window"),
    ("analyze", "--source"): ("test_analyze.py", "exact figures from a trace"),
    ("analyze", "--db"): ("test_analyze.py", "figures from a database"),
    ("analyze", "--layer"): ("test_heap_api_root.py", "the heap layer's figures from the file"),
    ("analyze", "--from"): ("test_analyze.py", "the window's start"),
    ("analyze", "--to"): ("test_analyze.py", "the window's end"),
    ("analyze", "--json"): ("test_analyze.py", "JSON instead of a table"),
    ("analyze", "--stacks"): ("test_analyze.py", "stacks with their frames"),
    ("analyze", "--stacktags"): ("test_run_retag.py", "the data tagged by the given rules"),
    ("analyze", "--images"): ("test_etl.py", "frames named by the images' exports"),
    ("analyze", "--format"): ("test_export.py", "folded, pprof, speedscope"),
    ("analyze", "--value"): ("test_export.py", "folded's value: impacting, transient, count"),
    ("analyze", "-o"): ("test_export.py", "the export written to a file"),
    ("analyze", "--output"): (HERE, "the export in FILE, as -o and stdout give it"),
    ("record", None): ("test_etl.py", "a trace that replays to the same figures"),
    ("record", "--source"): ("test_etl.py", "record --source etl:FILE"),
    ("record", "--out"): ("test_etl.py", "the trace written there"),
    ("record", "--duration"): ("test_perf_root.py", "stops after S seconds"),
    ("record", "--images"): ("test_etl.py", "frames named by the images' exports"),
    ("record", "--verbose"): ("test_config_perf_root.py", "the perf source's statistics logged"),
    ("record", "-v"): ("test_config_perf_root.py", "the same as --verbose"),
    ("heap", None): ("test_heap.py", "the truth program's heap figures, exactly"),
    ("heap", "--duration"): ("test_heap.py", "tracing ends; the program runs on"),
    ("heap", "--json"): ("test_heap.py", "the report as one line of JSON"),
    ("heap", "--top"): ("test_heap.py", "stacks printed per process, the rest counted"),
    ("heap", "--pid"): ("test_heap_attach.py", "attach to a running process, the truth exactly"),
    ("heap", "--etl"): ("test_heap_etl.py", "a Windows trace's heap events, the truth exactly"),
    ("heap", "--images"): ("test_heap_etl.py", "frames named from the trace's images"),
    ("heap", "--snapshot"): ("test_heap_diff.py", "snapshots every 100 ms, the diff exact"),
    ("heap", "--db"): ("test_heap_diff.py", "the trace stored: cli, done, heap_stacks"),
    ("heap", "--a"): ("test_heap_diff.py", "heap diff from point a (start, a snapshot)"),
    ("heap", "--b"): ("test_heap_diff.py", "heap diff to point b (end, a snapshot)"),
    ("heap", "--trace"): ("test_heap_diff.py", "heap diff of the trace stored in --db"),
    ("tags", None): ("test_tags_cli.py", "check and explain"),
    ("tags check", "--platform"): ("test_tags_cli.py", "the platform's default rules"),
    ("tags explain", "--rules"): ("test_tags_cli.py", "the rule files used"),
    ("tags explain", "--platform"): ("test_tags_cli.py", "the platform's default rules"),
    ("tags explain", "--stack"): ("test_tags_cli.py", "the stack explained"),
    ("tags explain", "--json"): ("test_tags_cli.py", "JSON instead of text"),
    ("etl", None): ("test_etl.py", "etl info FILE"),
    ("etl info", "--json"): ("test_etl.py", "one JSON object"),
    ("etl info", "--images"): ("test_etl.py", "every image loaded, with its range"),
    ("install", None): ("test_service.py", "the unit, configuration and folder written"),
    ("install", "--root"): ("test_service.py", "written under DIR, no systemctl"),
    ("install", "--print-unit"): ("test_service.py", "the unit file printed"),
    ("install", "--print-config"): (HERE, "a default configuration run --config takes"),
    ("uninstall", None): ("test_service.py", "the unit removed"),
    ("uninstall", "--root"): ("test_service.py", "removed under DIR"),
    ("start", None): ("test_service_systemd_root.py", "the service started under systemd"),
    ("stop", None): ("test_service_systemd_root.py", "the service stopped under systemd"),
    ("version", None): ("test_cli.py", "the version and the sources built in"),
}

t = Checks()
TMP = os.path.join(BUILD, "e2e-cli-options")
shutil.rmtree(TMP, ignore_errors=True)
os.makedirs(TMP)


def cli(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120)


def options(text):
    """The options a help text names (--long and -x): in its usage lines
    (up to the first blank line) and at the start of its indented option
    lines; not in its prose (etl info's "`--source etl:FILE` needs")."""
    usage, _, rest = text.partition("\n\n")
    heads = [m.group(1) for m in re.finditer(r"^ +(-[^ ].*?)(?:  |$)", rest, re.M)]
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-z])\b", usage + "\n" + "\n".join(heads)))


# ---- 1. the inventory -------------------------------------------------------------

top = cli("--help")
t.eq("--help: exit 0", top.returncode, 0)
commands = re.findall(r"^  ([a-z]+) +\S", top.stdout.split("commands:")[-1], re.M)
t.check("the commands are read (more than 8)", len(commands) > 8, f"{commands}")
found = set()
for cmd in commands:
    found.add((cmd, None))
    subs = {"tags": ["tags check", "tags explain"], "etl": ["etl info"]}.get(cmd, [cmd])
    for sub in subs:
        if cmd == "version":
            continue
        h = cli(*sub.split(), "--help")
        t.eq(f"{sub} --help: exit 0", h.returncode, 0)
        # A help text is all it prints: no log line (the service's start
        # notes, glibc's caches, belong to a service that starts).
        t.eq(f"{sub} --help: nothing on stderr", h.stderr, "")
        for o in options(h.stdout) - {"--help", "-h"}:
            found.add((sub, o))
# The service commands share one help text; install's options are install's
# (--root is uninstall's too), start and stop take none.
found -= {(c, o) for c, o in found if c in ("start", "stop") and o}
found -= {("uninstall", o) for o in ("--print-unit", "--print-config")}
t.eq("every command and option of the help texts is in the inventory",
     sorted(found - set(INVENTORY), key=str), [])
t.eq("every command and option of the inventory is in the help texts",
     sorted(set(INVENTORY) - found, key=str), [])
for (cmd, opt), (test, how) in sorted(INVENTORY.items(), key=str):
    name = opt or cmd.split()[-1]
    t.check(f"inventory: {cmd} {opt or ''} -> {test} ({how}): the test exists and names it",
            name in file_text(os.path.join(SOURCE, "tests", "e2e", test)), test)

# ---- 2. effects ---------------------------------------------------------------------

# --help, -h, help
for form in ("-h", "help"):
    r = cli(form)
    t.eq(f"`commitwatch {form}`: the --help text, exit 0", (r.returncode, r.stdout),
         (0, top.stdout))
for cmd in ("run", "analyze", "record", "install"):
    t.eq(f"`{cmd} -h` is `{cmd} --help`", cli(cmd, "-h").stdout, cli(cmd, "--help").stdout)

# analyze --output FILE
out_long, out_short = os.path.join(TMP, "long.folded"), os.path.join(TMP, "short.folded")
base = ["analyze", "--source", f"replay:{MTA}", "--format", "folded"]
r_std = cli(*base)
r_long = cli(*base, "--output", out_long)
r_short = cli(*base, "-o", out_short)
t.eq("analyze --output: exit 0, nothing on stdout", (r_long.returncode, r_long.stdout), (0, ""))
t.check("analyze --output: the export is in FILE", r_std.stdout.strip() != "" and
        file_text(out_long) == r_std.stdout, file_text(out_long)[:300])
t.eq("analyze --output FILE = -o FILE", file_text(out_long), file_text(out_short))

# install --print-config
r = cli("install", "--print-config")
t.eq("install --print-config: exit 0", r.returncode, 0)
t.check("install --print-config: every key at its default, keys without one commented",
        "\nlisten = 127.0.0.1:8470\n" in r.stdout and "\n# token = \n" in r.stdout
        and "\nfold_size = 4MiB\n" in r.stdout, r.stdout[:400])
conf = os.path.join(TMP, "default.conf")
with open(conf, "w") as f:
    f.write(r.stdout)
os.chmod(conf, 0o600)
run = cli("run", "--source", f"replay:{MTA}", "--db", os.path.join(TMP, "default.db"),
          "--no-http", "--config", conf)
t.eq("install --print-config: `run --config` takes it, exit 0", run.returncode, 0)
t.eq("install --print-config: no warning about it", [x for x in run.stderr.splitlines()
                                                     if "warning" in x or "error" in x], [])

t.done()
