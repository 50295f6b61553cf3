/* store_retag.c - re-tags a database's stored stacks when the stack-tag
 * rules change (see retag.h).
 *
 * The stored frames and stacks are interned into a private cw_stacks table
 * (stored ids need not equal anyone's in-memory ids), each stack is tagged
 * through the tagger seam, and only rows whose tag text changed are
 * updated. One IMMEDIATE transaction covers the reads, the updates and the
 * new meta 'rules_hash', so a failure leaves the old tags and old hash
 * together, and the next start tries again. It runs once per change of
 * the rules, so its statements are prepared for the run, not cached. */
#include "commitwatch/retag.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"

static const char SQL_FRAMES[] = "SELECT id, text FROM frames ORDER BY id";
static const char SQL_STACKS[] = "SELECT id, frames, tag FROM stacks ORDER BY id";
static const char SQL_UPDATE[] = "UPDATE stacks SET tag = ?2 WHERE id = ?1";

static int dberr(sqlite3 *db, const char *what, cw_diag_t *d)
{
    return cw_diag_set(d, CW_EDB, "re-tagging stored stacks: %s failed: %s", what,
                       sqlite3_errmsg(db));
}

/* Stored frame id -> id in the private table; ids are dense in practice
 * (the store writes them so), but a map keeps this independent of it. */
typedef struct frame_map {
    uint32_t *v; /* 0 = not stored */
    size_t n;    /* slots of v, zeroed when unused */
} frame_map_t;

static int map_put(frame_map_t *m, int64_t stored, uint32_t local)
{
    if (stored < 1 || stored > UINT32_MAX) return CW_EDB;
    if (CW_RESERVE_ZEROED(m->v, m->n, (size_t)stored + 1)) return CW_ENOMEM;
    m->v[stored] = local;
    return 0;
}

static int load_frames(sqlite3 *db, cw_stacks_t *priv, frame_map_t *map, cw_diag_t *d)
{
    sqlite3_stmt *st = NULL;
    int rc, err = 0;
    if (sqlite3_prepare_v2(db, SQL_FRAMES, -1, &st, NULL) != SQLITE_OK)
        return dberr(db, "reading frames", d);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        const char *text = (const char *)sqlite3_column_text(st, 1);
        uint32_t local;
        if ((err = cw_stacks_intern_frame(priv, text ? text : "",
                                          (size_t)sqlite3_column_bytes(st, 1), &local)))
            break;
        if ((err = map_put(map, id, local)) == CW_EDB)
            cw_diag_set(d, err, "re-tagging stored stacks: frame id %lld is out of range",
                        (long long)id);
        if (err) break;
    }
    if (!err && rc != SQLITE_DONE) err = dberr(db, "reading frames", d);
    if (err == CW_ENOMEM) cw_diag_set(d, err, "re-tagging stored stacks: out of memory");
    sqlite3_finalize(st);
    return err;
}

/* Tags every stored stack; updates rows whose tag text changed. */
static int retag_stacks(sqlite3 *db, cw_stacks_t *priv, const frame_map_t *map, cw_tagger_t *t,
                        cw_retag_result_t *res, cw_diag_t *d)
{
    sqlite3_stmt *sel = NULL, *upd = NULL;
    uint32_t *fr = NULL;
    size_t cap = 0;
    int rc, err = 0;
    if (sqlite3_prepare_v2(db, SQL_STACKS, -1, &sel, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, SQL_UPDATE, -1, &upd, NULL) != SQLITE_OK) {
        err = dberr(db, "preparing", d);
        goto out;
    }
    while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(sel, 0);
        const unsigned char *blob = sqlite3_column_blob(sel, 1);
        size_t bytes = (size_t)sqlite3_column_bytes(sel, 1), n = bytes / 4;
        if (bytes % 4) {
            err = cw_diag_set(d, CW_EDB,
                              "re-tagging stored stacks: stack %lld has a frame list of %zu "
                              "bytes, not a multiple of 4 (damaged database?)",
                              (long long)id, bytes);
            goto out;
        }
        if (CW_RESERVE(fr, cap, n)) goto oom;
        cw__store_frames_decode(blob, n, fr);
        for (size_t i = 0; i < n; i++) {
            uint32_t f = fr[i];
            if (f >= map->n || map->v[f] == 0) {
                err = cw_diag_set(d, CW_EDB,
                                  "re-tagging stored stacks: stack %lld refers to frame %u, "
                                  "which is not stored (damaged database?)",
                                  (long long)id, f);
                goto out;
            }
            fr[i] = map->v[f];
        }
        uint32_t local;
        if ((err = cw_stacks_intern(priv, fr, (uint32_t)n, &local))) goto oom;
        const char *tag = cw_tagger_tag_name(t, cw_tagger_tag(t, priv, local));
        const char *old = (const char *)sqlite3_column_text(sel, 2);
        res->stacks++;
        if (old && strcmp(old, tag) == 0) continue;
        sqlite3_bind_int64(upd, 1, id);
        sqlite3_bind_text(upd, 2, tag, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(upd);
        sqlite3_reset(upd);
        if (rc != SQLITE_DONE) {
            err = dberr(db, "updating a stack's tag", d);
            goto out;
        }
        res->changed++;
    }
    if (rc != SQLITE_DONE) err = dberr(db, "reading stacks", d);
    goto out;
oom:
    err = cw_diag_set(d, CW_ENOMEM, "re-tagging stored stacks: out of memory");
out:
    sqlite3_finalize(sel);
    sqlite3_finalize(upd);
    free(fr);
    return err;
}

int cw_retag_store(cw_store_t *s, cw_tagger_t *t, cw_retag_result_t *out, cw_diag_t *d)
{
    cw_retag_result_t res = {0};
    const char *hash = cw_tagger_rules_hash(t);
    char *stored = NULL;
    cw_stacks_t *priv = NULL;
    frame_map_t map = {0};
    sqlite3 *db = s->db;
    int err;

    if ((err = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL)) != SQLITE_OK)
        return dberr(db, "starting a transaction", d);
    /* Read the hash inside the transaction: no other writer can slip in. */
    if ((err = cw_store_meta_get(s, CW_RETAG_META_KEY, &stored, d))) goto rollback;
    if (stored && strcmp(stored, hash) == 0) goto rollback; /* up to date: nothing written */
    res.ran = true;
    if ((err = cw_stacks_create(&priv))) {
        err = cw_diag_set(d, err, "re-tagging stored stacks: out of memory");
        goto rollback;
    }
    if ((err = load_frames(db, priv, &map, d))) goto rollback;
    if ((err = retag_stacks(db, priv, &map, t, &res, d))) goto rollback;
    if ((err = cw_store_meta_set(s, CW_RETAG_META_KEY, hash, d))) goto rollback;
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        err = dberr(db, "committing", d);
        goto rollback;
    }
    goto done;
rollback:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
done:
    if (out) *out = err ? (cw_retag_result_t){0} : res;
    free(stored);
    free(map.v);
    cw_stacks_destroy(priv);
    return err;
}
