/* Saved engines: the build a start skips against the load that replaces it (runtime.h, "saved
 * engines"), for YOLOv2-tiny VOC (the built-in yolo, synthetic weights seed 1) at int8 and fp16,
 * batch 1 and 64, with the tactic search on (the default). Per configuration: build time (with
 * its calibration and tactic search), file size, load time from the file and from memory, and a
 * check that the loaded engine's outputs equal the built engine's bit for bit (exit 1 if not).
 * Targets (H100): a load within 10% of the build it replaces, and int8 batch 1 within 100 ms.
 *
 *   ./build-gpu/10_engine_file [--device gpu|cpu] [--loads N] [--model NAME] [--prec P]
 *
 * --device cpu measures the CPU engines of the small built-in shapes model instead (no GPU needed;
 * batch 1 and 4), or of --model NAME (--device cpu --model yolo --prec fp16: the host side of a
 * YOLOv2-tiny load - file, checksum, network, plan - without a GPU; its output check runs the CPU
 * emulation, seconds per run); --prec P measures that precision only; --loads N takes the median
 * of N loads (default 5). Exits 77 with one line when the GPU is asked for and none is visible. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "graphrun/runtime.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int fail(const char *what)
{
    fprintf(stderr, "10_engine_file: %s: %s\n", what, gr_last_error());
    return 1;
}

/* For a load, what came before and after the engine's creation: mapping the file, its checksum
 * and parsing the network (wall_ms: the whole call). */
static double file_phase(const gr_engine *e, double wall_ms)
{
    gr_build_times t;
    return gr_engine_build_times(e, &t) == GR_OK ? wall_ms - t.total_ms : 0.0;
}

/* Where an engine's creation went (gr_build_times); file_ms: file_phase's, the median of the
 * loads for a load. */
static void print_phases(const char *what, const gr_engine *e, double file_ms)
{
    gr_build_times t;
    if (gr_engine_build_times(e, &t) != GR_OK)
        return;
    double parts = t.resolve_ms + t.plan_ms + t.weights_ms + t.tactic_ms + t.micro_batch_ms +
                   t.capture_ms;
    printf("      %-5s: file %6.1f  resolve %6.1f  plan %6.1f  weights %6.1f  tactics %6.1f  "
           "micro-batch %6.1f  capture %6.1f  other %6.1f ms\n",
           what, file_ms, t.resolve_ms, t.plan_ms, t.weights_ms, t.tactic_ms,
           t.micro_batch_ms, t.capture_ms, t.total_ms - parts);
}

/* Run both on the same non-zero input; 0 when every output is bit-identical. */
static int same_outputs(gr_engine *a, gr_engine *b)
{
    gr_engine *both[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        void *buf;
        size_t bytes;
        if (gr_engine_input_buffer(both[k], 1, &buf, &bytes) != GR_OK)
            return fail("input buffer");
        for (size_t i = 0; i < bytes; i++)
            ((unsigned char *)buf)[i] = (unsigned char)((i * 7919u) >> 3);
        if (gr_engine_run(both[k]) != GR_OK)
            return fail("run");
    }
    for (int h = 0; h < gr_engine_output_count(a); h++) {
        gr_tensor_desc d;
        const float *x, *y;
        gr_engine_output_desc(a, h, &d);
        gr_engine_output(a, h, &x);
        gr_engine_output(b, h, &y);
        if (memcmp(x, y, (size_t)d.n * d.c * d.h * d.w * sizeof *x) != 0) {
            fprintf(stderr, "10_engine_file: output %d of the loaded engine differs\n", h);
            return 1;
        }
    }
    return 0;
}

typedef struct config {
    gr_precision prec;
    int batch;
} config;

static int measure(const gr_model *model, gr_device device, config c, int loads, int *verdict)
{
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = device;
    eo.precision = c.prec;
    eo.batch = c.batch;
    gr_engine *built = NULL;
    double t0 = now_ms();
    if (gr_engine_build(model, &eo, &built) != GR_OK)
        return fail("build");
    double build_ms = now_ms() - t0;
    char path[64];
    snprintf(path, sizeof path, "/tmp/10_engine_file_%d.grengine", (int)getpid());
    void *data = NULL;
    size_t bytes = 0;
    if (gr_engine_save(built, path) != GR_OK || gr_engine_save_to_memory(built, &data, &bytes))
        return fail("save");
    double file_ms[16], mem_ms[16], phase_ms[16];
    gr_engine *loaded = NULL;
    for (int i = 0; i < loads; i++) {
        gr_engine_destroy(loaded);
        t0 = now_ms();
        if (gr_engine_load(path, NULL, &loaded) != GR_OK)
            return fail("load");
        file_ms[i] = now_ms() - t0;
        phase_ms[i] = file_phase(loaded, file_ms[i]);
        gr_engine *from_memory = NULL;
        t0 = now_ms();
        if (gr_engine_load_from_memory(data, bytes, NULL, &from_memory) != GR_OK)
            return fail("load from memory");
        mem_ms[i] = now_ms() - t0;
        gr_engine_destroy(from_memory);
    }
    unlink(path);
    gr_free(data);
    qsort(file_ms, (size_t)loads, sizeof file_ms[0], cmp_double);
    qsort(mem_ms, (size_t)loads, sizeof mem_ms[0], cmp_double);
    qsort(phase_ms, (size_t)loads, sizeof phase_ms[0], cmp_double);
    double load = file_ms[loads / 2];
    int ok = load <= 0.1 * build_ms && (c.prec != GR_PREC_INT8 || c.batch != 1 || load <= 100.0);
    printf("%-5s batch %-3d build %9.1f ms  file %6.1f MB  load %7.1f ms (memory %7.1f ms)  "
           "load/build %5.1f%%  %s\n", gr_precision_name(c.prec), c.batch, build_ms,
           (double)bytes / 1e6, load, mem_ms[loads / 2], 100.0 * load / build_ms,
           ok ? "meets target" : "MISSES target");
    *verdict &= ok;
    print_phases("build", built, file_phase(built, build_ms));
    print_phases("load", loaded, phase_ms[loads / 2]);
    int rc = same_outputs(built, loaded);
    gr_engine_destroy(built);
    gr_engine_destroy(loaded);
    return rc;
}

int main(int argc, char **argv)
{
    gr_device device = GR_DEVICE_GPU;
    int loads = 5;
    const char *model_name = NULL, *prec_name = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            device = !strcmp(argv[++i], "cpu") ? GR_DEVICE_CPU : GR_DEVICE_GPU;
        } else if (!strcmp(argv[i], "--loads") && i + 1 < argc) {
            loads = atoi(argv[++i]);
            loads = loads < 1 ? 1 : loads > 16 ? 16 : loads;
        } else if (!strcmp(argv[i], "--model") && i + 1 < argc) {
            model_name = argv[++i];
        } else if (!strcmp(argv[i], "--prec") && i + 1 < argc) {
            prec_name = argv[++i];
        } else {
            fprintf(stderr, "usage: 10_engine_file [--device gpu|cpu] [--loads N] [--model NAME] "
                            "[--prec int8|fp16]\n");
            return 2;
        }
    }
    if (device == GR_DEVICE_GPU && gr_cuda_device_count() == 0) {
        printf("10_engine_file: no CUDA device visible (--device cpu measures the CPU engines)\n");
        return 77;
    }
    gr_model_options mo;
    gr_model_options_default(&mo);
    if (model_name)
        mo.builtin = model_name;
    else if (device == GR_DEVICE_CPU)
        mo.builtin = "shapes";
    gr_model *model = NULL;
    if (gr_model_load(&mo, &model) != GR_OK)
        return fail("model");
    int big = device == GR_DEVICE_GPU ? 64 : 4;
    const config configs[] = {{GR_PREC_INT8, 1}, {GR_PREC_INT8, big}, {GR_PREC_FP16, 1},
                              {GR_PREC_FP16, big}};
    int rc = 0, verdict = 1;
    for (size_t k = 0; k < sizeof configs / sizeof configs[0] && rc == 0; k++)
        if (!prec_name || !strcmp(prec_name, gr_precision_name(configs[k].prec)))
            rc = measure(model, device, configs[k], loads, &verdict);
    gr_model_destroy(model);
    if (rc == 0)
        printf("targets (load <= 10%% of build; int8 batch 1 <= 100 ms): %s\n",
               verdict ? "met" : "NOT met");
    return rc;
}
