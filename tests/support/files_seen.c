#include "tests/support/files_seen.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int keep(void *user, const gr_file_result *r)
{
    gr_seen *s = user;
    ck_assert_int_lt(s->calls, GR_SEEN_FILES);
    int k = s->calls++;
    s->index[k] = r->index;
    s->failure[k] = r->failure;
    s->status[k] = r->status;
    snprintf(s->error[k], sizeof s->error[k], "%s", r->error ? r->error : "");
    ck_assert_int_le(r->n_detections, GR_SEEN_DETS);
    s->n_dets[k] = r->n_detections;
    if (r->n_detections)
        memcpy(s->dets[k], r->detections, (size_t)r->n_detections * sizeof *r->detections);
    if (r->jsonl) {
        ck_assert_uint_lt(r->jsonl_len, GR_SEEN_LINE);
        memcpy(s->line[k], r->jsonl, r->jsonl_len + 1);
    }
    ck_assert_str_eq(r->path, s->paths[r->index]);
    return 0;
}

gr_seen *gr_seen_run(gr_pool *pool, const char *const *paths, int n, const gr_files_options *opt)
{
    gr_seen *s = calloc(1, sizeof *s);
    ck_assert_ptr_nonnull(s);
    s->paths = paths;
    s->st.struct_size = sizeof s->st;
    s->returned = gr_pool_detect_files(pool, paths, n, opt, keep, s, &s->st);
    return s;
}

void gr_seen_assert_same(const gr_seen *a, const gr_seen *b, int k)
{
    ck_assert_int_eq(a->failure[k], b->failure[k]);
    ck_assert_str_eq(a->error[k], b->error[k]);
    ck_assert_int_eq(a->n_dets[k], b->n_dets[k]);
    ck_assert_msg(memcmp(a->dets[k], b->dets[k], (size_t)a->n_dets[k] * sizeof(gr_detection)) == 0,
                  "%s: detections differ", a->paths[k]);
    ck_assert_str_eq(a->line[k], b->line[k]); /* byte-equal */
}
