/* defaults.c - the shipped default alert rules (alerts.h,
 * cw_alert_default_rules; docs/ALERTS.md, "Default rules", says why each
 * value is what it is). Loaded unless the configuration says
 * `alert_default_rules = no`; a rules file may not reuse their names
 * (names are unique in a set), so to change one, turn the defaults off and
 * copy what is wanted from examples/alerts.rules. */
#include "commitwatch/alerts.h"

static const char default_rules[] =
    "# The shipped default rules (docs/ALERTS.md, \"Default rules\").\n"
    "\n"
    "[rule likely_leak]\n"
    "# A process whose committed memory in one stack tag grows steadily for\n"
    "# hours and keeps what it commits.\n"
    "group_by = instance\n"
    "tag_by = tag\n"
    "metric = leak_score\n"
    "window = 6h\n"
    "warn = 0.7\n"
    "crit = 0.9\n"
    "for = 30m\n"
    "keep_firing_for = 30m\n"
    "clear = 0.85\n"
    "min_impacting_rate = 10MiB/h\n"
    "min_outstanding = 32MiB\n"
    "warmup = 30m\n"
    "labels = source=commitwatch\n"
    "summary = {process} (pid {pid}) may leak in {tag}: its committed memory keeps growing "
    "(leak score {value})\n"
    "\n"
    "[rule commit_limit]\n"
    "# The machine runs out of commit (Windows: the commit limit; Linux: the\n"
    "# CommitLimit, enforced only with vm.overcommit_memory = 2) at the\n"
    "# trend of the last hour.\n"
    "group_by = machine\n"
    "tag_by = all\n"
    "metric = time_to_limit\n"
    "limit = machine\n"
    "window = 1h\n"
    "warn = < 24h\n"
    "crit = < 2h\n"
    "for = 10m\n"
    "keep_firing_for = 15m\n"
    "clear = 0.8\n"
    "labels = source=commitwatch\n"
    "summary = the machine reaches its commit limit in {value} at the current trend\n"
    "\n"
    "[rule source_down]\n"
    "# The live event source (perf, ETW) cannot open or died: the service\n"
    "# serves what is stored and retries it, but records nothing new\n"
    "# (docs/RELIABILITY.md, \"A source that fails\").\n"
    "group_by = machine\n"
    "tag_by = all\n"
    "metric = source_down\n"
    "crit = 1\n"
    "labels = source=commitwatch\n"
    "summary = the event source is down: commitwatch records nothing new (/api/health says "
    "why)\n";

const char *cw_alert_default_rules(void)
{
    return default_rules;
}
