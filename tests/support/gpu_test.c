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
