/* A reader of COCO's JSON files (tools/coco.h): recursive descent over the text, each member the
 * reader uses parsed into the structs, every other value checked and skipped.
 *
 * JSON as RFC 8259 has it: objects, arrays, strings (escapes, \u with surrogate pairs, no raw
 * control characters), numbers (no leading zeros, no NaN), true/false/null; nesting deeper than
 * MAX_DEPTH is refused (the files are 4 deep; a fuzzed file cannot blow the stack). */
#define _POSIX_C_SOURCE 200809L
#include "tools/coco.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

#define MAX_DEPTH 64
#define MAX_FILE_BYTES ((size_t)2 << 30) /* instances_train2017.json is 448 MB */

typedef struct reader {
    const char *s;
    size_t n, i;
    const char *file;
    int depth;
} reader;

static gr_status bad(const reader *r, size_t at, const char *what)
{
    return gr_fail(GR_ERR_PARSE, "%s: byte %zu: %s%s", r->file, at, what,
                   at >= r->n ? " (the file ends there)" : "");
}

static void skip_space(reader *r)
{
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' ||
                           r->s[r->i] == '\r'))
        r->i++;
}

/* The next character after white space, 0 at the end. */
static char peek(reader *r)
{
    skip_space(r);
    return r->i < r->n ? r->s[r->i] : '\0';
}

static gr_status expect(reader *r, char c, const char *what)
{
    if (peek(r) != c)
        return bad(r, r->i, what);
    r->i++;
    return GR_OK;
}

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return 0;
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return 1;
}

static size_t put_utf8(char *dst, unsigned cp)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xc0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xe0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        dst[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    dst[0] = (char)(0xf0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    dst[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* The escape at r->i (after the backslash) decoded into dst (NULL: checked only); its length. */
static gr_status escape(reader *r, char *dst, size_t *len)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    size_t at = r->i - 1;
    char c = r->i < r->n ? r->s[r->i] : '\0';
    const char *k = c ? strchr(from, c) : NULL;
    if (k) {
        if (dst)
            dst[0] = to[k - from];
        *len = 1;
        r->i++;
        return GR_OK;
    }
    unsigned cp, low;
    if (c != 'u' || r->n - r->i < 5 || !hex4(r->s + r->i + 1, &cp))
        return bad(r, at, "bad escape in a string");
    r->i += 5;
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return bad(r, at, "lone low surrogate in a string");
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (r->n - r->i < 6 || r->s[r->i] != '\\' || r->s[r->i + 1] != 'u' ||
            !hex4(r->s + r->i + 2, &low) || low < 0xdc00 || low > 0xdfff)
            return bad(r, at, "high surrogate without its low half in a string");
        r->i += 6;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    char buf[4];
    *len = put_utf8(dst ? dst : buf, cp);
    return GR_OK;
}

/* A string: decoded into a malloc'd *out, or only checked when out is NULL. */
static gr_status string(reader *r, char **out)
{
    GR_TRY(expect(r, '"', "expected a string"));
    size_t start = r->i, len = 0, piece = 0;
    /* Two passes: check and measure, then decode (escapes only shrink). */
    for (int pass = 0; pass < (out ? 2 : 1); pass++) {
        char *dst = pass ? *out : NULL;
        r->i = start;
        len = 0;
        for (;;) {
            if (r->i >= r->n)
                return bad(r, start - 1, "unterminated string");
            unsigned char c = (unsigned char)r->s[r->i++];
            if (c == '"')
                break;
            if (c < 0x20)
                return bad(r, r->i - 1, "control character in a string");
            if (c == '\\') {
                GR_TRY(escape(r, dst ? dst + len : NULL, &piece));
                len += piece;
            } else {
                if (dst)
                    dst[len] = (char)c;
                len++;
            }
        }
        if (out && !pass && !(*out = malloc(len + 1)))
            return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory for a string", r->file);
    }
    if (out)
        (*out)[len] = '\0';
    return GR_OK;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* A number as JSON spells it. */
static gr_status number(reader *r, double *out)
{
    skip_space(r);
    size_t start = r->i, i = r->i;
    const char *s = r->s;
    if (i < r->n && s[i] == '-')
        i++;
    if (i < r->n && s[i] == '0')
        i++;
    else if (i < r->n && is_digit(s[i]))
        while (i < r->n && is_digit(s[i]))
            i++;
    else
        return bad(r, start, "expected a number");
    if (i < r->n && s[i] == '.') {
        if (++i >= r->n || !is_digit(s[i]))
            return bad(r, start, "malformed number");
        while (i < r->n && is_digit(s[i]))
            i++;
    }
    if (i < r->n && (s[i] == 'e' || s[i] == 'E')) {
        if (++i < r->n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= r->n || !is_digit(s[i]))
            return bad(r, start, "malformed number");
        while (i < r->n && is_digit(s[i]))
            i++;
    }
    char buf[64];
    if (i - start >= sizeof buf)
        return bad(r, start, "number longer than 63 characters");
    memcpy(buf, s + start, i - start);
    buf[i - start] = '\0';
    double v = strtod(buf, NULL);
    if (!isfinite(v))
        return bad(r, start, "number out of range");
    *out = v;
    r->i = i;
    return GR_OK;
}

static gr_status skip_value(reader *r);

/* Members of an object: fn(r, key, user) consumes each value. */
typedef gr_status (*member_fn)(reader *r, const char *key, void *user);
/* Elements of an array: fn(r, index, user) consumes each. */
typedef gr_status (*element_fn)(reader *r, long long index, void *user);

static gr_status object(reader *r, member_fn fn, void *user)
{
    if (++r->depth > MAX_DEPTH)
        return bad(r, r->i, "nested deeper than 64 levels");
    GR_TRY(expect(r, '{', "expected an object"));
    if (peek(r) == '}') {
        r->i++;
        r->depth--;
        return GR_OK;
    }
    for (;;) {
        char *key = NULL;
        GR_TRY(string(r, &key));
        gr_status st = expect(r, ':', "expected ':' after a key");
        if (st == GR_OK)
            st = fn(r, key, user);
        free(key);
        GR_TRY(st);
        char c = peek(r);
        r->i++;
        if (c == '}')
            break;
        if (c != ',')
            return bad(r, r->i - 1, "expected ',' or '}' in an object");
    }
    r->depth--;
    return GR_OK;
}

static gr_status array(reader *r, element_fn fn, void *user)
{
    if (++r->depth > MAX_DEPTH)
        return bad(r, r->i, "nested deeper than 64 levels");
    GR_TRY(expect(r, '[', "expected an array"));
    if (peek(r) == ']') {
        r->i++;
        r->depth--;
        return GR_OK;
    }
    for (long long k = 0;; k++) {
        GR_TRY(fn(r, k, user));
        char c = peek(r);
        r->i++;
        if (c == ']')
            break;
        if (c != ',')
            return bad(r, r->i - 1, "expected ',' or ']' in an array");
    }
    r->depth--;
    return GR_OK;
}

static gr_status skip_member(reader *r, const char *key, void *user)
{
    (void)key;
    (void)user;
    return skip_value(r);
}

static gr_status skip_element(reader *r, long long index, void *user)
{
    (void)index;
    (void)user;
    return skip_value(r);
}

static gr_status skip_value(reader *r)
{
    char c = peek(r);
    double v;
    switch (c) {
    case '{': return object(r, skip_member, NULL);
    case '[': return array(r, skip_element, NULL);
    case '"': return string(r, NULL);
    case 't':
    case 'f':
    case 'n': {
        const char *word = c == 't' ? "true" : c == 'f' ? "false" : "null";
        size_t len = strlen(word);
        if (r->n - r->i < len || memcmp(r->s + r->i, word, len) != 0)
            return bad(r, r->i, "expected a value");
        r->i += len;
        return GR_OK;
    }
    default: return number(r, &v);
    }
}

/* ---- COCO's objects ----------------------------------------------------------------------- */

/* An integer-valued number within [lo, hi]. */
static gr_status integer(reader *r, double lo, double hi, const char *what, long long *out)
{
    size_t at = (skip_space(r), r->i);
    double v;
    GR_TRY(number(r, &v));
    if (v != floor(v) || v < lo || v > hi)
        return gr_fail(GR_ERR_PARSE, "%s: byte %zu: %s %g is not an integer in [%.0f, %.0f]",
                       r->file, at, what, v, lo, hi);
    *out = (long long)v;
    return GR_OK;
}

typedef struct bbox_fill {
    double *v;
    int n;
} bbox_fill;

static gr_status bbox_element(reader *r, long long index, void *user)
{
    bbox_fill *b = user;
    size_t at = (skip_space(r), r->i);
    double v;
    GR_TRY(number(r, &v));
    if (index >= 4)
        return bad(r, at, "bbox has more than 4 numbers");
    if (index >= 2 && v < 0)
        return bad(r, at, "bbox has a negative width or height");
    b->v[index] = v;
    b->n = (int)index + 1;
    return GR_OK;
}

enum { HAS_IMAGE_ID = 1, HAS_CATEGORY = 2, HAS_BBOX = 4, HAS_SCORE = 8, HAS_ID = 16,
       HAS_FILE_NAME = 32, HAS_NAME = 64 };

typedef struct item {
    unsigned seen;
    gr_coco_box box;
    gr_coco_image image;
    gr_coco_category category;
} item;

static gr_status item_member(reader *r, const char *key, void *user)
{
    item *it = user;
    long long v;
    if (!strcmp(key, "image_id")) {
        GR_TRY(integer(r, 0, 9e15, "image_id", &it->box.image_id));
        it->seen |= HAS_IMAGE_ID;
    } else if (!strcmp(key, "category_id")) {
        GR_TRY(integer(r, 0, INT32_MAX, "category_id", &v));
        it->box.category_id = (int)v;
        it->seen |= HAS_CATEGORY;
    } else if (!strcmp(key, "iscrowd")) {
        GR_TRY(integer(r, 0, 1, "iscrowd", &v));
        it->box.iscrowd = (int)v;
    } else if (!strcmp(key, "area")) {
        size_t at = (skip_space(r), r->i);
        GR_TRY(number(r, &it->box.area));
        if (it->box.area < 0)
            return bad(r, at, "negative area");
        it->box.has_area = 1;
    } else if (!strcmp(key, "score")) {
        GR_TRY(number(r, &it->box.score));
        it->seen |= HAS_SCORE;
    } else if (!strcmp(key, "bbox")) {
        bbox_fill b = {it->box.bbox, 0};
        size_t at = (skip_space(r), r->i);
        GR_TRY(array(r, bbox_element, &b));
        if (b.n != 4)
            return bad(r, at, "bbox is not [x, y, width, height]");
        it->seen |= HAS_BBOX;
    } else if (!strcmp(key, "id")) {
        GR_TRY(integer(r, 0, 9e15, "id", &it->image.id));
        it->category.id = (int)(it->image.id > INT32_MAX ? -1 : it->image.id);
        it->seen |= HAS_ID;
    } else if (!strcmp(key, "file_name") && !(it->seen & HAS_FILE_NAME)) {
        GR_TRY(string(r, &it->image.file_name));
        it->seen |= HAS_FILE_NAME;
    } else if (!strcmp(key, "name") && !(it->seen & HAS_NAME)) {
        GR_TRY(string(r, &it->category.name));
        it->seen |= HAS_NAME;
    } else if (!strcmp(key, "width") || !strcmp(key, "height")) {
        GR_TRY(integer(r, 0, 1e9, key, &v));
        *(key[0] == 'w' ? &it->image.width : &it->image.height) = (int)v;
    } else {
        return skip_value(r);
    }
    return GR_OK;
}

/* A growing array of `size`-byte elements. */
static gr_status grow(const reader *r, void **data, long long n, long long *cap, size_t size)
{
    if (n < *cap)
        return GR_OK;
    long long next = *cap ? 2 * *cap : 64;
    void *p = realloc(*data, (size_t)next * size);
    if (!p)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory for %lld entries", r->file, next);
    *data = p;
    *cap = next;
    return GR_OK;
}

typedef struct lists {
    gr_coco *c;
    long long cap_images, cap_boxes, cap_categories, n_images, n_categories;
    int results; /* the boxes are results: score required, iscrowd meaningless */
} lists;

static const char *missing(unsigned seen, unsigned need)
{
    unsigned lack = need & ~seen;
    return lack & HAS_ID          ? "\"id\""
           : lack & HAS_FILE_NAME ? "\"file_name\""
           : lack & HAS_NAME      ? "\"name\""
           : lack & HAS_IMAGE_ID  ? "\"image_id\""
           : lack & HAS_CATEGORY  ? "\"category_id\""
           : lack & HAS_BBOX      ? "\"bbox\""
                                  : "\"score\"";
}

/* One element of images[], annotations[] (or a results array) or categories[]: which is in
 * `need`. */
static gr_status read_item(reader *r, lists *l, unsigned need)
{
    size_t at = (skip_space(r), r->i);
    item it = {0};
    gr_status st = object(r, item_member, &it);
    if (st == GR_OK && (it.seen & need) != need) {
        char what[96];
        snprintf(what, sizeof what, "%s without %s", need & HAS_FILE_NAME ? "image"
                                                    : need & HAS_NAME   ? "category"
                                                    : l->results        ? "result"
                                                                        : "annotation",
                 missing(it.seen, need));
        st = bad(r, at, what);
    }
    /* The item keeps the one string its kind has; a member of another kind's name (a "name"
     * in an image) is read, then freed here. */
    gr_coco *c = l->c;
    if (st == GR_OK && (need & HAS_FILE_NAME)) {
        st = grow(r, (void **)&c->images, l->n_images, &l->cap_images, sizeof *c->images);
        if (st == GR_OK) {
            c->images[l->n_images++] = it.image;
            c->n_images = (int)l->n_images;
            it.image.file_name = NULL;
        }
    } else if (st == GR_OK && (need & HAS_NAME)) {
        st = grow(r, (void **)&c->categories, l->n_categories, &l->cap_categories,
                  sizeof *c->categories);
        if (st == GR_OK) {
            c->categories[l->n_categories++] = it.category;
            c->n_categories = (int)l->n_categories;
            it.category.name = NULL;
        }
    } else if (st == GR_OK) {
        st = grow(r, (void **)&c->boxes, c->n_boxes, &l->cap_boxes, sizeof *c->boxes);
        if (st == GR_OK)
            c->boxes[c->n_boxes++] = it.box;
    }
    free(it.image.file_name);
    free(it.category.name);
    return st;
}

static gr_status image_element(reader *r, long long index, void *user)
{
    (void)index;
    return read_item(r, user, HAS_ID | HAS_FILE_NAME);
}

static gr_status category_element(reader *r, long long index, void *user)
{
    (void)index;
    return read_item(r, user, HAS_ID | HAS_NAME);
}

static gr_status box_element(reader *r, long long index, void *user)
{
    (void)index;
    lists *l = user;
    return read_item(r, l, HAS_IMAGE_ID | HAS_CATEGORY | HAS_BBOX | (l->results ? HAS_SCORE : 0));
}

static gr_status top_member(reader *r, const char *key, void *user)
{
    if (!strcmp(key, "images"))
        return array(r, image_element, user);
    if (!strcmp(key, "annotations"))
        return array(r, box_element, user);
    if (!strcmp(key, "categories"))
        return array(r, category_element, user);
    return skip_value(r);
}

/* The text parsed by fn and nothing after it. */
static gr_status parse_json(const char *text, size_t len, const char *name,
                            gr_status (*fn)(reader *, lists *), lists *l)
{
    reader r = {.s = text, .n = len, .file = name};
    gr_status st = fn(&r, l);
    if (st == GR_OK && peek(&r) != '\0')
        st = bad(&r, r.i, "text after the JSON value");
    if (st != GR_OK)
        gr_coco_free(l->c);
    return st;
}

static gr_status parse_instances(reader *r, lists *l)
{
    return object(r, top_member, l);
}

static gr_status parse_results(reader *r, lists *l)
{
    return array(r, box_element, l);
}

static int by_id(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The first id that comes twice among n, or -1 (sorted copies: a train file has 118k images). */
static gr_status duplicate_id(const char *path, long long *ids, long long n, const char *what)
{
    if (n > 1)
        qsort(ids, (size_t)n, sizeof *ids, by_id);
    for (long long i = 1; i < n; i++)
        if (ids[i] == ids[i - 1])
            return gr_fail(GR_ERR_PARSE, "%s: two %s have the id %lld", path, what, ids[i]);
    return GR_OK;
}

/* Image and category ids unique. */
static gr_status check_instances(const char *path, const gr_coco *c)
{
    long long n = c->n_images > c->n_categories ? c->n_images : c->n_categories;
    long long *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory checking ids", path);
    for (int i = 0; i < c->n_images; i++)
        ids[i] = c->images[i].id;
    gr_status st = duplicate_id(path, ids, c->n_images, "images");
    for (int i = 0; i < c->n_categories; i++)
        ids[i] = c->categories[i].id;
    if (st == GR_OK)
        st = duplicate_id(path, ids, c->n_categories, "categories");
    free(ids);
    return st;
}

gr_status gr_coco_parse(const char *text, size_t len, const char *name, int results,
                        gr_coco *out)
{
    memset(out, 0, sizeof *out);
    lists l = {.c = out, .results = results};
    if (results)
        return parse_json(text, len, name, parse_results, &l);
    GR_TRY(parse_json(text, len, name, parse_instances, &l));
    gr_status st = check_instances(name, out);
    if (st == GR_OK && out->n_images == 0)
        st = gr_fail(GR_ERR_PARSE, "%s: no \"images\" (a COCO instances file lists them)", name);
    if (st == GR_OK && out->n_categories == 0)
        st = gr_fail(GR_ERR_PARSE, "%s: no \"categories\" (a COCO instances file lists them)",
                     name);
    if (st != GR_OK)
        gr_coco_free(out);
    return st;
}

static gr_status read_file(const char *path, int results, gr_coco *out)
{
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t len = 0;
    GR_TRY(gr_read_file(path, MAX_FILE_BYTES, "COCO JSON file", &text, &len));
    gr_status st = gr_coco_parse(text, len, path, results, out);
    free(text);
    return st;
}

gr_status gr_coco_read_instances(const char *path, gr_coco *out)
{
    return read_file(path, 0, out);
}

gr_status gr_coco_read_results(const char *path, gr_coco *out)
{
    return read_file(path, 1, out);
}

void gr_coco_free(gr_coco *c)
{
    for (int i = 0; i < c->n_images; i++)
        free(c->images[i].file_name);
    for (int i = 0; i < c->n_categories; i++)
        free(c->categories[i].name);
    free(c->images);
    free(c->boxes);
    free(c->categories);
    memset(c, 0, sizeof *c);
}
