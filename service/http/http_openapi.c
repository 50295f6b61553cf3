/* http_openapi.c - the OpenAPI 3 description of the API, served at
 * /api/openapi.json. Kept next to the handlers; update it with them. The
 * text is parsed by cJSON on each request (a check that it is valid) and
 * printed back; the alert endpoints are a second text merged into it. */
#include "http/http_resources.h"

#include <cjson/cJSON.h>

static const char openapi[] =
    "{\"openapi\":\"3.0.3\",\"info\":{\"title\":\"commitwatch API\",\"version\":\"0.1.0\",\"descripti"
    "on\":\"Memory-commit figures per process, per stack and stack tag, for any window [from, to), as"
    " WPA's VirtualAlloc Commit Lifetimes shows them (types AIFI, AIFO, AOFI, AOFO; impacting = AIFO "
    "- AOFI bytes; transient = AIFI). Integers are exact (64-bit, written as JSON numbers: parse them"
    " with a big-integer aware parser when above 2^53). Errors are {\\\"error\\\": \\\"...\\\"} with "
    "a 4xx/5xx status. Only GET and HEAD are served unless a token is configured. The end of the data"
    ": when a run ends (a replay's or .etl's input, a stopped service), the processes alive then are "
    "not exited: they keep exit_ns null and get tracking_ended_ns, and a window reaching past that ti"
    "me is clipped to it (the response's note says so), so their figures are those of `analyze --sour"
    "ce` over the same trace; a later run starts new instances from its rundown and never counts memo"
    "ry twice.\"},\"paths\":{\"/api/health\":{\"get\":{\"summary\":\"Service health: version, source,"
    " uptime, events ingested and lost, drift corrected, database path and size, last stored bucket."
    "\",\"responses\":{\"200\":{\"description\":\"Health\",\"content\":{\"application/json\":{\"schem"
    "a\":{\"$ref\":\"#/components/schemas/Health\"}}}}}}},\"/api/processes\":{\"get\":{\"summary\":\""
    "Process instances of the window with the per-process figures of `analyze --json` (and tags).\","
    "\"parameters\":[{\"name\":\"from\",\"in\":\"query\",\"required\":false,\"description\":\"Window "
    "start (inclusive). A time: Unix ns, RFC 3339 (2026-11-29T10:00:00Z), 'now', or relative to now ("
    "-15m, -2h, -30s, -1d). Default: an hour before 'to'.\",\"schema\":{\"type\":\"string\"}},{\"name"
    "\":\"to\",\"in\":\"query\",\"required\":false,\"description\":\"Window end (exclusive). A time: "
    "Unix ns, RFC 3339 (2026-11-29T10:00:00Z), 'now', or relative to now (-15m, -2h, -30s, -1d). Defa"
    "ult: now.\",\"schema\":{\"type\":\"string\"}},{\"name\":\"sort\",\"in\":\"query\",\"schema\":{\""
    "type\":\"string\",\"enum\":[\"impacting\",\"transient\",\"size\",\"peak\",\"outstanding\"],\"def"
    "ault\":\"impacting\"}},{\"name\":\"limit\",\"in\":\"query\",\"schema\":{\"type\":\"integer\",\"m"
    "inimum\":1,\"maximum\":100000,\"default\":1000}},{\"name\":\"name\",\"in\":\"query\",\"descripti"
    "on\":\"Case-insensitive substring of the image name.\",\"schema\":{\"type\":\"string\"}},{\"name"
    "\":\"pid\",\"in\":\"query\",\"description\":\"Only instances with this process id.\",\"schema\":"
    "{\"type\":\"integer\",\"minimum\":0}}],\"responses\":{\"200\":{\"description\":\"Window and proc"
    "esses\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Processes"
    "\"}}}},\"400\":{\"description\":\"Bad input: the message names the parameter.\",\"content\":{\"a"
    "pplication/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}}}}},\"/api/processes/{"
    "id}\":{\"get\":{\"summary\":\"One process instance with its figures and tags in the window.\",\""
    "parameters\":[{\"name\":\"id\",\"in\":\"path\",\"required\":true,\"description\":\"Process insta"
    "nce id (the `id` field of /api/processes).\",\"schema\":{\"type\":\"integer\",\"minimum\":1}},{"
    "\"name\":\"from\",\"in\":\"query\",\"required\":false,\"description\":\"Window start (inclusive)"
    ". A time: Unix ns, RFC 3339 (2026-11-29T10:00:00Z), 'now', or relative to now (-15m, -2h, -30s, "
    "-1d). Default: an hour before 'to'.\",\"schema\":{\"type\":\"string\"}},{\"name\":\"to\",\"in\":"
    "\"query\",\"required\":false,\"description\":\"Window end (exclusive). A time: Unix ns, RFC 3339"
    " (2026-11-29T10:00:00Z), 'now', or relative to now (-15m, -2h, -30s, -1d). Default: now.\",\"sch"
    "ema\":{\"type\":\"string\"}}],\"responses\":{\"200\":{\"description\":\"The process\",\"content"
    "\":{\"application/json\":{\"schema\":{\"type\":\"object\"}}}},\"400\":{\"description\":\"Bad inp"
    "ut: the message names the parameter.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":"
    "\"#/components/schemas/Error\"}}}},\"404\":{\"description\":\"Bad input: the message names the p"
    "arameter.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error"
    "\"}}}}}}},\"/api/processes/{id}/series\":{\"get\":{\"summary\":\"Per step: outstanding by tag (a"
    "t the step's end), committed, decommitted, transient bytes and count, peak outstanding (exact). "
    "Columnar arrays. The process object also gives pid, name, cmdline, start_ns and exit_ns.\",\"par"
    "ameters\":[{\"name\":\"id\",\"in\":\"path\",\"required\":true,\"description\":\"Process instance"
    " id (the `id` field of /api/processes).\",\"schema\":{\"type\":\"integer\",\"minimum\":1}},{\"na"
    "me\":\"from\",\"in\":\"query\",\"required\":false,\"description\":\"Window start (inclusive). A "
    "time: Unix ns, RFC 3339 (2026-11-29T10:00:00Z), 'now', or relative to now (-15m, -2h, -30s, -1d)"
    ". Default: an hour before 'to'.\",\"schema\":{\"type\":\"string\"}},{\"name\":\"to\",\"in\":\"qu"
    "ery\",\"required\":false,\"description\":\"Window end (exclusive). A time: Unix ns, RFC 3339 (20"
    "26-11-29T10:00:00Z), 'now', or relative to now (-15m, -2h, -30s, -1d). Default: now.\",\"schema"
    "\":{\"type\":\"string\"}},{\"name\":\"step\",\"in\":\"query\",\"required\":false,\"description\""
    ":\"Step: 1s, 60s, 5m, 1h or ns, a whole number of seconds. Default: about 1000 points. At most 1"
    "00000 steps.\",\"schema\":{\"type\":\"string\"}}],\"responses\":{\"200\":{\"description\":\"Seri"
    "es\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Series\"}}}}"
    ",\"400\":{\"description\":\"Bad input: the message names the parameter.\",\"content\":{\"applica"
    "tion/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"404\":{\"description\":\""
    "Bad input: the message names the parameter.\",\"content\":{\"application/json\":{\"schema\":{\"$"
    "ref\":\"#/components/schemas/Error\"}}}}}}},\"/api/processes/{id}/stacks\":{\"get\":{\"summary\""
    ":\"Stacks of the window with frames and figures, and the same as a caller tree (outermost frame "
    "first), like WPA's Commit Stack column.\",\"parameters\":[{\"name\":\"id\",\"in\":\"path\",\"req"
    "uired\":true,\"description\":\"Process instance id (the `id` field of /api/processes).\",\"schem"
    "a\":{\"type\":\"integer\",\"minimum\":1}},{\"name\":\"from\",\"in\":\"query\",\"required\":false"
    ",\"description\":\"Window start (inclusive). A time: Unix ns, RFC 3339 (2026-11-29T10:00:00Z), '"
    "now', or relative to now (-15m, -2h, -30s, -1d). Default: an hour before 'to'.\",\"schema\":{\"t"
    "ype\":\"string\"}},{\"name\":\"to\",\"in\":\"query\",\"required\":false,\"description\":\"Window"
    " end (exclusive). A time: Unix ns, RFC 3339 (2026-11-29T10:00:00Z), 'now', or relative to now (-"
    "15m, -2h, -30s, -1d). Default: now.\",\"schema\":{\"type\":\"string\"}},{\"name\":\"type\",\"in"
    "\":\"query\",\"schema\":{\"type\":\"string\",\"enum\":[\"AIFI\",\"AIFO\",\"AOFI\",\"AOFO\",\"imp"
    "acting\",\"transient\"]}},{\"name\":\"tag\",\"in\":\"query\",\"description\":\"A stack tag; a pa"
    "rent tag includes its children (Parent\\\\Child).\",\"schema\":{\"type\":\"string\"}},{\"name\":"
    "\"sort\",\"in\":\"query\",\"schema\":{\"type\":\"string\",\"enum\":[\"impacting\",\"size\"],\"de"
    "fault\":\"impacting\"}},{\"name\":\"limit\",\"in\":\"query\",\"schema\":{\"type\":\"integer\",\""
    "minimum\":1,\"maximum\":100000,\"default\":500}},"
    "{\"name\":\"tree\",\"in\":\"query\",\"description\":\"0: leave out the caller tree (for clie"
    "nts that build their own from the stacks, as the dashboard's flame graph does).\",\"schema\""
    ":{\"type\":\"integer\",\"enum\":[0,1],\"default\":1}}],\"responses\":{\"200\":{\"description"
    "\":\"Stac"
    "ks and tree\",\"content\":{\"application/json\":{\"schema\":{\"type\":\"object\"}}}},\"400\":{\""
    "description\":\"Bad input: the message names the parameter.\",\"content\":{\"application/json\":"
    "{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"404\":{\"description\":\"Bad input: t"
    "he message names the parameter.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/co"
    "mponents/schemas/Error\"}}}}}}},\"/api/diff\":{\"get\":{\"summary\":\"UMDH-style diff of one pro"
    "cess between t1 and t2: per stack, bytes delta (new - old), count delta, new bytes and count (ou"
    "tstanding pieces).\",\"parameters\":[{\"name\":\"process\",\"in\":\"query\",\"required\":true,\""
    "schema\":{\"type\":\"integer\",\"minimum\":1}},{\"name\":\"t1\",\"in\":\"query\",\"required\":tr"
    "ue,\"description\":\"The older time. A time: Unix ns, RFC 3339 (2026-11-29T10:00:00Z), 'now', or"
    " relative to now (-15m, -2h, -30s, -1d).\",\"schema\":{\"type\":\"string\"}},{\"name\":\"t2\",\""
    "in\":\"query\",\"required\":true,\"description\":\"The newer time. A time: Unix ns, RFC 3339 (20"
    "26-11-29T10:00:00Z), 'now', or relative to now (-15m, -2h, -30s, -1d).\",\"schema\":{\"type\":\""
    "string\"}},{\"name\":\"limit\",\"in\":\"query\",\"schema\":{\"type\":\"integer\",\"minimum\":1,"
    "\"maximum\":100000,\"default\":1000}}],\"responses\":{\"200\":{\"description\":\"Diff\",\"conten"
    "t\":{\"application/json\":{\"schema\":{\"type\":\"object\"}}}},\"400\":{\"description\":\"Bad in"
    "put: the message names the parameter.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":"
    "\"#/components/schemas/Error\"}}}},\"404\":{\"description\":\"Bad input: the message names the p"
    "arameter.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error"
    "\"}}}}}}},\"/api/system/series\":{\"get\":{\"summary\":\"The machine's outstanding commit by tag"
    ", and flows, per step (peak_bytes is an upper bound).\",\"parameters\":[{\"name\":\"from\",\"in"
    "\":\"query\",\"required\":false,\"description\":\"Window start (inclusive). A time: Unix ns, RFC"
    " 3339 (2026-11-29T10:00:00Z), 'now', or relative to now (-15m, -2h, -30s, -1d). Default: an hour"
    " before 'to'.\",\"schema\":{\"type\":\"string\"}},{\"name\":\"to\",\"in\":\"query\",\"required\""
    ":false,\"description\":\"Window end (exclusive). A time: Unix ns, RFC 3339 (2026-11-29T10:00:00Z"
    "), 'now', or relative to now (-15m, -2h, -30s, -1d). Default: now.\",\"schema\":{\"type\":\"stri"
    "ng\"}},{\"name\":\"step\",\"in\":\"query\",\"required\":false,\"description\":\"Step: 1s, 60s, 5"
    "m, 1h or ns, a whole number of seconds. Default: about 1000 points. At most 100000 steps.\",\"sc"
    "hema\":{\"type\":\"string\"}}],\"responses\":{\"200\":{\"description\":\"Series\",\"content\":{"
    "\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Series\"}}}},\"400\":{\"descri"
    "ption\":\"Bad input: the message names the parameter.\",\"content\":{\"application/json\":{\"sch"
    "ema\":{\"$ref\":\"#/components/schemas/Error\"}}}}}}},\"/api/tags\":{\"get\":{\"summary\":\"The "
    "stack-tag tree of the stored stacks, the rules hash, and the rule files given at start (none lis"
    "ted: the platform's default rules).\",\"responses\":{\"200\":{\"description\":\"Tags\",\"content"
    "\":{\"application/json\":{\"schema\":{\"type\":\"object\"}}}}}}},\"/api/openapi.json\":{\"get\":"
    "{\"summary\":\"This document.\",\"responses\":{\"200\":{\"description\":\"OpenAPI 3 document\","
    "\"content\":{\"application/json\":{\"schema\":{\"type\":\"object\"}}}}}}},\"/metrics\":{\"get\":"
    "{\"summary\":\"Prometheus text exposition (0.0.4): outstanding bytes per process (top N + other)"
    " and tag, committed/decommitted/transient counters, events ingested and lost, drift.\",\"respons"
    "es\":{\"200\":{\"description\":\"Metrics\",\"content\":{\"text/plain\":{\"schema\":{\"type\":\"s"
    "tring\"}}}}}}}},\"components\":{\"schemas\":{\"Error\":{\"type\":\"object\",\"required\":[\"erro"
    "r\"],\"properties\":{\"error\":{\"type\":\"string\"}}},\"Window\":{\"type\":\"object\",\"propert"
    "ies\":{\"from_ns\":{\"type\":\"integer\"},\"to_ns\":{\"type\":\"integer\"}}},\"Health\":{\"type"
    "\":\"object\",\"properties\":{\"status\":{\"type\":\"string\",\"description\":\"ok; degraded while "
    "store_error is set or the source is down (source_state); starting before the database exists"
    "\"},\"source_state\":{\"type\":\"object\",\"nullable\":true,\"description\":\"The live s"
    "ource: up, why it is down (error), since_ns, retries, next_retry_ns; null when a database is se"
    "rved with no source (commitwatch serve)\"},\"profile_push\":{\"type\":\"object\",\"nullable"
    "\":true,\"description\":\"The profile push (profile_push_url): state (ok, retrying), sent, sen"
    "t_bytes, retries, dropped_buffer_full, dropped_rejected, queued, queued_bytes, last_status, las"
    "t_success_ns, built_until_ns; null when off\"},\"read_only\":{\"type\":\"boolean\"},\"platform"
    "\":{\"type\":\"string\",\"nullable\":true},\"store_error\":{\"type\":\"string\",\"n"
    "ullable\":true,\"description\":\"Why the writer cannot store (a full disk): ingestion is pau"
    "sed and retried every second; reads keep working.\"},\"store_error_since_ns\":{\"type\":\"integer"
    "\",\"nullable\":true},\"version\":{\"type\":\"string\"}"
    ",\"source\":{\"type\":\"string\"},\"uptime_s\":{\"type\":\"number\"},\"events_ingested\":{\"type"
    "\":\"integer\"},\"events_lost\":{\"type\":\"integer\"},\"drift_corrected_bytes\":{\"type\":\"int"
    "eger\"},\"db_path\":{\"type\":\"string\"},\"db_size_bytes\":{\"type\":\"integer\"},\"last_bucket"
    "_end_ns\":{\"type\":\"integer\",\"nullable\":true},\"first_bucket_ns\":{\"type\":\"integer\",\"n"
    "ullable\":true},\"data_end_ns\":{\"type\":\"integer\",\"nullable\":true,\"description\":\"End of"
    " the data: where tracking ended when the last run has ended (a replay's 'now'), else the end of "
    "the last stored bucket.\"},\"tracking_ended_ns\":{\"type\":\"integer\",\"nullable\":true,\"descr"
    "iption\":\"Where the last run ended tracking, when nothing was stored after it; null while a run"
    " is going.\"}"
    ",\"config\":{\"type\":\"object\",\"description\":\"The last load of the configuration and"
    " its rule files (start or reload): ok, or the error and the file and line at fault of a refused"
    " reload, which changed nothing.\",\"properties\":{\"ok\":{\"type\":\"boolean\"},\"error\":{"
    "\"type\":\"string\",\"nullable\":true},\"file\":{\"type\":\"string\",\"nullable\":true},\"l"
    "ine\":{\"type\":\"integer\",\"nullable\":true},\"at_ns\":{\"type\":\"integer\"},\"loaded_b"
    "y\":{\"type\":\"string\",\"enum\":[\"start\",\"reload\"]}}}"
    ",\"memory\":{\"type\":\"object\",\"description\":\"Bytes of memory per component of the runnin"
    "g service (docs/DESIGN.md, 'Memory'): perf_rings (the perf source's kernel ring buffe"
    "rs mapped), perf_queue (records copied out of them, waiting: chunks mapped apart from the heap"
    ", and the queue's array), perf_processes (the perf source'"
    "s processes and threads), unwinder (its module table, frame cache and symbol tables; libdw'"
    "s own state is in heap_other), tracker (live pieces, commit records, instances), stacks (int"
    "erned stacks and frames), alert_series (the alert engine's per-series history), store_rollups"
    " (the store's in-memory sums of the open minute and hour), store_caches (the read handles' "
    "report caches and raw tails), sqlite and "
    "sqlite_peak (all connections' caches and statements), heap_in_use (the C heap, glibc; 0 whe"
    "re unknown), heap_other (heap in use that no component counts), resident and resident_peak (Vm"
    "RSS and VmHWM; the working set on Windows). Components a source does not have are 0; figures a"
    "re refreshed about once a second.\",\"properties\":{\"perf_rings\":{\"type\":\"integer\"},\"pe"
    "rf_queue\":{\"type\":\"integer\"},\"perf_processes\":{\"type\":\"integer\"},\"unwinder\":{\"ty"
    "pe\":\"integer\"},\"tracker\":{\"type\":\"integer\"},\"stacks\":{\"type\":\"integer\"},\"alert"
    "_series\":{\"type\":\"integer\"},\"store_rollups\":{\"type\":\"integer\"},"
    "\"store_caches\":{\"type\":\"integer\"},\"sqlite\":{\"type\":\"integer\"},\"sqlite_peak\":{\"type\":\""
    "integer\"},\"heap_in_use\":{\"type\":\"integer\"},\"heap_other\":{\"type\":\"integer\"},\"resi"
    "dent\":{\"type\":\"integer\"},\"resident_peak\":{\"type\":\"integer\"}}}"
    "}},\"Figures\":{\"type\":\"object\",\"properties\":{\"size_bytes\":{\"type\":\"inte"
    "ger\"},\"commit_count\":{\"type\":\"integer\"},\"impacting_bytes\":{\"type\":\"integer\"},\"tran"
    "sient_bytes\":{\"type\":\"integer\"},\"transient_count\":{\"type\":\"integer\"}}},\"Process\":{"
    "\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"pid\":{\"type\":\"integer\"}"
    ",\"name\":{\"type\":\"string\"},\"cmdline\":{\"type\":\"string\",\"nullable\":true},\"start_ns\""
    ":{\"type\":\"integer\"},\"exit_ns\":{\"type\":\"integer\",\"nullable\":true,\"description\":\"A "
    "real exit (process exit, or pid reuse); null while alive and when tracking ended first.\"},\"pea"
    "k_outstanding_bytes\":{\"type\":\"integer\"},\"peak_ns\":{\"type\":\"integer\"},\"outstanding_en"
    "d_bytes\":{\"type\":\"integer\"},\"events\":{\"type\":\"integer\"},\"types\":{\"type\":\"object"
    "\"},\"tags\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/components/schemas/Figures\"}},\"size_b"
    "ytes\":{\"type\":\"integer\"},\"commit_count\":{\"type\":\"integer\"},\"impacting_bytes\":{\"typ"
    "e\":\"integer\"},\"transient_bytes\":{\"type\":\"integer\"},\"transient_count\":{\"type\":\"inte"
    "ger\"},\"tracking_ended_ns\":{\"type\":\"integer\",\"nullable\":true,\"description\":\"Set when "
    "the instance was alive when its run ended (end of input, service stop): its memory leaves the fi"
    "gures there (a later run's rundown starts a new instance), but it did not exit.\"}}},\"Processes"
    "\":{\"type\":\"object\",\"properties\":{\"window\":{\"$ref\":\"#/components/schemas/Window\"},\""
    "total\":{\"type\":\"integer\"},\"note\":{\"type\":\"string\",\"description\":\"Window widened to"
    " buckets, clipped to what retention keeps, or clipped to the end of the data where tracking ende"
    "d.\"},\"processes\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/components/schemas/Process\"}}}}"
    ",\"Series\":{\"type\":\"object\",\"properties\":{\"window\":{\"$ref\":\"#/components/schemas/Win"
    "dow\"},\"step_ns\":{\"type\":\"integer\"},\"tier\":{\"type\":\"integer\"},\"t\":{\"type\":\"arra"
    "y\",\"items\":{\"type\":\"integer\"}},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string"
    "\"}},\"outstanding\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"array\",\"items\""
    ":{\"type\":\"integer\"}}},\"outstanding_total\":{\"type\":\"array\",\"items\":{\"type\":\"intege"
    "r\"}},\"committed_bytes\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},\"commit_count\""
    ":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},\"decommitted_bytes\":{\"type\":\"array\""
    ",\"items\":{\"type\":\"integer\"}},\"transient_bytes\":{\"type\":\"array\",\"items\":{\"type\":"
    "\"integer\"}},\"transient_count\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},\"peak_b"
    "ytes\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},\"note\":{\"type\":\"string\",\"des"
    "cription\":\"Present when the window was clipped to the end of the data (tracking ended).\"},\"p"
    "rocess\":{\"type\":\"object\",\"description\":\"Process series only: id, pid, name, cmdline, sta"
    "rt_ns, exit_ns, tracking_ended_ns.\"}}}}}}";

/* The instances of a folded group (http_processes.c), merged into the paths. */
static const char openapi_fold[] =
    "{\"paths\":{\"/api/processes/{id}/instances\":{\"get\":{\"summary\":\"The instances a process "
    "line stands for. A line with folded > 0 is a group of short-lived instances of one name stored"
    " folded (docs/DESIGN.md, Short-lived processes: they exited within fold_lifetime having commit"
    "ted less than fold_size; their figures count in the group's, exactly in sums over processes an"
    "d names); this lists those alive in the window, by start time, with pid, start_ns, exit_ns and"
    " the bytes each committed. An instance that is not a group lists itself.\",\"parameters\":[{\""
    "name\":\"id\",\"in\":\"path\",\"required\":true,\"description\":\"Process id (the `id` field o"
    "f /api/processes).\",\"schema\":{\"type\":\"integer\",\"minimum\":1}},{\"name\":\"from\",\"in\""
    ":\"query\",\"required\":false,\"description\":\"Window start (inclusive), as for /api/processe"
    "s. Default: an hour before 'to'.\",\"schema\":{\"type\":\"string\"}},{\"name\":\"to\",\"in\":\""
    "query\",\"required\":false,\"description\":\"Window end (exclusive), as for /api/processes. De"
    "fault: now.\",\"schema\":{\"type\":\"string\"}},{\"name\":\"limit\",\"in\":\"query\",\"schema\""
    ":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100000,\"default\":1000}}],\"responses\":{\"2"
    "00\":{\"description\":\"{window, process: {id, name, folded}, total, instances: [{pid, start_n"
    "s, exit_ns, bytes}]}\",\"content\":{\"application/json\":{\"schema\":{\"type\":\"object\"}}}},"
    "\"400\":{\"description\":\"Bad input: the message names the parameter.\",\"content\":{\"applic"
    "ation/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"404\":{\"description\""
    ":\"No such process.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/s"
    "chemas/Error\"}}}}}}}}}";

/* The machine-wide stacks (http_stacks.c), merged into the paths. */
static const char openapi_stacks[] =
    "{\"paths\":{\"/api/stacks\":{\"get\":{\"summary\":\"The machine's stacks of the window: the st"
    "acks of every process instance active in it, with the figures of /api/processes/{id}/stacks, e"
    "ach naming its process (process_id, process); the caller tree's first level is the process nam"
    "e (instances of one name merged), as in a whole-system flame graph. The dashboard's overview d"
    "raws its flame graph from this.\",\"parameters\":[{\"name\":\"from\",\"in\":\"query\",\"requir"
    "ed\":false,\"description\":\"Window start (inclusive). A time: Unix ns, RFC 3339 (2026-11-29T1"
    "0:00:00Z), 'now', or relative to now (-15m, -2h, -30s, -1d). Default: an hour before 'to'.\",\""
    "schema\":{\"type\":\"string\"}},{\"name\":\"to\",\"in\":\"query\",\"required\":false,\"descrip"
    "tion\":\"Window end (exclusive). A time: Unix ns, RFC 3339 (2026-11-29T10:00:00Z), 'now', or r"
    "elative to now (-15m, -2h, -30s, -1d). Default: now.\",\"schema\":{\"type\":\"string\"}},{\"na"
    "me\":\"type\",\"in\":\"query\",\"schema\":{\"type\":\"string\",\"enum\":[\"AIFI\",\"AIFO\",\"A"
    "OFI\",\"AOFO\",\"impacting\",\"transient\"]}},{\"name\":\"tag\",\"in\":\"query\",\"description"
    "\":\"A stack tag; a parent tag includes its children (Parent\\\\Child).\",\"schema\":{\"type\""
    ":\"string\"}},{\"name\":\"sort\",\"in\":\"query\",\"schema\":{\"type\":\"string\",\"enum\":[\""
    "impacting\",\"size\"],\"default\":\"impacting\"}},{\"name\":\"limit\",\"in\":\"query\",\"schem"
    "a\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100000,\"default\":500}},"
    "{\"name\":\"tree\",\"in\":\"query\",\"description\":\"0: leave out the caller tree (for clie"
    "nts that build their own from the stacks, as the dashboard's flame graph does).\",\"schema\""
    ":{\"type\":\"integer\",\"enum\":[0,1],\"default\":1}}],\"responses\":{\""
    "200\":{\"description\":\"{window, processes, total, stacks: [{process_id, process, stack_id, t"
    "ag, figures, frames}], tree}\",\"content\":{\"application/json\":{\"schema\":{\"type\":\"objec"
    "t\"}}}},\"400\":{\"description\":\"Bad input: the message names the parameter.\",\"content\":{"
    "\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}}}}}}}";

/* The memory map (http_map.c), merged into the paths. */
static const char openapi_map[] =
    "{\"paths\":{\"/api/processes/{id}/map\":{\"get\":{\"summary\":\"The process instance's committe"
    "d memory by address (docs/DESIGN.md, Memory maps): its committed ranges at an instant (at), or "
    "the difference of two instants (t1, t2: each byte new, freed or kept, kept meaning committed at"
    " both by the same commit event). A live instance's map now comes from the core thread's tracker"
    " (source live); other instants from stored snapshots, the latest at or before the instant (sour"
    "ce stored; map_ns says when it was taken). Snapshots are taken when an instance's committed byt"
    "es moved by 1 MiB or 10 % in at least 10 s, every 10 min while it changes, and at the end of a "
    "run, and are kept as long as the raw tier. Reserved-but-uncommitted address space comes as a se"
    "cond set of columns (reserved): space reserved (a reserve event, or a commit on unreserved spac"
    "e; a decommit keeps it, a release drops it) and not committed at the instant, of the later map "
    "in a difference.\",\"parameters\":[{\"name\":\"id\",\"in\":\"path\",\"required\":true,\"descrip"
    "tion\":\"Process id (the `id` field of /api/processes).\",\"schema\":{\"type\":\"integer\",\"mi"
    "nimum\":1}},{\"name\":\"at\",\"in\":\"query\",\"required\":false,\"description\":\"The instant."
    " A time: Unix ns, RFC 3339 (2026-11-29T10:00:00Z), 'now', or relative to now (-15m, -2h, -30s, "
    "-1d). Default: now (live when the instance is).\",\"schema\":{\"type\":\"string\"}},{\"name\":"
    "\"t1\",\"in\":\"query\",\"required\":false,\"description\":\"Difference: the earlier instant (w"
    "ith t2, not with at). A time: Unix ns, RFC 3339 (2026-11-29T10:00:00Z), 'now', or relative to n"
    "ow (-15m, -2h, -30s, -1d).\",\"schema\":{\"type\":\"string\"}},{\"name\":\"t2\",\"in\":\"query"
    "\",\"required\":false,\"description\":\"Difference: the later instant (with t1). A time: Unix n"
    "s, RFC 3339 (2026-11-29T10:00:00Z), 'now', or relative to now (-15m, -2h, -30s, -1d).\",\"schem"
    "a\":{\"type\":\"string\"}}],\"responses\":{\"200\":{\"description\":\"{process, pid, at_ns, map"
    "_ns, source, committed_bytes, reserved_bytes | t1_ns, t2_ns, map1_ns, map2_ns, source1, source2"
    ", bytes: {new, freed, kept}, reserved_bytes (at t2); snapshots_ns: [stored snapshot times, olde"
    "st first]; ranges: {count, addr: [], size: [], state: 'committed', commit_ns: [ns, or null for "
    "memory committed before tracing began], stack: [stack ids], change: ['new'|'freed'|'kept'] (dif"
    "ference only)} as columns sorted by address (freed ranges may overlap new ones); reserved: {cou"
    "nt, addr: [], size: [], state: 'reserved', reserve_ns: [ns, or null for space reserved before t"
    "racing began], stack: [stack ids of what reserved it: the reserve event, or the commit that imp"
    "lied the reservation]} as columns sorted by address, never overlapping a committed range (of th"
    "e later map in a difference); stacks: [{id, tag, frames (outermost first)}] once each}. Integer"
    "s are exact.\",\"content\":{\"application/json\":{\"schema\":{\"type\":\"object\"}}}},\"400\":{"
    "\"description\":\"Bad input (at with t1/t2, t1 without t2, t1 >= t2, a bad time): the message n"
    "ames the parameter.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/sc"
    "hemas/Error\"}}}},\"404\":{\"description\":\"No such process, or no map of it at or before the "
    "instant (none taken yet, or older than the raw tier's retention).\",\"content\":{\"application/"
    "json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}}}}}}}";

/* The heap traces (http_heap.c), merged into the paths. */
static const char openapi_heap[] =
    "{\"paths\":{\"/api/processes/{id}/heap-trace\":{\"post\":{\"summary\":\"Starts a heap trace (the heap dr"
    "ill-down) of a live process instance (needs the token): its heap allocations by stack from now "
    "until the duration ends, the process exits or the trace is stopped. Body (optional): {\\\"duratio"
    "n\\\": \\\"5m\\\", \\\"snapshot_every\\\": \\\"30s\\\"} (snapshots: what each stack has outstanding then, for"
    " the diff). At most one trace per process at a time and a limit of traces at once; a trace that"
    " cannot start is recorded with the reason.\",\"security\":[{\"bearerAuth\":[]}],\"parameters\":[{\"name"
    "\":\"id\",\"in\":\"path\",\"required\":true,\"schema\":{\"type\":\"integer\",\"minimum\":1}}],\"responses\":{\"202\""
    ":{\"description\":\"Started: {\\\"id\\\", \\\"state\\\": \\\"running\\\", \\\"url\\\"}\",\"content\":{\"application/js"
    "on\":{\"schema\":{\"type\":\"object\"}}}},\"400\":{\"description\":\"A bad body or duration (longer than th"
    "e maximum).\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\""
    "404\":{\"description\":\"No such process instance.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\""
    ":\"#/components/schemas/Error\"}}}},\"409\":{\"description\":\"The instance has exited or is a folded "
    "group, or that process is traced already (the message names the trace).\",\"content\":{\"applicatio"
    "n/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"429\":{\"description\":\"The limit of h"
    "eap traces at once is reached.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/s"
    "chemas/Error\"}}}},\"501\":{\"description\":\"This server runs no source (serve): it cannot trace.\",\""
    "content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"503\":{\"descrip"
    "tion\":\"The trace could not be recorded.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/com"
    "ponents/schemas/Error\"}}}}}}},\"/api/heap-traces\":{\"get\":{\"summary\":\"Heap traces, newest first: "
    "who asked (api, alert with its rule and alert id, cli), state (running, done, stopped, failed w"
    "ith the error), times, and, once ended, the events read, the frees of blocks allocated before t"
    "he attach (unknown_frees), dropped events and the totals; a trace of a known instance with a "
    "report links its whole seconds in the store's heap layer (layer_url). A running trace shows "
    "events_so_far and attached.\",\"parameters\":[{\"name\":\"alert\",\"in\":\"query\",\"required\":false,\"description\":\"Only t"
    "he traces an alert (alert id, as /api/alerts gives it) started.\",\"schema\":{\"type\":\"string\"}},{\""
    "name\":\"pid\",\"in\":\"query\",\"required\":false,\"description\":\"Only traces of this pid.\",\"schema\":{\"t"
    "ype\":\"string\"}},{\"name\":\"process\",\"in\":\"query\",\"required\":false,\"description\":\"Only traces of t"
    "his process instance id.\",\"schema\":{\"type\":\"string\"}},{\"name\":\"limit\",\"in\":\"query\",\"required\":f"
    "alse,\"description\":\"At most this many (1-1000, default 100).\",\"schema\":{\"type\":\"string\"}}],\"res"
    "ponses\":{\"200\":{\"description\":\"{\\\"traces\\\": [...]}\",\"content\":{\"application/json\":{\"schema\":{\"t"
    "ype\":\"object\"}}}},\"400\":{\"description\":\"A bad parameter.\",\"content\":{\"application/json\":{\"schem"
    "a\":{\"$ref\":\"#/components/schemas/Error\"}}}}}}},\"/api/heap-traces/{id}\":{\"get\":{\"summary\":\"One h"
    "eap trace with its report: per stack (frames outermost first), outstanding bytes and count at t"
    "he end, allocated and freed bytes and counts, peak outstanding; largest outstanding first; its "
    "snapshots. format=folded gives the stacks as folded lines for flame-graph tools, weighted by va"
    "lue (outstanding_bytes by default); format=pprof a gzipped pprof heap profile (inuse_space, inu"
    "se_objects, alloc_space, alloc_objects), as go tool pprof reads it.\",\"parameters\":[{\"name\":\"id\""
    ",\"in\":\"path\",\"required\":true,\"schema\":{\"type\":\"integer\",\"minimum\":1}},{\"name\":\"format\",\"in\":\"qu"
    "ery\",\"required\":false,\"description\":\"json (default), folded or pprof.\",\"schema\":{\"type\":\"string"
    "\"}},{\"name\":\"value\",\"in\":\"query\",\"required\":false,\"description\":\"With format=folded: outstandin"
    "g_bytes, outstanding_count, alloc_bytes, alloc_count or peak_bytes.\",\"schema\":{\"type\":\"string\"}"
    "}],\"responses\":{\"200\":{\"description\":\"The trace\",\"content\":{\"application/json\":{\"schema\":{\"type"
    "\":\"object\"}},\"text/plain\":{\"schema\":{\"type\":\"string\"}},\"application/octet-stream\":{\"schema\":{\"t"
    "ype\":\"string\",\"format\":\"binary\"}}}},\"400\":{\"description\":\"A bad parameter.\",\"content\":{\"applica"
    "tion/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"404\":{\"description\":\"No such tra"
    "ce.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"409\":{\"d"
    "escription\":\"format=folded or pprof of a trace with no report (failed before it began).\",\"conte"
    "nt\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}}}}},\"/api/heap-traces"
    "/{id}/diff\":{\"get\":{\"summary\":\"UMDH's diff of a heap trace: per stack, the growth of outstandin"
    "g bytes and blocks from point a to point b, largest growth first. A point is start (nothing out"
    "standing), end, or a snapshot's number (1 is the first); by default the first snapshot (start w"
    "ithout one) to end.\",\"parameters\":[{\"name\":\"id\",\"in\":\"path\",\"required\":true,\"schema\":{\"type\":\"i"
    "nteger\",\"minimum\":1}},{\"name\":\"a\",\"in\":\"query\",\"required\":false,\"description\":\"The first point."
    "\",\"schema\":{\"type\":\"string\"}},{\"name\":\"b\",\"in\":\"query\",\"required\":false,\"description\":\"The seco"
    "nd point (default end).\",\"schema\":{\"type\":\"string\"}}],\"responses\":{\"200\":{\"description\":\"{\\\"a\\\""
    ", \\\"b\\\", \\\"bytes_delta\\\", \\\"count_delta\\\", \\\"stacks\\\": [{\\\"pid\\\", \\\"frames\\\", \\\"bytes_delta\\\", "
    "\\\"count_delta\\\", \\\"bytes_a\\\", \\\"bytes_b\\\", \\\"count_a\\\", \\\"count_b\\\"}]}\",\"content\":{\"application"
    "/json\":{\"schema\":{\"type\":\"object\"}}}},\"400\":{\"description\":\"No such point.\",\"content\":{\"applica"
    "tion/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"404\":{\"description\":\"No such tra"
    "ce.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"409\":{\"d"
    "escription\":\"The trace has no report.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/compo"
    "nents/schemas/Error\"}}}}}}},\"/api/heap-traces/{id}/stop\":{\"post\":{\"summary\":\"Ends a running hea"
    "p trace now (needs the token); it stores what it read, state stopped.\",\"security\":[{\"bearerAuth"
    "\":[]}],\"parameters\":[{\"name\":\"id\",\"in\":\"path\",\"required\":true,\"schema\":{\"type\":\"integer\",\"minim"
    "um\":1}}],\"responses\":{\"200\":{\"description\":\"{\\\"id\\\", \\\"state\\\": \\\"stopping\\\"}\",\"content\":{\"appl"
    "ication/json\":{\"schema\":{\"type\":\"object\"}}}},\"409\":{\"description\":\"The trace is not running.\",\""
    "content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"501\":{\"descrip"
    "tion\":\"This server runs no source.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/componen"
    "ts/schemas/Error\"}}}}}}}}}";

/* The alert endpoints (http_alerts.c): paths and components merged into
 * the document above. */
static const char openapi_alerts[] =
    "{\"paths\":{\"/api/alerts\":{\"get\":{\"summary\":\"Alert series: pending and firing by default "
    "(firing first, then severity, then newest), with value, threshold, leak score, time to limit, la"
    "bels and summary.\",\"parameters\":[{\"name\":\"state\",\"in\":\"query\",\"required\":false,\"de"
    "scription\":\"active (pending and firing; the default), pending, firing, inactive (resolved), or"
    " all.\",\"schema\":{\"type\":\"string\",\"enum\":[\"active\",\"pending\",\"firing\",\"inactive\""
    ",\"all\"]}},{\"name\":\"severity\",\"in\":\"query\",\"required\":false,\"description\":\"warning"
    ", critical, or none (pending).\",\"schema\":{\"type\":\"string\",\"enum\":[\"none\",\"warning\","
    "\"critical\"]}},{\"name\":\"rule\",\"in\":\"query\",\"required\":false,\"description\":\"A rule "
    "name (exact).\",\"schema\":{\"type\":\"string\"}},{\"name\":\"process\",\"in\":\"query\",\"requi"
    "red\":false,\"description\":\"A process name glob (*, ?, [...]).\",\"schema\":{\"type\":\"string"
    "\"}},{\"name\":\"tag\",\"in\":\"query\",\"required\":false,\"description\":\"A stack tag (exact)"
    ".\",\"schema\":{\"type\":\"string\"}},{\"name\":\"limit\",\"in\":\"query\",\"required\":false,\""
    "description\":\"At most this many series.\",\"schema\":{\"type\":\"integer\",\"minimum\":1,\"max"
    "imum\":100000,\"default\":1000}}],\"responses\":{\"200\":{\"description\":\"Alert series\",\"con"
    "tent\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Alerts\"}}}},\"400\":{"
    "\"description\":\"Bad input: the message names the parameter.\",\"content\":{\"application/json"
    "\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}}}}},\"/api/alerts/{id}\":{\"get\":{\"s"
    "ummary\":\"One alert series with its transitions (newest first), leak-score components, forecast"
    " and values from the engine's detail.\",\"parameters\":[{\"name\":\"id\",\"in\":\"path\",\"requi"
    "red\":true,\"description\":\"The `id` of /api/alerts.\",\"schema\":{\"type\":\"integer\",\"minim"
    "um\":1}}],\"responses\":{\"200\":{\"description\":\"The series and its transitions\",\"content\""
    ":{\"application/json\":{\"schema\":{\"type\":\"object\"}}}},\"400\":{\"description\":\"Bad id.\""
    ",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"40"
    "4\":{\"description\":\"No such series.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\""
    ":\"#/components/schemas/Error\"}}}}}}},\"/api/alert-transitions\":{\"get\":{\"summary\":\"Transi"
    "tions of every series, newest first, each with its series' rule, process, pid and tag (the histo"
    "ry).\",\"parameters\":[{\"name\":\"from\",\"in\":\"query\",\"required\":false,\"description\":\""
    "Start (inclusive). A time: Unix ns, RFC 3339 (2026-11-29T10:00:00Z), 'now', or relative to now ("
    "-15m, -2h, -30s, -1d). Default: everything.\",\"schema\":{\"type\":\"string\"}},{\"name\":\"to\""
    ",\"in\":\"query\",\"required\":false,\"description\":\"End (exclusive). A time: Unix ns, RFC 333"
    "9 (2026-11-29T10:00:00Z), 'now', or relative to now (-15m, -2h, -30s, -1d). Default: everything."
    "\",\"schema\":{\"type\":\"string\"}},{\"name\":\"limit\",\"in\":\"query\",\"required\":false,\"d"
    "escription\":\"At most this many.\",\"schema\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1"
    "0000,\"default\":200}}],\"responses\":{\"200\":{\"description\":\"Transitions\",\"content\":{\"a"
    "pplication/json\":{\"schema\":{\"type\":\"object\"}}}},\"400\":{\"description\":\"Bad input: the"
    " message names the parameter.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/comp"
    "onents/schemas/Error\"}}}}}}},\"/api/alert-rules\":{\"get\":{\"summary\":\"The alert rules in fo"
    "rce (as the engine recorded them): name, file, line, hash, text, fields, and counts of their pen"
    "ding and firing series.\",\"responses\":{\"200\":{\"description\":\"Rules\",\"content\":{\"appli"
    "cation/json\":{\"schema\":{\"type\":\"object\"}}}}}}},\"/api/alert-rules/{name}/backtest\":{\"ge"
    "t\":{\"summary\":\"What the rule would have done over the stored history [from, to): its transit"
    "ions per series, evaluated from a clean state as the engine does. At most 7 days and 20000 evalu"
    "ations.\",\"parameters\":[{\"name\":\"name\",\"in\":\"path\",\"required\":true,\"description\":"
    "\"A rule name of /api/alert-rules.\",\"schema\":{\"type\":\"string\"}},{\"name\":\"from\",\"in\":"
    "\"query\",\"required\":false,\"description\":\"Window start (inclusive). A time: Unix ns, RFC 33"
    "39 (2026-11-29T10:00:00Z), 'now', or relative to now (-15m, -2h, -30s, -1d). Default: an hour be"
    "fore 'to'.\",\"schema\":{\"type\":\"string\"}},{\"name\":\"to\",\"in\":\"query\",\"required\":fa"
    "lse,\"description\":\"Window end (exclusive). A time: Unix ns, RFC 3339 (2026-11-29T10:00:00Z), "
    "'now', or relative to now (-15m, -2h, -30s, -1d). Default: now.\",\"schema\":{\"type\":\"string"
    "\"}},{\"name\":\"interval\",\"in\":\"query\",\"required\":false,\"description\":\"Evaluation inte"
    "rval (10s or more; e.g. 10s, 1m). Default: about 1000 evaluations over the window, a multiple of"
    " 10 s.\",\"schema\":{\"type\":\"string\"}}],\"responses\":{\"200\":{\"description\":\"Backtest\""
    ",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Backtest\"}}}},"
    "\"400\":{\"description\":\"Bad input, or the window or evaluations over the limits.\",\"content\""
    ":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"404\":{\"descr"
    "iption\":\"No such rule in force.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/"
    "components/schemas/Error\"}}}}}}},\"/api/silences\":{\"get\":{\"summary\":\"Silences, newest fir"
    "st, in Alertmanager's shape with status.state active, pending or expired. A silence stops notifi"
    "cations of the series its matchers match; evaluation goes on.\",\"parameters\":[{\"name\":\"stat"
    "e\",\"in\":\"query\",\"required\":false,\"description\":\"active, pending, expired, or all (the "
    "default).\",\"schema\":{\"type\":\"string\",\"enum\":[\"active\",\"pending\",\"expired\",\"all\""
    "]}}],\"responses\":{\"200\":{\"description\":\"Silences\",\"content\":{\"application/json\":{\"s"
    "chema\":{\"type\":\"object\"}}}},\"400\":{\"description\":\"Bad input.\",\"content\":{\"applicat"
    "ion/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}}}},\"post\":{\"summary\":\"Cr"
    "eates a silence (needs the token). Body: Alertmanager's silence: matchers [{name, value, isRegex"
    " (false), isEqual (true)}] over the alert's labels, startsAt (default now), endsAt, createdBy, c"
    "omment. Times: RFC 3339, Unix ns, or relative (+2h). At most 64 KiB.\",\"security\":[{\"bearerAu"
    "th\":[]}],\"requestBody\":{\"required\":true,\"content\":{\"application/json\":{\"schema\":{\"$r"
    "ef\":\"#/components/schemas/SilenceIn\"}}}},\"responses\":{\"200\":{\"description\":\"{\\\"id\\"
    "\": N}\",\"content\":{\"application/json\":{\"schema\":{\"type\":\"object\"}}}},\"400\":{\"descri"
    "ption\":\"Bad JSON or a bad field: the message names it.\",\"content\":{\"application/json\":{\""
    "schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"401\":{\"description\":\"No or wrong tok"
    "en.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}}"
    ",\"405\":{\"description\":\"No token configured: the server is read-only.\",\"content\":{\"appli"
    "cation/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"413\":{\"description\":"
    "\"Body over 64 KiB.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/sch"
    "emas/Error\"}}}}}}},\"/api/silences/{id}\":{\"delete\":{\"summary\":\"Expires a silence now (nee"
    "ds the token).\",\"security\":[{\"bearerAuth\":[]}],\"parameters\":[{\"name\":\"id\",\"in\":\"pa"
    "th\",\"required\":true,\"schema\":{\"type\":\"integer\",\"minimum\":1}}],\"responses\":{\"200\":"
    "{\"description\":\"{\\\"id\\\": N, \\\"deleted_ns\\\": T}\",\"content\":{\"application/json\":{"
    "\"schema\":{\"type\":\"object\"}}}},\"401\":{\"description\":\"No or wrong token.\",\"content\":{"
    "\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"404\":{\"descrip"
    "tion\":\"No such silence.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/componen"
    "ts/schemas/Error\"}}}}}}},\"/api/reload\":{\"post\":{\"summary\":\"Reloads the configuration and"
    " the alert rules, as SIGHUP does (needs the token), and waits up to 10 s for it: 200 reloaded, 4"
    "22 refused (a bad line: the error and the config object name the file and line; nothing changed"
    "), 202 requested but not served yet. 501 when the server runs without the service's reload.\",\"security\":[{\"bearerAuth\":[]}],\"responses\":{\"200\":{\"description\":\"{\\\"s"
    "tatus\\\": \\\"reloaded\\\"}\",\"content\":{\"application/json\":{\"schema\":{\"type\":\"object"
    "\"}}}},\"401\":{\"description\":\"No or wrong token.\",\"content\":{\"application/json\":{\"schem"
    "a\":{\"$ref\":\"#/components/schemas/Error\"}}}},\"500\":{\"description\":\"The reload failed: t"
    "he message says why.\",\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/sc"
    "hemas/Error\"}}}},\"501\":{\"description\":\"No reload in this server.\",\"content\":{\"applicat"
    "ion/json\":{\"schema\":{\"$ref\":\"#/components/schemas/Error\"}}}}}}}},\"components\":{\"schema"
    "s\":{\"Alert\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"rule\":{\"ty"
    "pe\":\"string\"},\"key\":{\"type\":\"string\"},\"process\":{\"type\":\"string\",\"nullable\":tru"
    "e},\"proc\":{\"type\":\"integer\",\"nullable\":true},\"pid\":{\"type\":\"integer\",\"nullable\":"
    "true},\"tag\":{\"type\":\"string\",\"nullable\":true},\"state\":{\"type\":\"string\",\"enum\":["
    "\"inactive\",\"pending\",\"firing\"]},\"severity\":{\"type\":\"string\",\"enum\":[\"none\",\"warn"
    "ing\",\"critical\"]},\"active_since_ns\":{\"type\":\"integer\",\"nullable\":true},\"firing_since"
    "_ns\":{\"type\":\"integer\",\"nullable\":true},\"false_since_ns\":{\"type\":\"integer\",\"nullab"
    "le\":true},\"last_sent_ns\":{\"type\":\"integer\",\"nullable\":true},\"updated_ns\":{\"type\":\""
    "integer\"},\"value\":{\"type\":\"number\",\"nullable\":true},\"threshold\":{\"type\":\"number\","
    "\"nullable\":true},\"leak_score\":{\"type\":\"number\",\"nullable\":true},\"time_to_limit_s\":{"
    "\"type\":\"number\",\"nullable\":true,\"description\":\"Seconds to the limit at the median slope;"
    " null when not growing.\"},\"labels\":{\"type\":\"object\"},\"summary\":{\"type\":\"string\"},\""
    "leak_score_components\":{\"type\":\"object\",\"description\":\"/api/alerts/{id} only: score, slo"
    "pe, slope_lo, slope_hi, mk_z, mk_p, floor_slope, stay_share, plateau, recent, points.\"},"
    "\"forecast\":{"
    "\"type\":\"object\",\"description\":\"/api/alerts/{id} only.\"}}},\"Alerts\":{\"type\":\"object\""
    ",\"properties\":{\"evaluated_ns\":{\"type\":\"integer\",\"nullable\":true},\"evaluations\":{\"ty"
    "pe\":\"integer\"},\"total\":{\"type\":\"integer\"},\"alerts\":{\"type\":\"array\",\"items\":{\"$"
    "ref\":\"#/components/schemas/Alert\"}}}},\"Transition\":{\"type\":\"object\",\"properties\":{\"t"
    "s_ns\":{\"type\":\"integer\"},\"from\":{\"type\":\"string\"},\"to\":{\"type\":\"string\"},\"seve"
    "rity\":{\"type\":\"string\"},\"value\":{\"type\":\"number\",\"nullable\":true},\"threshold\":{\""
    "type\":\"number\",\"nullable\":true},\"leak_score\":{\"type\":\"number\",\"nullable\":true},\"ti"
    "me_to_limit_s\":{\"type\":\"number\",\"nullable\":true},\"reason\":{\"type\":\"string\"}}},\"Bac"
    "ktest\":{\"type\":\"object\",\"properties\":{\"rule\":{\"type\":\"string\"},\"window\":{\"$ref\""
    ":\"#/components/schemas/Window\"},\"interval_ns\":{\"type\":\"integer\"},\"evaluations\":{\"type"
    "\":\"integer\"},\"transitions\":{\"type\":\"integer\"},\"series\":{\"type\":\"array\",\"items\":"
    "{\"type\":\"object\",\"properties\":{\"key\":{\"type\":\"string\"},\"process\":{\"type\":\"strin"
    "g\",\"nullable\":true},\"pid\":{\"type\":\"integer\",\"nullable\":true},\"tag\":{\"type\":\"stri"
    "ng\",\"nullable\":true},\"transitions\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/components/s"
    "chemas/Transition\"}}}}}}},\"Matcher\":{\"type\":\"object\",\"required\":[\"name\",\"value\"],\""
    "properties\":{\"name\":{\"type\":\"string\"},\"value\":{\"type\":\"string\"},\"isRegex\":{\"type"
    "\":\"boolean\",\"default\":false},\"isEqual\":{\"type\":\"boolean\",\"default\":true}}},\"Silenc"
    "eIn\":{\"type\":\"object\",\"required\":[\"matchers\",\"endsAt\",\"createdBy\",\"comment\"],\"pr"
    "operties\":{\"matchers\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/components/schemas/Matcher"
    "\"}},\"startsAt\":{\"type\":\"string\"},\"endsAt\":{\"type\":\"string\"},\"createdBy\":{\"type\":"
    "\"string\"},\"comment\":{\"type\":\"string\"}}},\"Silence\":{\"type\":\"object\",\"properties\":"
    "{\"id\":{\"type\":\"integer\"},\"matchers\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/componen"
    "ts/schemas/Matcher\"}},\"startsAt\":{\"type\":\"string\"},\"endsAt\":{\"type\":\"string\"},\"sta"
    "rts_ns\":{\"type\":\"integer\"},\"ends_ns\":{\"type\":\"integer\"},\"createdBy\":{\"type\":\"str"
    "ing\"},\"comment\":{\"type\":\"string\"},\"created_ns\":{\"type\":\"integer\"},\"deleted_ns\":{"
    "\"type\":\"integer\",\"nullable\":true},\"status\":{\"type\":\"object\",\"properties\":{\"state\""
    ":{\"type\":\"string\",\"enum\":[\"active\",\"pending\",\"expired\"]}}}}}},\"securitySchemes\":{"
    "\"bearerAuth\":{\"type\":\"http\",\"scheme\":\"bearer\"}}}}";

/* The stacks route's export parameters (http_stacks.c, export.h), added to
 * its parameters, and its 200's other content types. */
static const char openapi_export[] =
    "{\"parameters\":[{\"name\":\"format\",\"in\":\"query\",\"required\":false,\"description\":\"json"
    " (the default: stacks and caller tree) or a file for other tools (docs/EXPORTS.md), sent as an a"
    "ttachment named commitwatch-NAME-PID-FROM-TO.SUFFIX: folded (flamegraph.pl's input, one line per"
    " stack, frames outermost first joined by ';', a space and the value), pprof (a gzipped profile.p"
    "roto: sample types impacting_bytes, transient_bytes, commit_count; labels tag, process, pid, ins"
    "tance; open it with `go tool pprof`) or speedscope (JSON, one sampled profile per value). The ta"
    "g and type filters apply; limit does not (every matching stack is written). Folded and speedscop"
    "e leave out stacks whose value is not positive; pprof keeps them.\",\"schema\":{\"type\":\"strin"
    "g\",\"enum\":[\"json\",\"folded\",\"pprof\",\"speedscope\"],\"default\":\"json\"}},{\"name\":\"v"
    "alue\",\"in\":\"query\",\"required\":false,\"description\":\"format=folded only: the value of ea"
    "ch line.\",\"schema\":{\"type\":\"string\",\"enum\":[\"impacting\",\"transient\",\"count\"],\"de"
    "fault\":\"impacting\"}}],\"content\":{\"text/plain\":{\"schema\":{\"type\":\"string\",\"descript"
    "ion\":\"format=folded\"}},\"application/octet-stream\":{\"schema\":{\"type\":\"string\",\"format"
    "\":\"binary\",\"description\":\"format=pprof: a gzipped pprof profile\"}}}}";

/* The losses and corrections (docs/LINUX.md, "Losses and drift"): members
 * merged into the Health and Process schemas' properties (add_losses). */
static const char openapi_losses[] =
    "{\"Health\":{\"losses\":{\"type\":\"object\",\"description\":\"Every source record "
    "not applied, by reason, and the corrections from the OS's figures: lost (the kernel's or "
    "ETW's buffers were full; an .etl's header), foreign (tasks outside this PID namespace), "
    "unpaired (a call whose other half was lost), malformed (too short to read); resyncs, "
    "corrections and corrected_bytes (what the resyncs changed, per process); resync_pending "
    "(records lost since the last resync), last_resync_ns.\",\"properties\":{\"lost\":{"
    "\"type\":\"integer\"},\"foreign\":{\"type\":\"integer\"},\"unpaired\":{\"type\":"
    "\"integer\"},\"malformed\":{\"type\":\"integer\"},\"resyncs\":{\"type\":\"integer\"},"
    "\"corrections\":{\"type\":\"integer\"},\"corrected_bytes\":{\"type\":\"integer\"},"
    "\"resync_pending\":{\"type\":\"boolean\"},\"last_resync_ns\":{\"type\":\"integer\","
    "\"nullable\":true}}}},\"Process\":{\"corrections\":{\"type\":\"integer\",\"description"
    "\":\"How many times the instance's figures were corrected from the OS's own (smaps, "
    "VirtualQueryEx) after lost events: its outstanding is right, some of its events are not "
    "in the figures (they are under the (resync) stack).\"},\"corrected_bytes\":{\"type\":"
    "\"integer\",\"description\":\"Bytes the corrections committed plus decommitted.\"},"
    "\"corrected_committed_bytes\":{\"type\":\"integer\"},\"corrected_decommitted_bytes\":"
    "{\"type\":\"integer\"},\"last_correction_ns\":{\"type\":\"integer\",\"nullable\":"
    "true}}}";

/* The layer parameter of the window routes (http_processes.c's
 * cw__http_window_report), added to each one's parameters (add_layer). */
static const char openapi_layer[] =
    "{\"name\":\"layer\",\"in\":\"query\",\"required\":false,\"description\":\"commit (the "
    "default): the commit layer (VirtualAlloc, mmap); heap: the heap layer, the heap traces' "
    "allocations (one commit per allocation, one release per free; stored in the raw tier only, "
    "so its windows are the raw tier's). A window that reaches past a trace's end sees the blocks "
    "still live then released at the second after its last event, as an instance whose tracking "
    "ended.\",\"schema\":{\"type\":\"string\",\"enum\":[\"commit\",\"heap\"],"
    "\"default\":\"commit\"}}";

/* Moves every member of from's object `name` into to's (created when
 * absent). false on ENOMEM or a malformed document. */
static bool merge(cJSON *to, cJSON *from, const char *name)
{
    cJSON *src = cJSON_GetObjectItemCaseSensitive(from, name);
    cJSON *dst = cJSON_GetObjectItemCaseSensitive(to, name);
    if (!src) return true;
    if (!dst && !(dst = cJSON_AddObjectToObject(to, name))) return false;
    while (src->child) {
        cJSON *it = cJSON_DetachItemViaPointer(src, src->child);
        cJSON_AddItemToObject(dst, it->string, it);
    }
    return true;
}

/* Adds openapi_export's parameters and content types to o's stacks
 * route at path (per process, or the machine's). false on ENOMEM or a
 * malformed document. */
static bool add_export(cJSON *o, const char *path)
{
    cJSON *e = cJSON_Parse(openapi_export);
    cJSON *get = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "paths"),
                                         path),
        "get");
    cJSON *params = cJSON_GetObjectItemCaseSensitive(get, "parameters");
    cJSON *ok200 = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(get, "responses"), "200");
    cJSON *ep = cJSON_GetObjectItemCaseSensitive(e, "parameters");
    bool ok = e && params && ok200 && ep;
    while (ok && ep->child)
        cJSON_AddItemToArray(params, cJSON_DetachItemViaPointer(ep, ep->child));
    ok = ok && merge(ok200, e, "content");
    cJSON_Delete(e);
    return ok;
}

/* Adds openapi_layer to the parameters of o's GET route at path. false on
 * ENOMEM or a malformed document. */
static bool add_layer(cJSON *o, const char *path)
{
    cJSON *get = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "paths"), path),
        "get");
    cJSON *params = cJSON_GetObjectItemCaseSensitive(get, "parameters");
    cJSON *l = cJSON_Parse(openapi_layer);
    if (!params || !l) {
        cJSON_Delete(l);
        return false;
    }
    cJSON_AddItemToArray(params, l);
    return true;
}

/* Adds openapi_losses' members to the Health and Process schemas. false
 * on ENOMEM or a malformed document. */
static bool add_losses(cJSON *o)
{
    cJSON *l = cJSON_Parse(openapi_losses);
    cJSON *sc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "components"),
                                                 "schemas");
    bool ok = l && sc;
    const char *names[2] = {"Health", "Process"};
    for (int i = 0; ok && i < 2; i++) { /* l's Health members into Health.properties */
        cJSON *props = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(sc, names[i]), "properties");
        cJSON *add = cJSON_GetObjectItemCaseSensitive(l, names[i]);
        ok = props && add;
        while (ok && add->child) {
            cJSON *it = cJSON_DetachItemViaPointer(add, add->child);
            cJSON_AddItemToObject(props, it->string, it);
        }
    }
    cJSON_Delete(l);
    return ok;
}

/* Health's heap_tracing: whether this server can start heap traces. */
static bool add_heap_tracing(cJSON *o)
{
    cJSON *h = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "components"),
                                         "schemas"),
        "Health");
    cJSON *props = cJSON_GetObjectItemCaseSensitive(h, "properties");
    cJSON *p = props ? cJSON_AddObjectToObject(props, "heap_tracing") : NULL;
    return p && cJSON_AddStringToObject(p, "type", "boolean") &&
           cJSON_AddStringToObject(p, "description",
                                   "This server can start heap traces (POST "
                                   "/api/processes/{id}/heap-trace): a service with the live "
                                   "source. Stored traces are listed either way.");
}

int cw__http_openapi(cw__http_req_t *r)
{
    cJSON *o = cJSON_Parse(openapi), *a = cJSON_Parse(openapi_alerts), *f = cJSON_Parse(openapi_fold);
    cJSON *st = cJSON_Parse(openapi_stacks);
    cJSON *m = cJSON_Parse(openapi_map), *hp = cJSON_Parse(openapi_heap);
    cJSON *oc = cJSON_GetObjectItemCaseSensitive(o, "components");
    cJSON *ac = cJSON_GetObjectItemCaseSensitive(a, "components");
    int rc;
    if (!o || !a || !f || !st || !m || !oc || !merge(o, a, "paths") || !merge(o, f, "paths") ||
        !merge(o, st, "paths") || !merge(o, m, "paths") || !hp || !merge(o, hp, "paths") ||
        !merge(oc, ac, "schemas") ||
        !merge(oc, ac, "securitySchemes") || !add_losses(o) ||
        !add_export(o, "/api/processes/{id}/stacks") ||
        !add_export(o, "/api/stacks") || !add_layer(o, "/api/processes") ||
        !add_layer(o, "/api/processes/{id}/stacks") || !add_layer(o, "/api/stacks") ||
        !add_layer(o, "/api/diff") ||
        !add_heap_tracing(o))
        rc = cw__http_fail(r, 500, "the built-in OpenAPI document is not valid JSON");
    else
        rc = cw__http_send_json(r, o);
    cJSON_Delete(st);
    cJSON_Delete(m);
    cJSON_Delete(hp);
    cJSON_Delete(f);
    cJSON_Delete(a);
    cJSON_Delete(o);
    return rc;
}
