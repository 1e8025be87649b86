/* GPU engine: detection decoding on other threads while the engine runs, as `graphrun --input
 * DIR` does it (runtime/files.c, gr_pool_detect_files).
 *   - gr_engine_detect (the raw-head decoders) equals, bit for bit, the arithmetic it replaced:
 *     the region/yolo reference activation of the whole head, then the activated-head decoder,
 *     on real int8 / fp16 GPU outputs (YOLOv2-tiny VOC: one region head; YOLOv3-tiny: two yolo
 *     heads) at thresh 0, 0.005 and 0.5;
 *   - gr_engine_detect_outputs, called from two threads per run on the output pointers kept after
 *     that run's gr_engine_wait, while the main thread keeps submitting and waiting on the
 *     engine's other slots (3 in flight), returns exactly what gr_engine_detect returned for the
 *     same input in a serial run. A slot whose outputs another slot's run overwrote, or a decoder
 *     reading state a run changes, gives other detections.
 * Equality is exact: the same input through the same engine gives the same outputs (the
 * inflight suite checks that bit for bit), and decoding is deterministic CPU code.
 * Exits 77 (skipped) with one line when no CUDA device is visible. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "runtime/detect.h"
#include "runtime/engine_internal.h"
#include "tests/support/gpu_test.h"

enum { SLOTS = 3, RUNS = 9, BATCH = 2, THREADS = 2, MAX_OUT = 8 };

/* Thresholds per model: 0 and 0.005 keep nearly every box of YOLOv2-tiny VOC (845 boxes, 20
 * classes); on YOLOv3-tiny (2,535 boxes, 80 logistic classes) they keep ~10^5 per image, whose
 * class-wise NMS alone takes seconds on the CPU, so it is tested from 0.1 up (test_detect_raw
 * covers 0 and 0.005 on yolo heads). */
#define N_THRESH 3
static const float low_thresholds[N_THRESH] = {0.0f, 0.005f, 0.5f};
static const float high_thresholds[N_THRESH] = {0.1f, 0.25f, 0.5f};
static const float *thresholds = low_thresholds;

static char calib_dir[200];

static gr_model *load_model(const char *name)
{
    return gr_test_load_model(name, NULL, 0);
}

static gr_engine *build(const gr_model *m, const char *name, gr_precision prec)
{
    char calib_cache[320]; /* one per model: a cache names the model it was made for */
    snprintf(calib_cache, sizeof calib_cache, "%s/%s.calib", calib_dir, name);
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_GPU;
    eo.precision = prec;
    eo.batch = BATCH;
    eo.inflight = SLOTS;
    eo.calib_cache = calib_cache;
    gr_engine *e = NULL;
    ck_assert_msg(gr_engine_build(m, &eo, &e) == GR_OK, "build %s: %s", gr_precision_name(prec),
                  gr_last_error());
    return e;
}

/* Input of run r: a different pseudo-random picture each run. */
static void fill_input(uint8_t *buffer, size_t bytes, int run)
{
    for (size_t i = 0; i < bytes; i++)
        buffer[i] = (uint8_t)((i * 7919u + (size_t)run * 104729u) >> 3);
}

static void detect_options(gr_detect_options *opt, float thresh, int image)
{
    gr_detect_options_default(opt);
    opt->thresh = thresh;
    opt->image_w = 640 + 32 * image; /* different letterbox corrections per image */
    opt->image_h = 480;
}

/* The arithmetic gr_engine_detect ran before the raw-head decoders. */
static void detect_before(const gr_engine *e, int image, const gr_detect_options *opt,
                          gr_detection **dets, int *n)
{
    gr_head_output heads[MAX_OUT];
    float *act[MAX_OUT] = {0};
    int n_heads = 0;
    for (int i = 0; i < e->n_heads; i++) {
        int decoder = gr_net_head_decoder(e->net, i);
        ck_assert_int_ge(decoder, 0);
        const gr_layer *l = &e->net->layers[decoder];
        size_t elems = gr_shape_elems(l->out);
        const float *raw;
        ck_assert_int_eq(gr_engine_output(e, i, &raw), GR_OK);
        raw += (size_t)image * elems;
        act[i] = malloc(elems * sizeof(float));
        ck_assert_ptr_nonnull(act[i]);
        gr_shape s = l->out;
        gr_op_ref(&l->p, &l->w, &raw, &s, 1, act[i], l->out, 1);
        heads[n_heads++] = (gr_head_output){&l->p, act[i], l->out, 0};
    }
    ck_assert_int_eq(gr_detect_heads(heads, n_heads, e->net->w, e->net->h, opt, dets, n), GR_OK);
    for (int i = 0; i < n_heads; i++)
        free(act[i]);
}

typedef struct expected {
    gr_detection *dets;
    int n;
} expected;

static expected want[RUNS][BATCH][N_THRESH];

/* Serial runs on slot 0: what each (run, image, threshold) must decode to; checked against the
 * arithmetic before. */
static void serial(gr_engine *e, size_t in_bytes, const char *what)
{
    uint8_t *input = malloc(in_bytes);
    ck_assert_ptr_nonnull(input);
    int total = 0;
    for (int r = 0; r < RUNS; r++) {
        fill_input(input, in_bytes, r);
        ck_assert_msg(gr_engine_run_u8(e, input) == GR_OK, "%s", gr_last_error());
        for (int b = 0; b < BATCH; b++) {
            for (int t = 0; t < N_THRESH; t++) {
                gr_detect_options opt;
                detect_options(&opt, thresholds[t], b);
                expected *x = &want[r][b][t];
                ck_assert_int_eq(gr_engine_detect(e, b, &opt, &x->dets, &x->n), GR_OK);
                gr_detection *old = NULL;
                int n_old = -1;
                detect_before(e, b, &opt, &old, &n_old);
                ck_assert_msg(n_old == x->n && !memcmp(old, x->dets, (size_t)x->n * sizeof *old),
                              "%s run %d image %d thresh %g: %d detections, before %d", what, r,
                              b, (double)thresholds[t], x->n, n_old);
                gr_detections_free(old);
                total += x->n;
            }
        }
    }
    ck_assert_int_gt(total, 0); /* thresh 0 keeps boxes: the comparisons are not empty */
    printf("%s: raw-head decoding == reference activation + decode on %d runs x %d images x %d "
           "thresholds (%d detections)\n", what, RUNS, BATCH, N_THRESH, total);
    free(input);
}

typedef struct detect_job {
    const gr_engine *engine;
    const float *outputs[MAX_OUT];
    int run;
    atomic_int mismatches;
    pthread_t tid[THREADS];
    int started;
} detect_job;

static void *detect_thread(void *arg)
{
    detect_job *j = arg;
    for (int b = 0; b < BATCH; b++) {
        for (int t = 0; t < N_THRESH; t++) {
            gr_detect_options opt;
            detect_options(&opt, thresholds[t], b);
            gr_detection *d = NULL;
            int n = 0;
            const expected *x = &want[j->run][b][t];
            if (gr_engine_detect_outputs(j->engine, j->outputs, b, &opt, &d, &n) != GR_OK ||
                n != x->n || memcmp(d, x->dets, (size_t)n * sizeof *d) != 0)
                atomic_fetch_add(&j->mismatches, 1);
            gr_detections_free(d);
        }
    }
    return NULL;
}

static void join_job(detect_job *j, const char *what)
{
    for (int t = 0; t < j->started; t++)
        pthread_join(j->tid[t], NULL);
    int mismatches = atomic_load(&j->mismatches);
    ck_assert_msg(mismatches == 0, "%s: run %d decoded on other threads differs (%d)", what,
                  j->run, mismatches);
    j->started = 0;
}

/* Run r waits on slot r % SLOTS; its detections are decoded on THREADS threads while runs r+1
 * (in flight) and r+2 (submitted now, on the slot of run r-1, whose threads are joined first)
 * use the engine. */
static void threaded(gr_engine *e, const char *what)
{
    detect_job jobs[SLOTS];
    memset(jobs, 0, sizeof jobs);
    int n_out = gr_engine_output_count(e);
    ck_assert_int_le(n_out, MAX_OUT);
    for (int r = 0; r < 2; r++) {
        void *buffer;
        size_t bytes;
        ck_assert_int_eq(gr_engine_slot_input(e, r, 1, &buffer, &bytes), GR_OK);
        fill_input(buffer, bytes, r);
        ck_assert_msg(gr_engine_submit(e, r) == GR_OK, "%s", gr_last_error());
    }
    for (int r = 0; r < RUNS; r++) {
        int slot = r % SLOTS;
        ck_assert_msg(gr_engine_wait(e, slot) == GR_OK, "%s", gr_last_error());
        detect_job *j = &jobs[slot];
        j->engine = e;
        j->run = r;
        atomic_store(&j->mismatches, 0);
        for (int k = 0; k < n_out; k++)
            ck_assert_int_eq(gr_engine_output(e, k, &j->outputs[k]), GR_OK);
        for (; j->started < THREADS; j->started++)
            ck_assert_int_eq(pthread_create(&j->tid[j->started], NULL, detect_thread, j), 0);
        int next = r + 2, next_slot = next % SLOTS;
        join_job(&jobs[next_slot], what); /* run r-1's readers, before its slot is reused */
        if (next < RUNS) {
            void *buffer;
            size_t bytes;
            ck_assert_int_eq(gr_engine_slot_input(e, next_slot, 1, &buffer, &bytes), GR_OK);
            fill_input(buffer, bytes, next);
            ck_assert_msg(gr_engine_submit(e, next_slot) == GR_OK, "%s", gr_last_error());
        }
    }
    for (int s = 0; s < SLOTS; s++)
        join_job(&jobs[s], what);
    printf("%s: %d runs, 3 in flight, decoded on %d threads each beside the runs: identical\n",
           what, RUNS, THREADS);
}

static const char *const models[] = {"yolo", "yolov3-tiny"};
static const gr_precision precisions[] = {GR_PREC_INT8, GR_PREC_FP16};

START_TEST(test_detect_beside_runs)
{
    const char *name = models[_i / 2];
    gr_precision prec = precisions[_i % 2];
    thresholds = _i / 2 == 0 ? low_thresholds : high_thresholds;
    char what[64];
    snprintf(what, sizeof what, "%s %s batch %d", name, gr_precision_name(prec), BATCH);
    gr_model *m = load_model(name);
    gr_engine *e = build(m, name, prec);
    void *buffer;
    size_t in_bytes;
    ck_assert_int_eq(gr_engine_slot_input(e, 0, 1, &buffer, &in_bytes), GR_OK);
    serial(e, in_bytes, what);
    threaded(e, what);
    for (int r = 0; r < RUNS; r++)
        for (int b = 0; b < BATCH; b++)
            for (int t = 0; t < N_THRESH; t++)
                gr_detections_free(want[r][b][t].dets);
    memset(want, 0, sizeof want);
    gr_engine_destroy(e);
    gr_model_destroy(m);
}
END_TEST

int main(void)
{
    if (!gr_test_have_gpu("gpu_detect_threads"))
        return 77;
    snprintf(calib_dir, sizeof calib_dir, "/tmp/graphrun_gpu_detect_threads_XXXXXX");
    if (!mkdtemp(calib_dir)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("gpu_detect_threads");
    TCase *tc = tcase_create("detect");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_detect_beside_runs, 0, 4); /* 2 models x int8/fp16 */
    suite_add_tcase(s, tc);
    int failed = gr_test_run_in_process(s);
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char path[320];
        snprintf(path, sizeof path, "%s/%s.calib", calib_dir, models[i]);
        unlink(path);
    }
    rmdir(calib_dir);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
