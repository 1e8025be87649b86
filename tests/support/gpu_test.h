/* The GPU suites' main() in common: the skip when no GPU is visible, and running a Check suite in
 * the test's own process (a CUDA context does not survive fork(), Check's default). */
#ifndef GR_TESTS_SUPPORT_GPU_TEST_H
#define GR_TESTS_SUPPORT_GPU_TEST_H

#include <check.h>
#include <stdint.h>

#include "graphrun/runtime.h"

/* 1 when a CUDA device is visible. Else prints the one line CTest shows for a skipped test,
 * "SKIP <name>: no CUDA device (<why>)", and returns 0: the caller exits 77. */
int gr_test_have_gpu(const char *name);

/* Run every test of `s` in this process (CK_NOFORK), free the runner, return the failures. */
int gr_test_run_in_process(Suite *s);

/* A suite `name` of one test case running `test` for _i in [start, end), with a timeout of
 * timeout_s seconds, run in this process; returns the failures. */
int gr_test_run_loop(const char *name, const TTest *test, int start, int end, int timeout_s);

/* gr_model_load of the built-in model `builtin` or the cfg `cfg_path` (synthetic weights with
 * `seed`; 0 keeps gr_model_options' default), failing the test with the library's error. */
gr_model *gr_test_load_model(const char *builtin, const char *cfg_path, uint64_t seed);

#endif
