/* Planner test networks: random cfg generator and reduced-size built-in models. The generator
 * tracks shapes with Darknet's rules only to choose legal layers; the real parser infers them. */
#include "tests/support/plan_nets.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/embedded.h"

#define MAX_RANDOM_LAYERS 24

typedef struct cfg_writer {
    char *buf;
    size_t len, used;
    int overflow;
} cfg_writer;

static void emit(cfg_writer *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(w->buf + w->used, w->len - w->used, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= w->len - w->used) {
        w->overflow = 1;
        return;
    }
    w->used += (size_t)n;
}

static int pick(gr_rng *r, int n) { return (int)(gr_rng_u64(r) % (uint64_t)n); }

typedef struct shape3 {
    int c, h, w;
    int routable; /* not a head conv / decoder */
} shape3;

size_t gr_test_random_cfg(uint64_t seed, char *buf, size_t len)
{
    static const int filters[] = {3, 4, 8, 12, 16, 20, 24, 32};
    static const char *const acts[] = {"leaky", "linear", "relu", "logistic"};
    gr_rng r;
    gr_rng_seed(&r, seed * 7919u + 13u);
    cfg_writer w = {buf, len, 0, 0};
    int side_h = 4 + 2 * pick(&r, 6), side_w = 4 + 2 * pick(&r, 6);
    emit(&w, "[net]\nwidth=%d\nheight=%d\nchannels=3\n", side_w, side_h);
    shape3 s[MAX_RANDOM_LAYERS];
    int n = 0;
    int target = 3 + pick(&r, 12);
    int force_route = 0;
    shape3 cur = {3, side_h, side_w, 1};
    while (n < target && n + 2 < MAX_RANDOM_LAYERS) {
        int choice = force_route ? 2 : pick(&r, 100);
        force_route = 0;
        if (n == 0 && (choice >= 40 && choice < 70))
            choice = 0; /* route/shortcut need earlier layers */
        if (choice < 40) {
            int f = filters[pick(&r, 8)], k = pick(&r, 3) ? 3 : 1;
            int stride = (pick(&r, 5) == 0 && cur.h >= 4 && cur.w >= 4) ? 2 : 1;
            int bn = pick(&r, 10) < 7;
            emit(&w, "\n[convolutional]\n%sfilters=%d\nsize=%d\nstride=%d\npad=1\nactivation=%s\n",
                 bn ? "batch_normalize=1\n" : "", f, k, stride, acts[pick(&r, 4)]);
            int p = k / 2;
            cur.c = f;
            cur.h = (cur.h + 2 * p - k) / stride + 1;
            cur.w = (cur.w + 2 * p - k) / stride + 1;
        } else if (choice < 52) {
            int stride = (pick(&r, 2) && cur.h >= 2 && cur.w >= 2) ? 2 : 1;
            emit(&w, "\n[maxpool]\nsize=2\nstride=%d\n", stride);
            cur.h = (cur.h + 1 - 2) / stride + 1;
            cur.w = (cur.w + 1 - 2) / stride + 1;
        } else if (choice < 62) {
            /* Route: 1..3 earlier routable layers sharing one spatial size. */
            int anchor = -1;
            for (int tries = 0; tries < 8 && anchor < 0; tries++) {
                int j = pick(&r, n);
                if (s[j].routable)
                    anchor = j;
            }
            if (anchor < 0)
                continue;
            int members[3] = {anchor, -1, -1}, m = 1;
            int want = 1 + pick(&r, 3);
            for (int j = n - 1; j >= 0 && m < want; j--)
                if (j != anchor && s[j].routable && s[j].h == s[anchor].h &&
                    s[j].w == s[anchor].w && pick(&r, 2))
                    members[m++] = j;
            emit(&w, "\n[route]\nlayers=");
            cur.c = 0;
            for (int k = 0; k < m; k++) {
                emit(&w, "%s%d", k ? "," : "", members[k]);
                cur.c += s[members[k]].c;
            }
            emit(&w, "\n");
            cur.h = s[anchor].h;
            cur.w = s[anchor].w;
        } else if (choice < 70) {
            /* Shortcut from an earlier layer of the same spatial size (channels may differ). */
            int from = -1;
            for (int j = n - 2; j >= 0 && from < 0; j--)
                if (s[j].routable && s[j].h == cur.h && s[j].w == cur.w && pick(&r, 2))
                    from = j;
            if (from < 0 || !s[n - 1].routable)
                continue;
            emit(&w, "\n[shortcut]\nfrom=%d\nactivation=%s\n", from,
                 pick(&r, 2) ? "leaky" : "linear");
        } else if (choice < 78) {
            if (cur.h > 12 || cur.w > 12)
                continue;
            emit(&w, "\n[upsample]\nstride=2\n");
            cur.h *= 2;
            cur.w *= 2;
        } else if (choice < 84) {
            if (cur.h % 2 || cur.w % 2 || cur.c % 4 || cur.h < 2)
                continue;
            emit(&w, "\n[reorg]\nstride=2\n");
            cur.c *= 4;
            cur.h /= 2;
            cur.w /= 2;
        } else {
            /* A detection head: 1x1 linear conv + [yolo], then continue from a route. */
            emit(&w, "\n[convolutional]\nfilters=6\nsize=1\nstride=1\npad=1\nactivation=linear\n");
            cur.c = 6;
            cur.routable = 0;
            s[n++] = cur;
            emit(&w, "\n[yolo]\nmask=0\nanchors=10,14\nclasses=1\nnum=1\n");
            s[n++] = cur;
            cur.routable = 1;
            force_route = 1;
            continue;
        }
        s[n++] = cur;
    }
    if (force_route) {
        /* The net ends with a head: fine, its decoder is the last layer. */
    }
    return w.overflow ? 0 : w.used;
}

gr_status gr_test_random_net(uint64_t seed, gr_net **out)
{
    char cfg[8192];
    size_t len = gr_test_random_cfg(seed, cfg, sizeof cfg);
    if (len == 0)
        return gr_fail(GR_ERR_LIMIT, "random cfg %llu does not fit", (unsigned long long)seed);
    char name[32];
    snprintf(name, sizeof name, "random-%llu.cfg", (unsigned long long)seed);
    gr_status st = gr_net_parse(cfg, len, name, out);
    if (st != GR_OK)
        return st;
    st = gr_net_synthesize_weights(*out, seed);
    if (st != GR_OK) {
        gr_net_free(*out);
        *out = NULL;
    }
    return st;
}

static gr_status parse_with_side(const char *text, size_t len, const char *name, int side,
                                 gr_net **out)
{
    /* Replace the width= and height= values of [net]. */
    size_t cap = len + 64;
    char *copy = gr_malloc(cap, "cfg copy");
    if (!copy)
        return GR_ERR_OUT_OF_MEMORY;
    size_t used = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        size_t line_len = eol ? (size_t)(eol - p) + 1 : (size_t)(end - p);
        if (side > 0 && (strncmp(p, "width=", 6) == 0 || strncmp(p, "height=", 7) == 0)) {
            used += (size_t)snprintf(copy + used, cap - used, "%s=%d\n",
                                     p[0] == 'w' ? "width" : "height", side);
        } else {
            memcpy(copy + used, p, line_len);
            used += line_len;
        }
        p += line_len;
    }
    gr_status st = gr_net_parse(copy, used, name, out);
    free(copy);
    if (st == GR_OK) {
        st = gr_net_synthesize_weights(*out, 1);
        if (st != GR_OK) {
            gr_net_free(*out);
            *out = NULL;
        }
    }
    return st;
}

gr_status gr_test_builtin_at(const char *cfg_name, int side, gr_net **out)
{
    const gr_embedded_file *f = gr_embedded_find(cfg_name);
    if (!f)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "no embedded file %s", cfg_name);
    return parse_with_side(f->data, f->size, cfg_name, side, out);
}

static gr_status cfg_net(const char *path, gr_net **out)
{
    gr_status st = gr_net_parse_file(path, out);
    if (st == GR_OK) {
        st = gr_net_synthesize_weights(*out, 1);
        if (st != GR_OK) {
            gr_net_free(*out);
            *out = NULL;
        }
    }
    return st;
}

gr_status gr_test_route_reorg_net(gr_net **out) { return cfg_net("tests/data/route_reorg.cfg", out); }

gr_status gr_test_concat_head_net(gr_net **out) { return cfg_net("tests/data/concat_head.cfg", out); }
