/* The GPU suites' main() in common: the skip when no GPU is visible, and running a Check suite in
 * the test's own process (a CUDA context does not survive fork(), Check's default). */
#ifndef GR_TESTS_SUPPORT_GPU_TEST_H
#define GR_TESTS_SUPPORT_GPU_TEST_H

#include <check.h>

/* 1 when a CUDA device is visible. Else prints the one line CTest shows for a skipped test,
 * "SKIP <name>: no CUDA device (<why>)", and returns 0: the caller exits 77. */
int gr_test_have_gpu(const char *name);

/* Run every test of `s` in this process (CK_NOFORK), free the runner, return the failures. */
int gr_test_run_in_process(Suite *s);

#endif
