/*
 * codesearch.index._kernels: the per-byte loops of the index build and of a search, in C.
 *
 * Each function is the whole of one hot loop that numpy could only do in several passes over
 * memory, or Python one step at a time (docs/architecture.md#compiled-kernels says why C and not
 * numba). The build's three:
 *
 *   scan(data, seen, trigrams_out, lines_out) -> (n_trigrams, n_lines)
 *       One pass over a file's bytes: the distinct trigram ids of its *normalized* text (KELVIN
 *       SIGN -> 'k', LONG S -> 's'; see trigrams.py), in order of first occurrence, and the
 *       offsets where its lines start. `seen` is a zeroed 2 MiB bit set (one bit per 24-bit
 *       trigram: it fits in the cache, where numpy's table of positions took 64 MiB); the bits
 *       this call sets are cleared before it returns, so the caller reuses it.
 *
 *   count_folded(trigrams, seen) -> int
 *       How many distinct ids a file's distinct trigrams have once ASCII-lower-cased (what
 *       maxTrigramCount limits), with the same kind of bit set.
 *
 *   invert(trigrams, doc_starts) -> (keys, card, offs, post)
 *       The posting lists of a shard: `trigrams` holds each document's distinct trigram ids one
 *       document after the other, `doc_starts[d]` where document d's start (int64, one more
 *       than there are documents). A stable sort by trigram (a radix sort of the pairs for a
 *       small input; for a large one, a split by the trigram's high byte, then a count by its low
 *       16 bits, each pass within the cache) puts each list's documents in order; each list is
 *       written as a roaring bitmap in the portable serialization format
 *       (the one CRoaring and pyroaring read: array, bitset or run containers, whichever is
 *       smallest, as CRoaring's run_optimize chooses). keys/card (uint32), offs (uint64, one
 *       more than keys) and post are returned as bytes, ready for the shard's sections.
 *
 * Both release the GIL while they run, so an indexer's threads (ctags feeding, reading the next
 * file) go on meanwhile.
 *
 * A search's: `quad_filter` / `quad_select` (a document's filter of folded quadgrams, written at
 * build time, asked at search time), `slots` (trigrams looked up in a shard's dictionary through
 * a bucket table) and `find` (a literal in a text, in either ASCII case or exactly); each says
 * more where it is defined.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#define TRIGRAM_SPACE (1u << 24)
#define SEEN_BYTES (TRIGRAM_SPACE / 8)

static int get_buffer(PyObject *obj, Py_buffer *view, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, view, writable ? (PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) : PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Format(PyExc_TypeError, "%s: a contiguous%s buffer is needed", what, writable ? " writable" : "");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------- normalized text */

/* The build's two loops over a file's bytes (`scan`, `quad_filter`) read its *normalized* text:
 * KELVIN SIGN (E2 84 AA) is 'k', LATIN SMALL LETTER LONG S (C5 BF) is 's' (trigrams.py says why).
 * Testing every byte for the first byte of those sequences cost each loop two compares and a
 * branch a byte; instead memchr (vectorized by the C library) finds the next 0xE2 and the next
 * 0xC5, and the loops run without a test up to there. */
typedef struct {
    const uint8_t *p;
    Py_ssize_t n, e2, c5; /* the next 0xE2 and 0xC5 at or after the last position asked (n: none) */
} Specials;

static inline Py_ssize_t next_special(Specials *s, Py_ssize_t from) {
    if (s->e2 < from) {
        const uint8_t *q = memchr(s->p + from, 0xE2, (size_t)(s->n - from));
        s->e2 = q ? q - s->p : s->n;
    }
    if (s->c5 < from) {
        const uint8_t *q = memchr(s->p + from, 0xC5, (size_t)(s->n - from));
        s->c5 = q ? q - s->p : s->n;
    }
    return s->e2 < s->c5 ? s->e2 : s->c5;
}

/* The normalized byte at *i (a 0xE2 or 0xC5), moving *i to the last byte it is made of. */
static inline uint8_t normalized_at(const uint8_t *p, Py_ssize_t n, Py_ssize_t *i) {
    const uint8_t b = p[*i];
    if (b == 0xE2 && *i + 2 < n && p[*i + 1] == 0x84 && p[*i + 2] == 0xAA) {
        *i += 2;
        return 'k'; /* KELVIN SIGN U+212A */
    }
    if (b == 0xC5 && *i + 1 < n && p[*i + 1] == 0xBF) {
        *i += 1;
        return 's'; /* LATIN SMALL LETTER LONG S U+017F */
    }
    return b;
}

/* ------------------------------------------------------------------------------------- scan */

static PyObject *scan(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *data_o, *seen_o, *tri_o, *lines_o;
    if (!PyArg_ParseTuple(args, "OOOO", &data_o, &seen_o, &tri_o, &lines_o)) return NULL;
    Py_buffer data, seen, tri, lines;
    if (get_buffer(data_o, &data, 0, "data") < 0) return NULL;
    if (get_buffer(seen_o, &seen, 1, "seen") < 0) goto fail_data;
    if (get_buffer(tri_o, &tri, 1, "trigrams_out") < 0) goto fail_seen;
    if (get_buffer(lines_o, &lines, 1, "lines_out") < 0) goto fail_tri;
    const Py_ssize_t n = data.len;
    if (seen.len < SEEN_BYTES) {
        PyErr_SetString(PyExc_ValueError, "seen: a bit set of 2 MiB is needed");
        goto fail;
    }
    if (tri.len < (Py_ssize_t)sizeof(uint32_t) * (n > 2 ? n - 2 : 0) || lines.len < (Py_ssize_t)sizeof(uint32_t) * (n + 1)) {
        PyErr_SetString(PyExc_ValueError, "trigrams_out or lines_out: too small for the data");
        goto fail;
    }
    if (n > 0xFFFFFFFFll) {
        PyErr_SetString(PyExc_ValueError, "data: larger than 4 GiB");
        goto fail;
    }
    const uint8_t *p = (const uint8_t *)data.buf;
    uint8_t *bits = (uint8_t *)seen.buf;
    uint32_t *out = (uint32_t *)tri.buf;
    uint32_t *ls = (uint32_t *)lines.buf;
    Py_ssize_t nt = 0, nl = 0;

    Py_BEGIN_ALLOW_THREADS
    /* Line starts first, with memchr (vectorized by the C library): a test for '\n' in the loop
     * below was a branch the CPU mispredicted once a line. */
    ls[nl++] = 0; /* a file, even an empty one, has a first line */
    for (const uint8_t *q = p, *end = p + n; (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++)
        if (q + 1 < end) ls[nl++] = (uint32_t)(q + 1 - p);
    /* Then the trigrams, without a branch on whether each is new: its id is written at the end
     * of the output every time, and the end moves on only when its bit was not set yet. */
    uint32_t window = 0; /* the last normalized bytes, newest in the low byte */
    Py_ssize_t have = 0; /* how many normalized bytes the window holds (until 2) */
#define ADD_TRIGRAM()                                                                                  \
    do {                                                                                               \
        uint8_t *byte = &bits[window >> 3];                                                            \
        const uint8_t bit = (uint8_t)(1u << (window & 7)), old = *byte;                                \
        *byte = old | bit;                                                                             \
        out[nt] = window;                                                                              \
        nt += !(old & bit);                                                                            \
    } while (0)
    Specials sp = {p, n, -1, -1};
    for (Py_ssize_t i = 0; i < n; i++) {
        const Py_ssize_t stop = next_special(&sp, i);
        for (; have < 2 && i < stop; i++, have++) window = window << 8 | p[i];
        for (; i < stop; i++) {
            window = (window << 8 | p[i]) & 0xFFFFFFu;
            ADD_TRIGRAM();
        }
        if (i == n) break;
        window = (window << 8 | normalized_at(p, n, &i)) & 0xFFFFFFu;
        if (have < 2) have++;
        else ADD_TRIGRAM();
    }
#undef ADD_TRIGRAM
    for (Py_ssize_t j = 0; j < nt; j++) bits[out[j] >> 3] = 0;
    Py_END_ALLOW_THREADS

    PyBuffer_Release(&lines);
    PyBuffer_Release(&tri);
    PyBuffer_Release(&seen);
    PyBuffer_Release(&data);
    return Py_BuildValue("nn", nt, nl);
fail:
    PyBuffer_Release(&lines);
fail_tri:
    PyBuffer_Release(&tri);
fail_seen:
    PyBuffer_Release(&seen);
fail_data:
    PyBuffer_Release(&data);
    return NULL;
}

/* count_folded(trigrams, seen) -> int: how many distinct ids `trigrams` (uint32, distinct, as
 * `scan` gives them) has once each of their bytes is ASCII-lower-cased: what maxTrigramCount
 * limits, counted with `seen` (a zeroed 2 MiB bit set, left zeroed) where numpy sorted a copy. */
static inline uint32_t fold_id(uint32_t t) {
    uint32_t out = t;
    for (int shift = 0; shift < 24; shift += 8) {
        const uint32_t b = (t >> shift) & 0xFFu;
        if (b >= 'A' && b <= 'Z') out += 32u << shift;
    }
    return out;
}

static PyObject *count_folded(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *tri_o, *seen_o;
    if (!PyArg_ParseTuple(args, "OO", &tri_o, &seen_o)) return NULL;
    Py_buffer tri, seen;
    if (get_buffer(tri_o, &tri, 0, "trigrams") < 0) return NULL;
    if (get_buffer(seen_o, &seen, 1, "seen") < 0) {
        PyBuffer_Release(&tri);
        return NULL;
    }
    if (seen.len < SEEN_BYTES) {
        PyErr_SetString(PyExc_ValueError, "seen: a bit set of 2 MiB is needed");
        PyBuffer_Release(&seen);
        PyBuffer_Release(&tri);
        return NULL;
    }
    const uint32_t *t = (const uint32_t *)tri.buf;
    const Py_ssize_t n = tri.len / 4;
    uint8_t *bits = (uint8_t *)seen.buf;
    Py_ssize_t count = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint32_t f = fold_id(t[i]) & (TRIGRAM_SPACE - 1);
        const uint8_t bit = (uint8_t)(1u << (f & 7));
        if (!(bits[f >> 3] & bit)) {
            bits[f >> 3] |= bit;
            count++;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) bits[(fold_id(t[i]) & (TRIGRAM_SPACE - 1)) >> 3] = 0;
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&seen);
    PyBuffer_Release(&tri);
    return PyLong_FromSsize_t(count);
}

/* ------------------------------------------------------------------------------ invert */

/* Roaring portable format (https://github.com/RoaringBitmap/RoaringFormatSpec). */
#define SERIAL_COOKIE_NO_RUNCONTAINER 12346u
#define SERIAL_COOKIE 12347u
#define NO_OFFSET_THRESHOLD 4
#define ARRAY_MAX 4096
#define BITSET_BYTES 8192

enum { ARRAY, BITSET, RUN };

typedef struct {
    uint8_t *buf;
    size_t len, cap;
} Out;

static int out_reserve(Out *o, size_t more) {
    if (o->len + more <= o->cap) return 0;
    size_t cap = o->cap ? o->cap : 1 << 20;
    while (cap < o->len + more) cap *= 2;
    uint8_t *b = realloc(o->buf, cap);
    if (!b) return -1;
    o->buf = b;
    o->cap = cap;
    return 0;
}

static inline void put16(uint8_t *at, uint32_t v) {
    at[0] = (uint8_t)v;
    at[1] = (uint8_t)(v >> 8);
}

static inline void put32(uint8_t *at, uint32_t v) {
    put16(at, v & 0xFFFF);
    put16(at + 2, v >> 16);
}

/* One container of a posting list: documents docs[a..b) share the high 16 bits `key`. */
typedef struct {
    uint32_t key, a, b, runs;
    int kind;
} Container;

static size_t container_bytes(const Container *c) {
    uint32_t card = c->b - c->a;
    return c->kind == RUN ? 2 + 4 * (size_t)c->runs : c->kind == BITSET ? BITSET_BYTES : 2 * (size_t)card;
}

/* Append the serialized bitmap of the sorted, distinct `docs[0..card)` to `o`. */
static int serialize(Out *o, const uint32_t *docs, uint32_t card, Container *cs) {
    uint32_t n = 0, i = 0;
    int has_run = 0;
    while (i < card) {
        Container *c = &cs[n++];
        c->key = docs[i] >> 16;
        c->a = i;
        c->runs = 1;
        for (i++; i < card && docs[i] >> 16 == c->key; i++)
            if (docs[i] != docs[i - 1] + 1) c->runs++;
        c->b = i;
        uint32_t cc = c->b - c->a;
        size_t run_size = 2 + 4 * (size_t)c->runs;
        if (cc <= ARRAY_MAX) c->kind = run_size < 2 + 2 * (size_t)cc ? RUN : ARRAY;
        else c->kind = run_size < BITSET_BYTES ? RUN : BITSET;
        has_run |= c->kind == RUN;
    }
    size_t header = has_run ? 4 + (n + 7) / 8 + 4 * (size_t)n + (n >= NO_OFFSET_THRESHOLD ? 4 * (size_t)n : 0)
                            : 8 + 8 * (size_t)n;
    size_t body = 0;
    for (uint32_t k = 0; k < n; k++) body += container_bytes(&cs[k]);
    if (out_reserve(o, header + body) < 0) return -1;
    uint8_t *w = o->buf + o->len;
    memset(w, 0, header + body);
    uint8_t *at = w;
    if (has_run) {
        put32(at, SERIAL_COOKIE | ((n - 1) << 16));
        at += 4;
        for (uint32_t k = 0; k < n; k++)
            if (cs[k].kind == RUN) at[k / 8] |= (uint8_t)(1u << (k % 8));
        at += (n + 7) / 8;
    } else {
        put32(at, SERIAL_COOKIE_NO_RUNCONTAINER);
        put32(at + 4, n);
        at += 8;
    }
    for (uint32_t k = 0; k < n; k++, at += 4) {
        put16(at, cs[k].key);
        put16(at + 2, cs[k].b - cs[k].a - 1);
    }
    if (!has_run || n >= NO_OFFSET_THRESHOLD) {
        uint32_t off = (uint32_t)header;
        for (uint32_t k = 0; k < n; k++, at += 4) {
            put32(at, off);
            off += (uint32_t)container_bytes(&cs[k]);
        }
    }
    for (uint32_t k = 0; k < n; k++) {
        const Container *c = &cs[k];
        if (c->kind == ARRAY) {
            for (uint32_t j = c->a; j < c->b; j++, at += 2) put16(at, docs[j] & 0xFFFF);
        } else if (c->kind == BITSET) {
            for (uint32_t j = c->a; j < c->b; j++) {
                uint32_t low = docs[j] & 0xFFFF;
                at[low >> 3] |= (uint8_t)(1u << (low & 7)); /* little-endian 64-bit words = bytes in order */
            }
            at += BITSET_BYTES;
        } else {
            put16(at, c->runs);
            at += 2;
            uint32_t j = c->a;
            while (j < c->b) {
                uint32_t start = j;
                while (j + 1 < c->b && docs[j + 1] == docs[j] + 1) j++;
                put16(at, docs[start] & 0xFFFF);
                put16(at + 2, j - start);
                at += 4;
                j++;
            }
        }
    }
    o->len += header + body;
    return 0;
}

/* Below this many (trigram, document) pairs, `invert` sorts the pairs instead of counting over the
 * whole trigram space: a count per possible trigram (64 MB, zeroed and scanned twice) costs ~30 ms
 * whatever the input, which dominated the build of a small repository's shard. */
#define SMALL_INVERT (TRIGRAM_SPACE / 8)
#define RADIX_BITS 12
#define RADIX (1u << RADIX_BITS)

/* The (trigram, document) pairs of `t` (documents delimited by `ds`), sorted by trigram by a stable
 * two-pass LSD radix sort, so each trigram's documents stay in increasing order (as the counting
 * sort leaves them): the distinct trigrams go to *keys_o, their document counts to *card_o, the
 * documents of all lists one after the other to *docs_o. Returns 0, -1 out of memory, -2 for an id
 * above 24 bits. */
static int sort_pairs(const uint32_t *t, const int64_t *ds, Py_ssize_t ndocs, Py_ssize_t total, uint32_t **keys_o,
                      uint32_t **card_o, uint32_t **docs_o, Py_ssize_t *nkeys_o) {
    size_t n = total ? (size_t)total : 1;
    uint32_t *ta = malloc(4 * n), *da = malloc(4 * n), *tb = malloc(4 * n), *db = malloc(4 * n);
    uint32_t *cnt = malloc(4 * RADIX), *keys = NULL, *card = NULL;
    int rc = 0;
    if (!ta || !da || !tb || !db || !cnt) { rc = -1; goto out; }
    for (Py_ssize_t d = 0; d < ndocs; d++)
        for (int64_t i = ds[d]; i < ds[d + 1]; i++) {
            if (t[i] >= TRIGRAM_SPACE) { rc = -2; goto out; }
            ta[i] = t[i];
            da[i] = (uint32_t)d;
        }
    for (int shift = 0; shift < 24; shift += RADIX_BITS) {
        memset(cnt, 0, 4 * RADIX);
        for (Py_ssize_t i = 0; i < total; i++) cnt[(ta[i] >> shift) & (RADIX - 1)]++;
        uint32_t at = 0;
        for (uint32_t b = 0; b < RADIX; b++) {
            uint32_t c = cnt[b];
            cnt[b] = at;
            at += c;
        }
        for (Py_ssize_t i = 0; i < total; i++) {
            uint32_t j = cnt[(ta[i] >> shift) & (RADIX - 1)]++;
            tb[j] = ta[i];
            db[j] = da[i];
        }
        uint32_t *swap = ta; ta = tb; tb = swap;
        swap = da; da = db; db = swap;
    }
    Py_ssize_t nkeys = 0;
    for (Py_ssize_t i = 0; i < total; i++) nkeys += i == 0 || ta[i] != ta[i - 1];
    keys = malloc(sizeof(uint32_t) * (nkeys ? nkeys : 1));
    card = malloc(sizeof(uint32_t) * (nkeys ? nkeys : 1));
    if (!keys || !card) { rc = -1; goto out; }
    Py_ssize_t k = -1;
    for (Py_ssize_t i = 0; i < total; i++) {
        if (i == 0 || ta[i] != ta[i - 1]) {
            keys[++k] = ta[i];
            card[k] = 0;
        }
        card[k]++;
    }
    *keys_o = keys;
    *card_o = card;
    *docs_o = da;
    *nkeys_o = nkeys;
    keys = card = da = NULL;
out:
    free(ta);
    free(da);
    free(tb);
    free(db);
    free(cnt);
    free(keys);
    free(card);
    return rc;
}

static PyObject *invert(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *tri_o, *starts_o;
    if (!PyArg_ParseTuple(args, "OO", &tri_o, &starts_o)) return NULL;
    Py_buffer tri, starts;
    if (get_buffer(tri_o, &tri, 0, "trigrams") < 0) return NULL;
    if (get_buffer(starts_o, &starts, 0, "doc_starts") < 0) {
        PyBuffer_Release(&tri);
        return NULL;
    }
    const uint32_t *t = (const uint32_t *)tri.buf;
    const int64_t *ds = (const int64_t *)starts.buf;
    const Py_ssize_t total = tri.len / 4, ndocs = starts.len / 8 - 1;
    PyObject *result = NULL;
    uint32_t *counts = NULL, *keys = NULL, *card = NULL, *docs = NULL;
    uint64_t *offs = NULL;
    Container *cs = NULL;
    Out post = {0};
    int bad = 0, nomem = 0;
    Py_ssize_t nkeys = 0;
    int described = tri.len % 4 == 0 && starts.len % 8 == 0 && ndocs >= 0 && ds[0] == 0 && ds[ndocs] == total;
    for (Py_ssize_t d = 0; described && d < ndocs; d++) described = ds[d] <= ds[d + 1];
    if (!described || total >= 0xFFFFFFFFll) {
        PyErr_SetString(PyExc_ValueError, "doc_starts: does not describe the trigrams (int64 offsets from 0, "
                                          "non-decreasing, the last one the number of uint32 trigram ids)");
        goto done;
    }

    Py_BEGIN_ALLOW_THREADS
    if (total < SMALL_INVERT) {
        cs = malloc(sizeof(Container) * 65536);
        if (!cs) nomem = 1;
        else {
            int r = sort_pairs(t, ds, ndocs, total, &keys, &card, &docs, &nkeys);
            nomem = r == -1;
            bad = r == -2;
        }
        if (!nomem && !bad) {
            offs = malloc(sizeof(uint64_t) * (nkeys + 1));
            if (!offs) nomem = 1;
        }
        if (!nomem && !bad) {
            size_t begin = 0;
            offs[0] = 0;
            for (Py_ssize_t k = 0; k < nkeys && !nomem; k++) {
                if (serialize(&post, docs + begin, card[k], cs) < 0) nomem = 1;
                begin += card[k];
                offs[k + 1] = post.len;
            }
        }
        goto inverted;
    }
    {
        /* Two passes that each stay in the cache, where one count per possible trigram (64 MB)
         * and a scatter of every pair into a 4-byte slot anywhere in `docs` missed it on nearly
         * every pair (25 ns a pair): first the pairs are split by the trigram's high byte into
         * 256 runs (256 write streams), keeping their order; then each run, a few hundred KB, is
         * counting-sorted by the low 16 bits with 65,536 counters (256 KB) into its own part of
         * `docs`. Both passes keep the documents of a trigram in increasing order. */
        uint16_t *low = malloc(sizeof(uint16_t) * (total ? total : 1));
        uint32_t *held = malloc(sizeof(uint32_t) * (total ? total : 1));
        counts = malloc(sizeof(uint32_t) * 65536);
        docs = malloc(sizeof(uint32_t) * (total ? total : 1));
        cs = malloc(sizeof(Container) * 65536);
        size_t run[257] = {0}, cursor[256], room = 0; /* room: keys and card hold this many */
        if (!low || !held || !counts || !docs || !cs) nomem = 1;
        for (Py_ssize_t i = 0; !nomem && i < total; i++) {
            if (t[i] >= TRIGRAM_SPACE) { bad = 1; break; }
            run[(t[i] >> 16) + 1]++;
        }
        if (!nomem && !bad) {
            for (int h = 0; h < 256; h++) run[h + 1] += run[h];
            for (int h = 0; h < 256; h++) cursor[h] = run[h];
            for (Py_ssize_t d = 0; d < ndocs; d++)
                for (int64_t i = ds[d]; i < ds[d + 1]; i++) {
                    const size_t j = cursor[t[i] >> 16]++;
                    low[j] = (uint16_t)t[i];
                    held[j] = (uint32_t)d;
                }
            for (int h = 0; h < 256; h++) {
                const size_t a = run[h], b = run[h + 1];
                if (a == b) continue;
                if ((size_t)nkeys + 65536 > room) { /* a run adds at most 65,536 keys */
                    room = 2 * room > (size_t)nkeys + 65536 ? 2 * room : (size_t)nkeys + 65536;
                    uint32_t *k2 = realloc(keys, sizeof(uint32_t) * room);
                    if (k2) keys = k2;
                    uint32_t *c2 = k2 ? realloc(card, sizeof(uint32_t) * room) : NULL;
                    if (c2) card = c2;
                    if (!k2 || !c2) { nomem = 1; break; }
                }
                memset(counts, 0, sizeof(uint32_t) * 65536);
                for (size_t j = a; j < b; j++) counts[low[j]]++;
                uint32_t at = (uint32_t)a;
                for (uint32_t v = 0; v < 65536; v++) {
                    const uint32_t c = counts[v];
                    if (!c) continue;
                    keys[nkeys] = (uint32_t)h << 16 | v;
                    card[nkeys++] = c;
                    counts[v] = at;
                    at += c;
                }
                for (size_t j = a; j < b; j++) docs[counts[low[j]]++] = held[j];
            }
            if (!nomem) offs = malloc(sizeof(uint64_t) * (nkeys + 1));
            if (!offs) nomem = 1;
        }
        free(low);
        free(held);
        if (!nomem && !bad) {
            size_t begin = 0;
            offs[0] = 0;
            for (Py_ssize_t k = 0; k < nkeys && !nomem; k++) {
                if (serialize(&post, docs + begin, card[k], cs) < 0) nomem = 1;
                begin += card[k];
                offs[k + 1] = post.len;
            }
        }
    }
inverted:
    Py_END_ALLOW_THREADS

    if (nomem) PyErr_NoMemory();
    else if (bad) PyErr_SetString(PyExc_ValueError, "trigrams: an id above 24 bits");
    else
        result = Py_BuildValue("y#y#y#y#", (const char *)keys, (Py_ssize_t)(4 * nkeys), (const char *)card,
                               (Py_ssize_t)(4 * nkeys), (const char *)offs, (Py_ssize_t)(8 * (nkeys + 1)),
                               post.buf ? (const char *)post.buf : "", (Py_ssize_t)post.len);
done:
    free(counts);
    free(docs);
    free(cs);
    free(keys);
    free(card);
    free(offs);
    free(post.buf);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&tri);
    return result;
}

/* --------------------------------------------------------------------- quadgram filters */

/* A quadgram filter is a one-hash Bloom filter of the *folded* quadgrams of a document (its
 * normalized text with ASCII A-Z lower-cased): bit ((q * GOLDEN) mod 2^32) * m >> 32 is set for
 * each four consecutive bytes q (big-endian). It answers "may this document contain this folded
 * quadgram?" with no false negatives, whatever the case of the text or of the query. */
#define GOLDEN 0x9E3779B1u

static inline uint32_t fold_byte(uint8_t b) { return (b >= 'A' && b <= 'Z') ? (uint32_t)(b | 0x20) : b; }

/* fold_byte of every byte, filled when the module loads: one load in the loop instead of a compare */
static uint8_t FOLD[256];

static inline uint64_t quad_bit(uint32_t quad, uint64_t m) { return ((uint64_t)(uint32_t)(quad * GOLDEN) * m) >> 32; }

static PyObject *quad_filter(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *data_o, *out_o;
    if (!PyArg_ParseTuple(args, "OO", &data_o, &out_o)) return NULL;
    Py_buffer data, out;
    if (get_buffer(data_o, &data, 0, "data") < 0) return NULL;
    if (get_buffer(out_o, &out, 1, "filter") < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    const uint8_t *p = (const uint8_t *)data.buf;
    uint8_t *bits = (uint8_t *)out.buf;
    const uint64_t m = 8 * (uint64_t)out.len;
    const Py_ssize_t n = data.len;
    if (m) {
        Py_BEGIN_ALLOW_THREADS
        uint32_t window = 0;
        Py_ssize_t have = 0;
#define ADD_QUAD()                                                                                     \
    do {                                                                                               \
        const uint64_t bit = quad_bit(window, m);                                                      \
        bits[bit >> 3] |= (uint8_t)(1u << (bit & 7));                                                  \
    } while (0)
        Specials sp = {p, n, -1, -1};
        for (Py_ssize_t i = 0; i < n; i++) {
            const Py_ssize_t stop = next_special(&sp, i);
            for (; have < 3 && i < stop; i++, have++) window = window << 8 | FOLD[p[i]];
            for (; i < stop; i++) {
                window = window << 8 | FOLD[p[i]];
                ADD_QUAD();
            }
            if (i == n) break;
            window = window << 8 | fold_byte(normalized_at(p, n, &i));
            if (have < 3) have++;
            else ADD_QUAD();
        }
#undef ADD_QUAD
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&out);
    PyBuffer_Release(&data);
    Py_RETURN_NONE;
}

static PyObject *quad_select(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *filters_o, *offs_o, *docs_o, *quads_o, *out_o;
    if (!PyArg_ParseTuple(args, "OOOOO", &filters_o, &offs_o, &docs_o, &quads_o, &out_o)) return NULL;
    Py_buffer filters, offs, docs, quads, out;
    if (get_buffer(filters_o, &filters, 0, "filters") < 0) return NULL;
    if (get_buffer(offs_o, &offs, 0, "offsets") < 0) goto f0;
    if (get_buffer(docs_o, &docs, 0, "docs") < 0) goto f1;
    if (get_buffer(quads_o, &quads, 0, "quads") < 0) goto f2;
    if (get_buffer(out_o, &out, 1, "out") < 0) goto f3;
    const uint64_t *o = (const uint64_t *)offs.buf;
    const uint32_t *d = (const uint32_t *)docs.buf, *q = (const uint32_t *)quads.buf;
    const Py_ssize_t ndocs = docs.len / 4, nq = quads.len / 4, nfilters = offs.len / 8 - 1;
    if (out.len < docs.len) {
        PyErr_SetString(PyExc_ValueError, "out: smaller than docs");
        goto f4;
    }
    for (Py_ssize_t i = 0; i < ndocs; i++)
        if ((Py_ssize_t)d[i] >= nfilters || o[d[i] + 1] < o[d[i]] || o[d[i] + 1] > (uint64_t)filters.len) {
            PyErr_Format(PyExc_ValueError, "document %u: no quadgram filter in the section", d[i]);
            goto f4;
        }
    uint32_t *w = (uint32_t *)out.buf;
    Py_ssize_t kept = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < ndocs; i++) {
        const uint8_t *bits = (const uint8_t *)filters.buf + o[d[i]];
        const uint64_t m = 8 * (o[d[i] + 1] - o[d[i]]);
        int keep = 1;
        for (Py_ssize_t j = 0; m && keep && j < nq; j++) {
            uint64_t bit = quad_bit(q[j], m);
            keep = (bits[bit >> 3] >> (bit & 7)) & 1;
        }
        if (keep) w[kept++] = d[i];
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    PyBuffer_Release(&quads);
    PyBuffer_Release(&docs);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&filters);
    return PyLong_FromSsize_t(kept);
f4:
    PyBuffer_Release(&out);
f3:
    PyBuffer_Release(&quads);
f2:
    PyBuffer_Release(&docs);
f1:
    PyBuffer_Release(&offs);
f0:
    PyBuffer_Release(&filters);
    return NULL;
}

/* ------------------------------------------------------------------------- dictionary lookup */

/* slots(keys, card, table, shift, want, slot_out, card_out): where each trigram of `want` is in a
 * shard's sorted dictionary `keys` (-1: absent) and its posting list's size (0: absent).
 *
 * `table[b]` is the first key at or above b << shift (one more entry than there are buckets):
 * a search reads one bucket of a few dozen keys instead of bisecting the whole dictionary (a few
 * hundred thousand keys, several MB), whose deep levels miss the cache once the rest of a search
 * has run between two shards: 104 lookups (an any-case literal of 15 letters) cost ~40 µs a shard
 * that way, most of them waiting on memory. */
static PyObject *slots(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *keys_o, *card_o, *table_o, *want_o, *slot_o, *cout_o;
    int shift;
    if (!PyArg_ParseTuple(args, "OOOiOOO", &keys_o, &card_o, &table_o, &shift, &want_o, &slot_o, &cout_o)) return NULL;
    Py_buffer keys, card, table, want, slot, cout;
    if (get_buffer(keys_o, &keys, 0, "keys") < 0) return NULL;
    if (get_buffer(card_o, &card, 0, "card") < 0) goto k0;
    if (get_buffer(table_o, &table, 0, "table") < 0) goto k1;
    if (get_buffer(want_o, &want, 0, "want") < 0) goto k2;
    if (get_buffer(slot_o, &slot, 1, "slot_out") < 0) goto k3;
    if (get_buffer(cout_o, &cout, 1, "card_out") < 0) goto k4;
    const Py_ssize_t nkeys = keys.len / 4, nwant = want.len / 4, nbuckets = table.len / 4 - 1;
    if (card.len / 4 != nkeys || slot.len / 8 < nwant || cout.len / 8 < nwant || nbuckets < 1 || shift < 0 ||
        shift > 31) {
        PyErr_SetString(PyExc_ValueError, "slots: the arrays disagree in size");
        goto k5;
    }
    const uint32_t *k = (const uint32_t *)keys.buf, *c = (const uint32_t *)card.buf, *tb = (const uint32_t *)table.buf;
    const uint32_t *w = (const uint32_t *)want.buf;
    int64_t *so = (int64_t *)slot.buf, *co = (int64_t *)cout.buf;
    /* Two passes over `want` that only ask for memory (the bucket bounds, then the middle of each
     * bucket), so that the cache misses of all the lookups wait together, not one after another. */
    for (Py_ssize_t i = 0; i < nwant; i++) {
        const uint64_t b = (uint64_t)w[i] >> shift;
        if (b < (uint64_t)nbuckets) __builtin_prefetch(tb + b);
    }
    for (Py_ssize_t i = 0; i < nwant; i++) {
        const uint64_t b = (uint64_t)w[i] >> shift;
        if (b < (uint64_t)nbuckets && tb[b] < (uint64_t)nkeys) __builtin_prefetch(k + tb[b] + (tb[b + 1] - tb[b]) / 2);
    }
    for (Py_ssize_t i = 0; i < nwant; i++) {
        const uint32_t t = w[i];
        const uint64_t b = (uint64_t)t >> shift;
        so[i] = -1, co[i] = 0;
        if (b >= (uint64_t)nbuckets) continue;
        Py_ssize_t lo = tb[b], hi = tb[b + 1];
        if (hi > nkeys) hi = nkeys;
        if (lo > hi) lo = hi;
        while (lo < hi) { /* the first key >= t */
            const Py_ssize_t mid = lo + (hi - lo) / 2;
            if (k[mid] < t) lo = mid + 1;
            else hi = mid;
        }
        if (lo < nkeys && k[lo] == t) so[i] = lo, co[i] = c[lo];
    }
    PyBuffer_Release(&cout);
    PyBuffer_Release(&slot);
    PyBuffer_Release(&want);
    PyBuffer_Release(&table);
    PyBuffer_Release(&card);
    PyBuffer_Release(&keys);
    Py_RETURN_NONE;
k5:
    PyBuffer_Release(&cout);
k4:
    PyBuffer_Release(&slot);
k3:
    PyBuffer_Release(&want);
k2:
    PyBuffer_Release(&table);
k1:
    PyBuffer_Release(&card);
k0:
    PyBuffer_Release(&keys);
    return NULL;
}

/* ------------------------------------------------------------------------- literal search */

/* How common each byte is in source code, as a rank (255 = the most common: the space), measured
 * on 80 MB of the benchmark corpus (bench/corpus.py). `find` looks for the needle's two rarest
 * bytes together with a vector scan and compares the whole needle only where both are: on code
 * that happens a few times per kilobyte, so most of the text is only scanned. */
static const uint8_t BYTE_RANK[256] = {
    0, 2, 5, 3, 7, 12, 13, 44, 39, 179, 244, 115, 126, 157, 128, 133,
    144, 136, 148, 130, 138, 143, 141, 147, 135, 137, 142, 145, 146, 139, 149, 153,
    255, 164, 223, 178, 161, 168, 174, 193, 221, 220, 214, 201, 229, 232, 241, 219,
    253, 245, 242, 240, 238, 239, 234, 233, 231, 236, 213, 207, 215, 222, 218, 160,
    163, 196, 183, 202, 192, 206, 182, 175, 186, 195, 166, 189, 200, 191, 203, 194,
    190, 173, 199, 205, 211, 184, 172, 171, 170, 169, 167, 198, 177, 197, 162, 227,
    185, 251, 216, 237, 230, 254, 225, 217, 224, 249, 176, 204, 243, 226, 248, 246,
    235, 181, 247, 250, 252, 228, 209, 208, 210, 212, 180, 187, 165, 188, 156, 151,
    140, 53, 100, 97, 102, 94, 106, 92, 129, 117, 45, 70, 48, 27, 41, 28,
    29, 49, 93, 103, 112, 42, 18, 58, 40, 85, 89, 30, 80, 87, 107, 21,
    154, 50, 35, 36, 71, 131, 83, 72, 51, 134, 23, 54, 16, 46, 17, 24,
    19, 125, 114, 82, 64, 158, 104, 56, 105, 33, 25, 119, 118, 123, 78, 60,
    26, 34, 155, 152, 69, 96, 59, 20, 38, 37, 47, 31, 65, 66, 159, 132,
    90, 32, 67, 76, 52, 55, 61, 81, 74, 62, 63, 79, 73, 75, 68, 77,
    84, 86, 150, 91, 98, 99, 109, 127, 122, 124, 108, 116, 121, 113, 120, 110,
    111, 101, 95, 88, 57, 43, 22, 15, 14, 11, 8, 9, 1, 10, 4, 6,
};

static inline uint8_t lower(uint8_t b) { return (b >= 'A' && b <= 'Z') ? (uint8_t)(b | 0x20) : b; }
static inline int is_letter(uint8_t b) { return (uint8_t)((b | 0x20) - 'a') < 26; }

/* The needle's bytes by rarity: the rarest in `*first`, the next rarest at another place in
 * `*second` (the same as first for a needle of one byte). Folded, a letter counts both cases. */
static void rare_pair(const uint8_t *nd, Py_ssize_t m, int fold, Py_ssize_t *first, Py_ssize_t *second) {
    int best = 1 << 30, next = 1 << 30;
    *first = *second = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        uint8_t b = nd[i];
        int r = fold && is_letter(b) ? BYTE_RANK[lower(b)] + BYTE_RANK[lower(b) ^ 0x20] : 2 * BYTE_RANK[b];
        if (r < best) {
            next = best, *second = *first;
            best = r, *first = i;
        } else if (r < next) {
            next = r, *second = i;
        }
    }
    if (m > 1 && *second == *first) *second = *first == 0 ? 1 : 0;
}

/* Whether the m bytes at s are the needle (folded: in either ASCII case; `nd_low` is then the
 * needle in lower case). */
static inline int same(const uint8_t *s, const uint8_t *nd, const uint8_t *nd_low, Py_ssize_t m, int fold) {
    if (!fold) return memcmp(s, nd, (size_t)m) == 0;
    for (Py_ssize_t i = 0; i < m; i++)
        if (lower(s[i]) != nd_low[i]) return 0;
    return 1;
}

/* The first place at or after h + start where the needle is, or -1.
 *
 * 32 places (AVX2) or 16 (SSE2, which every x86-64 has) are tried at once on two of the needle's
 * bytes, its two rarest at their own offsets (the "generic SIMD" substring search of Wojciech
 * Muła): a place is compared whole only when both bytes are there. One rare byte alone, the scan
 * before this one, stopped every few bytes on a folded letter (`b` or `B`: both count) and lost
 * most of its time to those stops; two bytes at a fixed distance agree by chance a few times per
 * kilobyte. Folding ORs 0x20 into a byte compared with a lower-case letter: only that letter's
 * two cases give it. Over 219 MB of source files (site-packages), page cache warm: 14-19 GB/s
 * exactly or folded, where the one-byte scan gave 4-15 GB/s exactly (glibc's memchr on a rare
 * byte) and 3.5-12 folded. */
#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_AVX2_PATH 1
/* Whether this CPU (and the OS's saving of its registers) has AVX2: set once when the module is
 * imported, read by `find_from` with the GIL released. */
static int have_avx2 = 0;
/* The loop of `find_from` 32 places at a time, on a CPU with AVX2 (most x86-64 since 2013; the
 * SSE2 loop is the baseline every x86-64 has and runs the rest). From *at; returns the first
 * match, or -1 with *at moved to the first place it did not try. */
__attribute__((target("avx2"))) static Py_ssize_t find_avx2(const uint8_t *h, Py_ssize_t n, const uint8_t *nd,
                                                             const uint8_t *nd_low, Py_ssize_t m, int fold, Py_ssize_t a,
                                                             Py_ssize_t b, uint8_t ca, uint8_t cb, uint8_t ma,
                                                             uint8_t mb, Py_ssize_t *at) {
    const __m256i want_a = _mm256_set1_epi8((char)ca), want_b = _mm256_set1_epi8((char)cb);
    const __m256i or_a = _mm256_set1_epi8((char)ma), or_b = _mm256_set1_epi8((char)mb);
    Py_ssize_t s = *at;
    for (; s + 31 + m <= n; s += 32) {
        __m256i at_a = _mm256_or_si256(_mm256_loadu_si256((const __m256i *)(h + s + a)), or_a);
        __m256i at_b = _mm256_or_si256(_mm256_loadu_si256((const __m256i *)(h + s + b)), or_b);
        unsigned mask =
            (unsigned)_mm256_movemask_epi8(_mm256_and_si256(_mm256_cmpeq_epi8(at_a, want_a), _mm256_cmpeq_epi8(at_b, want_b)));
        while (mask) {
            Py_ssize_t place = s + __builtin_ctz(mask);
            if (same(h + place, nd, nd_low, m, fold)) return place;
            mask &= mask - 1;
        }
    }
    *at = s;
    return -1;
}
#endif

static Py_ssize_t find_from(const uint8_t *h, Py_ssize_t n, const uint8_t *nd, const uint8_t *nd_low, Py_ssize_t m,
                            int fold, Py_ssize_t start) {
    Py_ssize_t a, b;
    rare_pair(nd, m, fold, &a, &b);
    const uint8_t ca = fold ? nd_low[a] : nd[a], cb = fold ? nd_low[b] : nd[b];
    const uint8_t ma = fold && is_letter(nd[a]) ? 0x20 : 0, mb = fold && is_letter(nd[b]) ? 0x20 : 0;
    Py_ssize_t s = start;
    if (m == 1 && !fold) {
        const uint8_t *q = memchr(h + s, nd[0], (size_t)(n - s));
        return q ? q - h : -1;
    }
#if defined(HAVE_AVX2_PATH)
    if (have_avx2) {
        Py_ssize_t found = find_avx2(h, n, nd, nd_low, m, fold, a, b, ca, cb, ma, mb, &s);
        if (found >= 0) return found;
    }
#endif
#if defined(__SSE2__)
    const __m128i want_a = _mm_set1_epi8((char)ca), want_b = _mm_set1_epi8((char)cb);
    const __m128i or_a = _mm_set1_epi8((char)ma), or_b = _mm_set1_epi8((char)mb);
    for (; s + 15 + m <= n; s += 16) {
        __m128i at_a = _mm_or_si128(_mm_loadu_si128((const __m128i *)(h + s + a)), or_a);
        __m128i at_b = _mm_or_si128(_mm_loadu_si128((const __m128i *)(h + s + b)), or_b);
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(at_a, want_a), _mm_cmpeq_epi8(at_b, want_b)));
        while (mask) {
            Py_ssize_t at = s + __builtin_ctz(mask);
            if (same(h + at, nd, nd_low, m, fold)) return at;
            mask &= mask - 1;
        }
    }
#endif
    for (; s + m <= n; s++)
        if ((uint8_t)(h[s + a] | ma) == ca && (uint8_t)(h[s + b] | mb) == cb && same(h + s, nd, nd_low, m, fold)) return s;
    return -1;
}

static PyObject *find(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer hay, needle;
    int fold;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "y*y*pn", &hay, &needle, &fold, &start)) return NULL;
    const uint8_t *h = (const uint8_t *)hay.buf, *nd = (const uint8_t *)needle.buf;
    const Py_ssize_t n = hay.len, m = needle.len;
    Py_ssize_t found = -1;
    if (start < 0) start = 0;
    if (m == 0) found = start <= n ? start : -1;
    else if (m <= n && start <= n - m) { /* (start + m could overflow) */
        uint8_t small[64], *nd_low = m <= 64 ? small : PyMem_Malloc((size_t)m);
        if (!nd_low) {
            PyBuffer_Release(&needle);
            PyBuffer_Release(&hay);
            return PyErr_NoMemory();
        }
        for (Py_ssize_t i = 0; i < m; i++) nd_low[i] = lower(nd[i]);
        Py_BEGIN_ALLOW_THREADS
        found = find_from(h, n, nd, nd_low, m, fold, start);
        Py_END_ALLOW_THREADS
        if (nd_low != small) PyMem_Free(nd_low);
    }
    PyBuffer_Release(&needle);
    PyBuffer_Release(&hay);
    return PyLong_FromSsize_t(found);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Distinct trigram ids and line starts of a file's bytes, in one pass."},
    {"count_folded", count_folded, METH_VARARGS, "Distinct ASCII-folded ids among distinct trigram ids."},
    {"invert", invert, METH_VARARGS, "Posting lists of a shard, as roaring bitmaps in portable format."},
    {"find", find, METH_VARARGS, "Offset of the first match of a literal at or after start (-1: none)."},
    {"slots", slots, METH_VARARGS, "Where trigrams are in a shard's dictionary, and their posting list sizes."},
    {"quad_filter", quad_filter, METH_VARARGS, "Set the bits of a document's folded quadgrams in its filter."},
    {"quad_select", quad_select, METH_VARARGS, "The documents whose filters may hold every given quadgram."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "The index build's hot loops in C.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels(void) {
    for (int b = 0; b < 256; b++) FOLD[b] = (uint8_t)fold_byte((uint8_t)b);
#if defined(HAVE_AVX2_PATH)
    __builtin_cpu_init();
    have_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
    return PyModule_Create(&module);
}
