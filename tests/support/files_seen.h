/* What gr_pool_detect_files gave, file by file, for the suites that compare two runs of it
 * (tests/test_failover.c, tests/test_gpu_pool.c: a run with a failed device against one
 * without). */
#ifndef GR_TESTS_SUPPORT_FILES_SEEN_H
#define GR_TESTS_SUPPORT_FILES_SEEN_H

#include "graphrun/runtime.h"

enum { GR_SEEN_FILES = 64, GR_SEEN_DETS = 100, GR_SEEN_LINE = 8192 };

typedef struct gr_seen {
    const char *const *paths; /* the paths given */
    int calls;
    int index[GR_SEEN_FILES];
    gr_file_failure failure[GR_SEEN_FILES];
    gr_status status[GR_SEEN_FILES];
    char error[GR_SEEN_FILES][512];
    int n_dets[GR_SEEN_FILES];
    gr_detection dets[GR_SEEN_FILES][GR_SEEN_DETS];
    char line[GR_SEEN_FILES][GR_SEEN_LINE]; /* gr_file_result.jsonl, "" without one */
    gr_files_stats st;
    gr_status returned; /* gr_pool_detect_files' */
} gr_seen;

/* gr_pool_detect_files(pool, paths, n, opt) with every result kept (failing the test on one
 * out of place: a path not paths[index], more than GR_SEEN_FILES, a line too long); the caller
 * frees it. */
gr_seen *gr_seen_run(gr_pool *pool, const char *const *paths, int n, const gr_files_options *opt);

/* File k's result in a and b is the same: failure, message, detections bit for bit, line. */
void gr_seen_assert_same(const gr_seen *a, const gr_seen *b, int k);

#endif
