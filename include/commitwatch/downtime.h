/* downtime.h - when the live source was down: the intervals the service
 * records so that the series show no data there (a gap, not a flat line)
 * and the built-in "source_down" alert rule fires while it is down
 * (docs/RELIABILITY.md, "A source that fails").
 *
 * The list is kept in the database's meta table under CW_DOWNTIME_META_KEY
 * as text, one interval a line, "FROM TO" in Unix ns, TO "-" while the
 * source is still down; the CW_DOWNTIME_MAX newest are kept. The
 * functions here are pure (base); the store reads and writes the list
 * (store.h: cw_store_downtime_get/_set). Any thread may use a list of its
 * own. */
#ifndef COMMITWATCH_DOWNTIME_H
#define COMMITWATCH_DOWNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CW_DOWNTIME_META_KEY "source_down"
#define CW_DOWNTIME_MAX 64

typedef struct cw_downtime {
    int64_t from[CW_DOWNTIME_MAX];
    int64_t to[CW_DOWNTIME_MAX]; /* INT64_MAX: still down */
    size_t n;                     /* in time order, oldest first */
} cw_downtime_t;

/* Parses text (NULL or "": no interval) into dt. Lines that do not parse
 * are skipped (the list is advisory: a bad line loses one gap). */
void cw_downtime_parse(cw_downtime_t *dt, const char *text);
/* Writes dt as text into buf (size: CW_DOWNTIME_MAX * 48 is enough).
 * Returns buf. */
#define CW_DOWNTIME_TEXT (CW_DOWNTIME_MAX * 48)
char *cw_downtime_format(const cw_downtime_t *dt, char *buf, size_t size);
/* The source went down at `at`: opens an interval (none if one is open);
 * the oldest is dropped past CW_DOWNTIME_MAX. */
void cw_downtime_begin(cw_downtime_t *dt, int64_t at);
/* It is up again (or the service stops) at `at`: closes the open
 * interval, if any (at least one ns long). Returns whether one was open. */
bool cw_downtime_end(cw_downtime_t *dt, int64_t at);
/* Whether the source was down at t: some interval has from <= t < to. */
bool cw_downtime_at(const cw_downtime_t *dt, int64_t t);
/* Whether [a, b) lies wholly inside one interval. */
bool cw_downtime_covers(const cw_downtime_t *dt, int64_t a, int64_t b);
/* Whether an interval is still open. */
bool cw_downtime_open(const cw_downtime_t *dt);

#endif
