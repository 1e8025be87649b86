#include "tests/support/gpu_test.h"

#include <stdio.h>

#ifdef GR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

int gr_test_have_gpu(const char *name)
{
#ifdef GR_HAVE_CUDA
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err == cudaSuccess && n > 0)
        return 1;
    printf("SKIP %s: no CUDA device (%s)\n", name,
           err != cudaSuccess ? cudaGetErrorName(err) : "0 devices");
#else
    printf("SKIP %s: graphrun was built without CUDA\n", name);
#endif
    return 0;
}

int gr_test_run_in_process(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed;
}

int gr_test_run_loop(const char *name, const TTest *test, int start, int end, int timeout_s)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout_s);
    tcase_add_loop_test(tc, test, start, end);
    suite_add_tcase(s, tc);
    return gr_test_run_in_process(s);
}

gr_model *gr_test_load_model(const char *builtin, const char *cfg_path, uint64_t seed)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = builtin;
    mo.cfg_path = cfg_path;
    if (seed)
        mo.seed = seed;
    gr_model *m = NULL;
    ck_assert_msg(gr_model_load(&mo, &m) == GR_OK, "%s: %s", builtin ? builtin : cfg_path,
                  gr_last_error());
    return m;
}
