/* xpress.c - XPRESS decompression as .etl files use it: MS-XCA section 2.4,
 * "plain LZ77" (no Huffman stage).
 *
 * The stream is groups of 32 items, each group led by a little-endian u32
 * of flags read from the most significant bit down: 0 is a literal byte,
 * 1 a match, a u16 whose low 3 bits are a length and high 13 bits an
 * offset - 1. Length 7 continues in a half byte (two matches share one
 * byte, low nibble first), 15 there continues in a byte, 255 there in a
 * u16, 0 there in a u32; the length is that value + 3 at each stage's
 * base. A match may overlap its own output (offset 1 repeats a byte), so
 * it is copied a byte at a time. The stream ends where the input ends. */
#include <stddef.h>
#include <string.h>

#include "commitwatch/etl.h"

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The index of the highest bit set in v (v != 0). */
static int top_bit64(uint64_t v)
{
#if defined(__GNUC__)
    return 63 - __builtin_clzll(v);
#else
    int t = 63;
    while (!(v >> t & 1)) t--;
    return t;
#endif
}

int cw_etl_xpress_decompress(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                             size_t *out_len)
{
    size_t ip = 0, op = 0;
    size_t half = SIZE_MAX; /* position of the shared length byte, or none */
    uint32_t flags = 0;
    int nflags = 0;
    int rc = 0;

    for (;;) {
        /* Far from both ends (room for a whole literal run or a short
         * match, with its flags), the common items take fewer tests: a
         * literal run copied as one fixed 32-byte block (the bytes past it
         * are overwritten next), a match without length continuation far
         * enough back to copy 8 bytes at a time. Any other item leaves
         * this loop untouched, for the general code below. */
        if (in_len - ip >= 48 && out_cap - op >= 48) {
            const uint8_t *ipp = in + ip, *ilim = in + in_len - 48;
            uint8_t *opp = out + op, *olim = out + out_cap - 48;
            /* The flags not used yet, the next at the top (64 bits: a
             * literal run may shift out all 32). */
            uint64_t next = nflags ? (uint64_t)flags << (64 - nflags) : 0;
            int left = nflags;
            while (ipp <= ilim && opp <= olim) {
                if (left == 0) {
                    next = (uint64_t)rd32(ipp) << 32;
                    ipp += 4;
                    left = 32;
                }
                if (!(next >> 63)) {
                    int run = next ? 63 - (int)top_bit64(next) : 32;
                    if (run > left) run = left;
                    memcpy(opp, ipp, 32);
                    opp += run;
                    ipp += run;
                    left -= run;
                    next <<= run; /* run <= 32 */
                    continue;
                }
                unsigned sym = (unsigned)ipp[0] | (unsigned)ipp[1] << 8;
                size_t off = (sym >> 3) + 1;
                if (off > (size_t)(opp - out)) break;
                if ((sym & 7) != 7 && off >= 8) {
                    memcpy(opp, opp - off, 8);
                    memcpy(opp + 8, opp + 8 - off, 8);
                    opp += (sym & 7) + 3;
                    ipp += 2;
                    next <<= 1;
                    left--;
                    continue;
                }
                /* A longer match, or a near one (a run): its length read
                 * as below, nothing changed until it is known to fit
                 * (a 16-bit or 32-bit length goes the general way). */
                const uint8_t *q = ipp + 2;
                size_t len = sym & 7, h2 = half;
                if (len == 7) {
                    if (h2 == SIZE_MAX) {
                        h2 = (size_t)(q - in);
                        len = *q++ & 15;
                    } else {
                        len = in[h2] >> 4;
                        h2 = SIZE_MAX;
                    }
                    if (len == 15) {
                        if (*q == 255) break;
                        len = (size_t)*q++ + 15;
                    }
                    len += 7;
                }
                len += 3;
                if (len + 8 > out_cap - (size_t)(opp - out)) break;
                uint8_t *end = opp + len;
                if (off >= 8) {
                    for (uint8_t *d = opp; d < end; d += 8) memcpy(d, d - off, 8);
                } else {
                    for (uint8_t *d = opp; d < end; d++) *d = d[-(ptrdiff_t)off];
                }
                half = h2;
                opp = end;
                ipp = q;
                next <<= 1;
                left--;
            }
            ip = (size_t)(ipp - in);
            op = (size_t)(opp - out);
            nflags = left;
            /* flags keeps its low nflags bits as the next flags, as below */
            flags = left ? (uint32_t)(next >> (64 - left)) : 0;
        }
        if (nflags == 0) {
            if (ip == in_len) break; /* ends on a group boundary */
            if (in_len - ip < 4) {
                rc = CW_EPARSE;
                break;
            }
            flags = rd32(in + ip);
            ip += 4;
            nflags = 32;
        }
        if (!(flags >> (nflags - 1) & 1)) {
            /* A run of literals: as many as the flags have zeros from here. */
            uint32_t below = nflags == 32 ? flags : flags & ((1u << nflags) - 1);
            size_t run = (size_t)nflags, k;
            if (below) run = (size_t)(nflags - 1 - top_bit64(below));
            if (ip == in_len) break; /* a literal slot with no input: the end */
            k = run < in_len - ip ? run : in_len - ip;
            if (k > out_cap - op) {
                memcpy(out + op, in + ip, out_cap - op);
                ip += out_cap - op;
                op = out_cap;
                rc = CW_EPARSE;
                break;
            }
            if (k <= 16 && in_len - ip >= 16 && out_cap - op >= 16)
                memcpy(out + op, in + ip, 16); /* a short run (most are): a fixed copy,
                                                * the bytes past it overwritten next */
            else
                memcpy(out + op, in + ip, k);
            op += k;
            ip += k;
            nflags -= (int)k;
            continue;
        }
        nflags--;
        if (in_len - ip >= 2 && out_cap - op >= 16) {
            /* The common match, with fewer tests: no length continuation
             * (3 to 9 bytes), far enough back to copy 8 bytes at a time
             * (a second block reads what the first wrote when the offset
             * is under 16, as a byte-wise copy would), room for 16. */
            unsigned sym = (unsigned)in[ip] | (unsigned)in[ip + 1] << 8;
            size_t len = (sym & 7) + 3, off = (sym >> 3) + 1;
            if ((sym & 7) != 7 && off >= 8 && off <= op) {
                uint8_t *dst = out + op;
                memcpy(dst, dst - off, 8);
                memcpy(dst + 8, dst + 8 - off, 8);
                ip += 2;
                op += len;
                continue;
            }
        }
        if (ip == in_len) break; /* the spec's end of stream */
        if (in_len - ip < 2) {
            rc = CW_EPARSE;
            break;
        }
        unsigned sym = (unsigned)in[ip] | (unsigned)in[ip + 1] << 8;
        ip += 2;
        size_t len = sym & 7, off = (sym >> 3) + 1;
        if (len == 7) {
            if (half == SIZE_MAX) {
                if (ip == in_len) {
                    rc = CW_EPARSE;
                    break;
                }
                half = ip++;
                len = in[half] & 15;
            } else {
                len = in[half] >> 4;
                half = SIZE_MAX;
            }
            if (len == 15) {
                if (ip == in_len) {
                    rc = CW_EPARSE;
                    break;
                }
                len = in[ip++];
                if (len == 255) {
                    if (in_len - ip < 2) {
                        rc = CW_EPARSE;
                        break;
                    }
                    len = (size_t)in[ip] | (size_t)in[ip + 1] << 8;
                    ip += 2;
                    if (len == 0) {
                        if (in_len - ip < 4) {
                            rc = CW_EPARSE;
                            break;
                        }
                        len = rd32(in + ip);
                        ip += 4;
                    }
                    if (len < 15 + 7) {
                        rc = CW_EPARSE;
                        break;
                    }
                    len -= 15 + 7;
                }
                len += 15;
            }
            len += 7;
        }
        len += 3;
        if (off > op || len > out_cap - op) {
            rc = CW_EPARSE;
            break;
        }
        uint8_t *dst = out + op;
        const uint8_t *src = dst - off;
        if (off >= 8 && out_cap - op - len >= 8) {
            /* Eight bytes at a time: each block's source ends before its
             * destination starts; up to 7 bytes past the match are written
             * (there is room) and overwritten by what follows. */
            uint8_t *end = dst + len;
            do {
                memcpy(dst, src, 8);
                dst += 8;
                src += 8;
            } while (dst < end);
        } else if (off >= len) {
            memcpy(dst, src, len); /* no overlap */
        } else {
            for (size_t i = 0; i < len; i++) dst[i] = src[i]; /* a run: byte by byte */
        }
        op += len;
    }
    *out_len = op;
    return rc;
}
