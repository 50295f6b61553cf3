/* store_mem.c - what SQLite holds in memory (store.h), for /api/health. */
#include <sqlite3.h>

#include "commitwatch/store.h"

void cw_store_sqlite_memory(int64_t *now, int64_t *peak)
{
    sqlite3_int64 cur = 0, hi = 0;
    if (sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &cur, &hi, 0) != SQLITE_OK) cur = hi = 0;
    *now = cur;
    *peak = hi;
}
