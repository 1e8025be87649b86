/* Check suite for the folder pipeline (runtime.h, "image files to detections":
 * gr_pool_detect_files; runtime/files.c) on the CPU engine of the built-in shapes model: results
 * come in input order, each file's detections equal a plain engine's for that image, whatever the
 * batch, threads or slots; a file that cannot be read or decoded gets its message and the rest go
 * on; NaN outputs are counted, not detected; the callback stops the run and leaves the engine
 * usable; prepare runs for every image before its callback; the stats and the started hook; bad
 * arguments; with opt->jsonl each result's line is what the CLI writes for that image (its
 * tools/results.c, --format jsonl: normal, error and non-finite records, and the text spelled out
 * here), with the caller's class names when given. The GPU-only paths run here on stand-ins put in
 * a CPU engine's backend table: a JPEG decoder (the hand-off: which files go to it, those it
 * leaves decoded on the CPU, its failure failing one batch) and a failing submit. gr_pool_wrap and
 * gr_pool_detect_source (files.h) too. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, mkfifo, symlink */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "runtime/engine_internal.h"
#include "runtime/files.h"
#include "runtime/image/image.h"
#include "tools/results.h"

enum { MAX_FILES = 32, MAX_DETS = 64, MAX_LINE = 16384 };

/* ---- the folder --------------------------------------------------------------------------- */

static char folder[64];
static char paths[MAX_FILES][256];
static const char *path_list[MAX_FILES];
static int n_paths;
/* Which of them cannot be read or decoded, and the words their message holds. */
static const char *bad_words[MAX_FILES];

static void add_path(const char *name, const char *bad)
{
    snprintf(paths[n_paths], sizeof paths[n_paths], "%s/%s", folder, name);
    path_list[n_paths] = paths[n_paths];
    bad_words[n_paths] = bad;
    n_paths++;
}

static void copy_file(const char *from, const char *name, size_t keep)
{
    FILE *in = fopen(from, "rb");
    ck_assert_ptr_nonnull(in);
    char to[256];
    snprintf(to, sizeof to, "%s/%s", folder, name);
    FILE *out = fopen(to, "wb");
    ck_assert_ptr_nonnull(out);
    char buf[4096];
    size_t n, total = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0 && (!keep || total < keep)) {
        size_t take = keep && total + n > keep ? keep - total : n;
        fwrite(buf, 1, take, out);
        total += take;
    }
    fclose(in);
    fclose(out);
}

/* dog.jpg again, written by TurboJPEG at `subsamp` (greyscale: TJSAMP_GRAY), maybe progressive:
 * JPEGs the GPU decoder does not take. */
static void write_jpeg(const char *name, int subsamp, int flags)
{
    gr_image *im = NULL;
    ck_assert_int_eq(gr_image_load("data/dog.jpg", &im), GR_OK);
    tjhandle tj = tjInitCompress();
    unsigned char *jpeg = NULL;
    unsigned long len = 0;
    ck_assert_int_eq(tjCompress2(tj, im->data, im->w, 0, im->h, TJPF_RGB, &jpeg, &len, subsamp,
                                 subsamp == TJSAMP_GRAY ? 80 : 90, flags), 0);
    char to[256];
    snprintf(to, sizeof to, "%s/%s", folder, name);
    FILE *out = fopen(to, "wb");
    ck_assert_ptr_nonnull(out);
    fwrite(jpeg, 1, len, out);
    fclose(out);
    tjFree(jpeg);
    tjDestroy(tj);
    gr_image_destroy(im);
}

/* Photos, PNGs, a progressive and a greyscale JPEG, and files that fail: a JPEG cut short,
 * garbage named .png, a missing file, a directory and a FIFO named .jpg. Not sorted: the
 * pipeline keeps the order it is given. */
static void make_folder(void)
{
    snprintf(folder, sizeof folder, "/tmp/gr_test_files_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(folder));
    n_paths = 0;
    const char *photos[] = {"dog.jpg", "person.jpg", "horses.jpg", "eagle.jpg", "giraffe.jpg"};
    for (int k = 0; k < 5; k++) {
        char from[64];
        snprintf(from, sizeof from, "data/%s", photos[k]);
        copy_file(from, photos[k], 0);
    }
    copy_file("data/shapes-val/000.png", "s0.png", 0);
    copy_file("data/shapes-val/001.png", "s1.png", 0);
    copy_file("data/dog.jpg", "cut.jpg", 20000);
    char name[256];
    snprintf(name, sizeof name, "%s/garbage.png", folder);
    FILE *garbage = fopen(name, "wb");
    ck_assert_ptr_nonnull(garbage);
    for (int i = 0; i < 3000; i++)
        fputc((i * 7919) >> 3 & 0xff, garbage);
    fclose(garbage);
    snprintf(name, sizeof name, "%s/dir.jpg", folder);
    ck_assert_int_eq(mkdir(name, 0700), 0);
    snprintf(name, sizeof name, "%s/fifo.jpg", folder);
    ck_assert_int_eq(mkfifo(name, 0600), 0);
    write_jpeg("progressive.jpg", TJSAMP_420, TJFLAG_PROGRESSIVE);
    write_jpeg("grey.jpg", TJSAMP_GRAY, 0);
    add_path("giraffe.jpg", NULL);
    add_path("s0.png", NULL);
    add_path("cut.jpg", "cut.jpg: ");
    add_path("dog.jpg", NULL);
    add_path("missing.jpg", "missing.jpg: cannot open image file");
    add_path("progressive.jpg", NULL);
    add_path("person.jpg", NULL);
    add_path("dir.jpg", "dir.jpg: not a regular file (a directory)");
    add_path("grey.jpg", NULL);
    add_path("horses.jpg", NULL);
    add_path("garbage.png", "garbage.png: ");
    add_path("eagle.jpg", NULL);
    add_path("fifo.jpg", "fifo.jpg: not a regular file (a FIFO)");
    add_path("s1.png", NULL);
}

static void remove_folder(void)
{
    const char *names[] = {"giraffe.jpg", "s0.png", "cut.jpg", "dog.jpg", "progressive.jpg",
                           "person.jpg", "grey.jpg", "horses.jpg", "garbage.png", "eagle.jpg",
                           "fifo.jpg", "s1.png"};
    char name[256];
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        snprintf(name, sizeof name, "%s/%s", folder, names[k]);
        unlink(name);
    }
    snprintf(name, sizeof name, "%s/dir.jpg", folder);
    rmdir(name);
    rmdir(folder);
}

/* ---- engines and what a run gave ---------------------------------------------------------- */

static gr_model *model;
static gr_engine_options cpu_options;
/* The engine most tests run (batch 2, 3 slots) and a pool of it alone. */
static gr_engine *shared_engine;
static gr_pool *shared_pool;

static gr_engine *engine_of(const gr_model *m, int batch, int inflight)
{
    gr_engine_options opt = cpu_options;
    opt.batch = batch;
    opt.inflight = inflight;
    gr_engine *built = NULL;
    ck_assert_msg(gr_engine_build(m, &opt, &built) == GR_OK, "%s", gr_last_error());
    return built;
}

static gr_engine *cpu_engine(int batch, int inflight) { return engine_of(model, batch, inflight); }

static gr_pool *pool_of(gr_engine *one)
{
    gr_pool *wrapped = NULL;
    ck_assert_msg(gr_pool_wrap(&one, 1, &wrapped) == GR_OK, "%s", gr_last_error());
    return wrapped;
}

/* A built-in model, or a cfg with its weights. */
static gr_model *load_model(const char *builtin, const char *cfg, const char *weights)
{
    gr_model *loaded = NULL;
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = builtin;
    mo.cfg_path = cfg;
    mo.weights_path = weights;
    ck_assert_msg(gr_model_load(&mo, &loaded) == GR_OK, "%s", gr_last_error());
    return loaded;
}

static void setup(void)
{
    model = load_model("shapes", NULL, NULL);
    gr_engine_options_default(&cpu_options);
    cpu_options.device = GR_DEVICE_CPU;
    make_folder();
    shared_engine = engine_of(model, 2, 3);
    shared_pool = pool_of(shared_engine);
}

static void teardown(void)
{
    gr_pool_destroy(shared_pool);
    gr_engine_destroy(shared_engine);
    gr_model_destroy(model);
    model = NULL;
    remove_folder();
}

/* A CPU engine of model m (batch, slots) and a pool of it alone (the engine stays the test's). */
typedef struct seen {
    const char *const *list; /* the paths given */
    int calls, stop_at;
    int index[MAX_FILES];
    gr_file_failure failure[MAX_FILES];
    gr_status status[MAX_FILES];
    char error[MAX_FILES][512];
    int width[MAX_FILES], height[MAX_FILES];
    int n_dets[MAX_FILES];
    gr_detection dets[MAX_FILES][MAX_DETS];
    int prepared[MAX_FILES];   /* prepare's calls per index (atomic: any thread) */
    int prepared_first[MAX_FILES]; /* prepare came before cb */
    int started, started_before_results;
    gr_files_stats at_start;
    int batch_ends;
    size_t nonfinite[MAX_FILES];
    char line[MAX_FILES][MAX_LINE]; /* gr_file_result.jsonl ("" without one) */
} seen;

static int keep_result(void *user, const gr_file_result *r)
{
    seen *s = user;
    ck_assert_int_lt(s->calls, MAX_FILES);
    int k = s->calls++;
    s->index[k] = r->index;
    s->failure[k] = r->failure;
    s->status[k] = r->status;
    snprintf(s->error[k], sizeof s->error[k], "%s", r->error ? r->error : "");
    s->width[k] = r->width;
    s->height[k] = r->height;
    ck_assert_int_le(r->n_detections, MAX_DETS);
    s->n_dets[k] = r->n_detections;
    if (r->n_detections)
        memcpy(s->dets[k], r->detections, (size_t)r->n_detections * sizeof *r->detections);
    s->prepared_first[k] = __atomic_load_n(&s->prepared[r->index], __ATOMIC_SEQ_CST) == 1;
    s->nonfinite[k] = r->nonfinite;
    if (r->jsonl) { /* NUL-terminated past its length, which ends with the newline */
        ck_assert_int_lt(r->jsonl_len, MAX_LINE);
        ck_assert_uint_eq(strlen(r->jsonl), r->jsonl_len);
        ck_assert_int_eq(r->jsonl[r->jsonl_len - 1], '\n');
        memcpy(s->line[k], r->jsonl, r->jsonl_len + 1);
    } else {
        ck_assert_uint_eq(r->jsonl_len, 0);
    }
    ck_assert_str_eq(r->path, s->list[r->index]);
    s->batch_ends += r->batch_end;
    return s->stop_at >= 0 && s->calls > s->stop_at;
}

static void count_prepare(void *user, const gr_file_result *r)
{
    seen *s = user;
    __atomic_add_fetch(&s->prepared[r->index], 1, __ATOMIC_SEQ_CST);
}

static void note_start(void *user, const gr_files_stats *st)
{
    seen *s = user;
    s->started++;
    s->started_before_results = s->calls == 0;
    s->at_start = *st;
}

static seen *new_seen(const char *const *list)
{
    seen *s = calloc(1, sizeof *s);
    ck_assert_ptr_nonnull(s);
    s->list = list;
    s->stop_at = -1;
    return s;
}

static seen *run_list(gr_pool *on, const char *const *list, int n, const gr_files_options *opt,
                      gr_files_stats *stats)
{
    seen *s = new_seen(list);
    gr_status st = gr_pool_detect_files(on, list, n, opt, keep_result, s, stats);
    ck_assert_msg(st == GR_OK, "%s", gr_last_error());
    return s;
}

static seen *run_files(gr_pool *on, const gr_files_options *opt, gr_files_stats *stats)
{
    return run_list(on, path_list, n_paths, opt, stats);
}

static seen *run_engine(gr_engine *one, const gr_files_options *opt)
{
    gr_pool *wrapped = pool_of(one);
    seen *s = run_files(wrapped, opt, NULL);
    gr_pool_destroy(wrapped);
    return s;
}

/* Two runs' results are the same, field for field (detections bit for bit). */
static void assert_same(const seen *a, const seen *b)
{
    ck_assert_int_eq(a->calls, b->calls);
    for (int k = 0; k < a->calls; k++) {
        ck_assert_int_eq(a->index[k], b->index[k]);
        ck_assert_int_eq(a->failure[k], b->failure[k]);
        ck_assert_str_eq(a->error[k], b->error[k]);
        ck_assert_int_eq(a->width[k], b->width[k]);
        ck_assert_int_eq(a->n_dets[k], b->n_dets[k]);
        ck_assert_msg(memcmp(a->dets[k], b->dets[k], (size_t)a->n_dets[k] * sizeof(gr_detection))
                          == 0, "%s: detections differ", a->list[a->index[k]]);
    }
}

/* What a plain engine detects on one image (gr_engine_set_image, gr_engine_run). */
static int plain_detect(gr_engine *plain, const char *path, gr_detection *out, int *w, int *h)
{
    gr_image *im = NULL;
    ck_assert_msg(gr_image_load(path, &im) == GR_OK, "%s", gr_last_error());
    ck_assert_int_eq(gr_engine_set_image(plain, 0, 0, im), GR_OK);
    ck_assert_int_eq(gr_engine_run(plain), GR_OK);
    gr_detect_options d;
    gr_detect_options_default(&d);
    d.image_w = *w = im->w;
    d.image_h = *h = im->h;
    gr_detection *dets = NULL;
    int n = 0;
    ck_assert_int_eq(gr_engine_detect(plain, 0, &d, &dets, &n), GR_OK);
    ck_assert_int_le(n, MAX_DETS);
    memcpy(out, dets, (size_t)n * sizeof *dets);
    gr_detections_free(dets);
    gr_image_destroy(im);
    return n;
}

/* ---- JSON Lines: the CLI's record of an image ---------------------------------------------- */

/* What the CLI writes for an image (tools/results.c, --format jsonl, class names from m): into
 * out (MAX_LINE bytes). */
static void cli_line(const gr_model *m, const gr_result_image *im, const gr_detection *dets, int n,
                     char *out)
{
    gr_results_options ro = {.format = GR_FORMAT_JSONL, .dest = "/dev/null", .model = m};
    gr_results *writer = NULL;
    ck_assert_int_eq(gr_results_open(&ro, &writer), 0);
    char *text = NULL, err[512];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(gr_results_format(writer, im, dets, n, f, err, sizeof err), 0);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_lt(len, MAX_LINE);
    memcpy(out, text, len + 1);
    free(text);
    ck_assert_int_eq(gr_results_close(writer), 0);
}

/* Result k of s as the CLI's folder mode describes it to its writer (tools/cmd_stream.c). */
static gr_result_image seen_image(const seen *s, int k)
{
    return (gr_result_image){.path = s->list[s->index[k]], .index = s->index[k],
                             .width = s->width[k], .height = s->height[k], .frame = -1,
                             .error = s->failure[k] != GR_FILE_OK ? s->error[k] : NULL,
                             .nonfinite = s->nonfinite[k]};
}

/* Line k of s is the CLI's line for that image, byte for byte. */
static void assert_clis_line(const seen *s, int k, const gr_model *m)
{
    static char want[MAX_LINE];
    gr_result_image im = seen_image(s, k);
    cli_line(m, &im, s->dets[k], s->n_dets[k], want);
    ck_assert_str_eq(s->line[k], want);
}

/* The detection's object as the CLI's JSON Lines spell it (README, "Result formats"). */
static void spell_detection(const gr_detection *d, const char *name, char *out, size_t size)
{
    snprintf(out, size, "{\"class\": \"%s\", \"class_id\": %d, \"prob\": %.6f, \"objectness\": "
             "%.6f, \"left\": %.1f, \"top\": %.1f, \"right\": %.1f, \"bottom\": %.1f}", name,
             d->class_id, (double)d->prob, (double)d->objectness, (double)d->left,
             (double)d->top, (double)d->right, (double)d->bottom);
}

/* Line k of s spelled out: an error record, or the image's size and every detection in order,
 * each named by names[class_id] (NULL: the model's name; outside n_names: "class N"). */
static void assert_spelled_out(const seen *s, int k, const char *const *names, int n_names)
{
    char want[MAX_LINE];
    const char *path = s->list[s->index[k]];
    if (s->failure[k] != GR_FILE_OK) {
        snprintf(want, sizeof want, "{\"input\": \"%s\", \"error\": \"%s\"}\n", path, s->error[k]);
        ck_assert_str_eq(s->line[k], want);
        return;
    }
    int at = snprintf(want, sizeof want, "{\"input\": \"%s\", \"width\": %d, \"height\": %d, "
                      "\"detections\": [", path, s->width[k], s->height[k]);
    for (int i = 0; i < s->n_dets[k]; i++) {
        const gr_detection *d = &s->dets[k][i];
        char fallback[32];
        snprintf(fallback, sizeof fallback, "class %d", d->class_id);
        const char *name = !names ? gr_model_class_name(model, d->class_id)
                           : d->class_id < n_names ? names[d->class_id]
                                                   : fallback;
        if (i)
            at += snprintf(want + at, sizeof want - (size_t)at, ", ");
        spell_detection(d, name, want + at, sizeof want - (size_t)at);
        at += (int)strlen(want + at);
    }
    snprintf(want + at, sizeof want - (size_t)at, "]}\n");
    ck_assert_str_eq(s->line[k], want);
}

/* ---- tests -------------------------------------------------------------------------------- */


START_TEST(results_in_order_each_as_a_plain_engine)
{
    gr_engine *plain = cpu_engine(1, 1);
    gr_engine *batch_three = cpu_engine(3, 3);
    seen *s = run_engine(batch_three, NULL);
    ck_assert_int_eq(s->calls, n_paths);
    int detections = 0;
    for (int k = 0; k < n_paths; k++) {
        ck_assert_int_eq(s->index[k], k);
        if (bad_words[k]) {
            ck_assert_int_eq(s->failure[k], GR_FILE_FAILED_READ);
            ck_assert_int_ne(s->status[k], GR_OK);
            ck_assert_msg(strstr(s->error[k], bad_words[k]) != NULL, "'%s' not in '%s'",
                          bad_words[k], s->error[k]);
            ck_assert_ptr_null(strchr(s->error[k], '\n'));
            ck_assert_int_eq(s->n_dets[k], 0);
            continue;
        }
        ck_assert_msg(s->failure[k] == GR_FILE_OK, "%s: %s", path_list[k], s->error[k]);
        gr_detection want[MAX_DETS];
        int w, h, n = plain_detect(plain, path_list[k], want, &w, &h);
        ck_assert_int_eq(s->width[k], w);
        ck_assert_int_eq(s->height[k], h);
        ck_assert_int_eq(s->n_dets[k], n);
        ck_assert_msg(memcmp(s->dets[k], want, (size_t)n * sizeof *want) == 0, "%s",
                      path_list[k]);
        detections += n;
    }
    ck_assert_msg(detections > 0, "no detections: nothing compared");
    ck_assert_int_eq(s->batch_ends, (n_paths + 2) / 3);
    free(s);
    gr_engine_destroy(batch_three);
    gr_engine_destroy(plain);
}
END_TEST

START_TEST(threads_batches_and_slots_change_nothing)
{
    seen *want = run_files(shared_pool, NULL, NULL);
    gr_files_options opt;
    gr_files_options_default(&opt);
    opt.threads = 1;
    seen *one_thread = run_files(shared_pool, &opt, NULL);
    assert_same(want, one_thread);
    opt.threads = 5;
    seen *five = run_files(shared_pool, &opt, NULL);
    assert_same(want, five);
    gr_engine *single_slot = cpu_engine(2, 1);
    seen *single = run_engine(single_slot, NULL);
    assert_same(want, single);
    gr_engine *batch_five = cpu_engine(5, 2);
    seen *five_per_batch = run_engine(batch_five, NULL);
    assert_same(want, five_per_batch);
    free(want);
    free(one_thread);
    free(five);
    free(single);
    free(five_per_batch);
    gr_engine_destroy(batch_five);
    gr_engine_destroy(single_slot);
}
END_TEST

START_TEST(the_callback_stops_the_run)
{
    seen *s = new_seen(path_list);
    s->stop_at = 2; /* non-zero from the third result on */
    ck_assert_int_eq(gr_pool_detect_files(shared_pool, path_list, n_paths, NULL, keep_result, s, NULL),
                     GR_OK);
    ck_assert_int_eq(s->calls, 3);
    /* Nothing is left in flight: the shared_pool runs again, and so does the shared_engine alone. */
    seen *again = run_files(shared_pool, NULL, NULL);
    ck_assert_int_eq(again->calls, n_paths);
    ck_assert_int_eq(gr_engine_run(shared_engine), GR_OK);
    free(s);
    free(again);
}
END_TEST

START_TEST(prepare_runs_for_every_image_before_its_callback)
{
    gr_files_options opt;
    gr_files_options_default(&opt);
    opt.prepare = count_prepare;
    opt.started = note_start;
    seen *s = run_files(shared_pool, &opt, NULL);
    ck_assert_int_eq(s->calls, n_paths);
    for (int k = 0; k < n_paths; k++) {
        ck_assert_int_eq(s->prepared[k], 1);
        ck_assert_msg(s->prepared_first[k], "%s: its callback came before its prepare",
                      path_list[k]);
    }
    ck_assert_int_eq(s->started, 1);
    ck_assert(s->started_before_results);
    free(s);
}
END_TEST

START_TEST(stats_and_the_started_hook)
{
    gr_files_options opt;
    gr_files_options_default(&opt);
    opt.started = note_start;
    opt.threads = 3;
    gr_files_stats st = {.struct_size = sizeof st};
    seen *s = new_seen(path_list);
    ck_assert_int_eq(gr_pool_detect_files(shared_pool, path_list, n_paths, &opt, keep_result, s, &st),
                     GR_OK);
    ck_assert_int_eq(s->at_start.images, n_paths);
    ck_assert_int_eq(s->at_start.batch, 2);
    ck_assert_int_eq(s->at_start.buffers, 3);
    ck_assert_int_eq(s->at_start.devices, 1);
    ck_assert_int_eq(s->at_start.threads, 3);
    ck_assert_int_eq(s->at_start.gpu_decode, 0);
    ck_assert_str_eq(s->at_start.decoder, "a CPU engine");
    ck_assert_int_eq(st.struct_size, sizeof st);
    ck_assert_int_eq(st.images, n_paths);
    ck_assert_int_eq(st.threads, 3);
    ck_assert_int_ge(st.cores, 1);
    ck_assert(st.elapsed_s > 0.0 && st.main_cpu_s > 0.0 && st.engine_s > 0.0);
    ck_assert(st.read_s > 0.0 && st.decode_s > 0.0 && st.letterbox_s > 0.0);
    ck_assert(st.latency_p50_s > 0.0 && st.latency_p99_s >= st.latency_p50_s);
    ck_assert_int_eq(st.gpu_decoded, 0);
    /* An older caller's smaller stats: nothing past its struct_size is written. */
    unsigned char small[sizeof(gr_files_stats)];
    memset(small, 0xa5, sizeof small);
    uint32_t size = (uint32_t)offsetof(gr_files_stats, batch);
    memcpy(small, &size, sizeof size);
    free(s);
    s = new_seen(path_list);
    ck_assert_int_eq(gr_pool_detect_files(shared_pool, path_list, n_paths, NULL, keep_result, s,
                                          (gr_files_stats *)small), GR_OK);
    ck_assert_int_eq(((gr_files_stats *)small)->images, n_paths);
    for (size_t i = size; i < sizeof small; i++)
        ck_assert_msg(small[i] == 0xa5, "byte %zu past struct_size written", i);
    free(s);
}
END_TEST

/* A batch whose every file failed is not run (a list of missing files costs no inference), and
 * each file still gets its error; a batch with one readable image among failures still runs. */
START_TEST(a_batch_of_failed_files_is_not_run)
{
    static char missing[8][256];
    const char *list[8];
    for (int i = 0; i < 8; i++) {
        snprintf(missing[i], sizeof missing[i], "%s/not-there-%d.jpg", folder, i);
        list[i] = missing[i];
    }
    gr_files_stats st = {.struct_size = sizeof st};
    seen *s = run_list(shared_pool, list, 8, NULL, &st);
    ck_assert_int_eq(s->calls, 8);
    for (int k = 0; k < 8; k++) {
        ck_assert_int_eq(s->index[k], k);
        ck_assert_int_eq(s->failure[k], GR_FILE_FAILED_READ);
        ck_assert_msg(strstr(s->error[k], "cannot open image file") != NULL, "%s", s->error[k]);
    }
    ck_assert_int_eq(s->batch_ends, 4);
    ck_assert_msg(st.engine_s == 0.0, "the engine ran for %g s on batches of missing files",
                  st.engine_s);
    free(s);
    /* The first readable image of the folder beside a missing one: its batch runs. */
    int good = 0;
    while (bad_words[good])
        good++;
    const char *mixed[2] = {missing[0], path_list[good]};
    s = run_list(shared_pool, mixed, 2, NULL, &st);
    ck_assert_int_eq(s->failure[0], GR_FILE_FAILED_READ);
    ck_assert_int_eq(s->failure[1], GR_FILE_OK);
    ck_assert(st.engine_s > 0.0);
    free(s);
}
END_TEST

/* Every image read gets its NaN count, no detection and no error. */
static size_t nonfinite_total;

static int count_nonfinite(void *user, const gr_file_result *r)
{
    seen *s = user;
    keep_result(s, r);
    if (bad_words[r->index])
        return 0;
    ck_assert_int_eq(r->failure, GR_FILE_OK);
    ck_assert_ptr_null(r->error);
    ck_assert_int_gt(r->nonfinite, 0);
    ck_assert_int_eq(r->n_detections, 0);
    nonfinite_total += r->nonfinite;
    return 0;
}

static int never(void *user, const gr_file_result *r)
{
    (void)user;
    (void)r;
    ck_abort_msg("no result expected");
    return 1;
}

static void expect_refused(gr_status st, gr_status want, const char *words)
{
    ck_assert_int_eq(st, want);
    ck_assert_msg(strstr(gr_last_error(), words) != NULL, "'%s' not in '%s'", words,
                  gr_last_error());
}

/* A tiny region network (tests/cli_folder.sh's) of `channels` input channels, as cfg. */
static void write_small_cfg(const char *cfg, int channels)
{
    FILE *f = fopen(cfg, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "[net]\nwidth=16\nheight=16\nchannels=%d\n[convolutional]\nbatch_normalize=1\n"
            "filters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n[maxpool]\nsize=2\n"
            "stride=2\n[convolutional]\nfilters=14\nsize=1\nstride=1\nactivation=linear\n"
            "[region]\nanchors=1.5,2.5,3,3\nclasses=2\ncoords=4\nnum=2\nsoftmax=1\n",
            channels);
    fclose(f);
}

START_TEST(bad_arguments_are_refused_before_any_image)
{
    expect_refused(gr_pool_detect_files(NULL, path_list, n_paths, NULL, never, NULL, NULL),
                   GR_ERR_INVALID_ARGUMENT, "NULL pool");
    expect_refused(gr_pool_detect_files(shared_pool, path_list, n_paths, NULL, NULL, NULL, NULL),
                   GR_ERR_INVALID_ARGUMENT, "NULL callback");
    expect_refused(gr_pool_detect_files(shared_pool, NULL, 3, NULL, never, NULL, NULL),
                   GR_ERR_INVALID_ARGUMENT, "NULL paths");
    expect_refused(gr_pool_detect_files(shared_pool, path_list, -1, NULL, never, NULL, NULL),
                   GR_ERR_INVALID_ARGUMENT, "-1 images");
    const char *with_null[] = {path_list[0], NULL};
    expect_refused(gr_pool_detect_files(shared_pool, with_null, 2, NULL, never, NULL, NULL),
                   GR_ERR_INVALID_ARGUMENT, "paths[1] is NULL");
    gr_files_options opt;
    memset(&opt, 0, sizeof opt);
    expect_refused(gr_pool_detect_files(shared_pool, path_list, n_paths, &opt, never, NULL, NULL),
                   GR_ERR_INVALID_ARGUMENT, "gr_files_options.struct_size is 0");
    gr_files_stats st;
    memset(&st, 0, sizeof st);
    expect_refused(gr_pool_detect_files(shared_pool, path_list, n_paths, NULL, never, NULL, &st),
                   GR_ERR_INVALID_ARGUMENT, "stats->struct_size");
    gr_files_options_default(&opt);
    opt.decode = GR_FILES_DECODE_GPU;
    expect_refused(gr_pool_detect_files(shared_pool, path_list, n_paths, &opt, never, NULL, NULL),
                   GR_ERR_UNSUPPORTED, "decode GPU: not with a CPU engine");
    expect_refused(gr_pool_open_jpeg_decoders(shared_pool), GR_ERR_UNSUPPORTED, "decodes no JPEG");
    ck_assert_int_eq(gr_pool_detect_files(shared_pool, path_list, 0, NULL, never, NULL, NULL), GR_OK);
    ck_assert_int_eq(gr_pool_detect_files(shared_pool, NULL, 0, NULL, never, NULL, NULL), GR_OK);
    /* A network that does not take RGB images: refused before any file. */
    char cfg[256];
    snprintf(cfg, sizeof cfg, "%s/grey.cfg", folder);
    write_small_cfg(cfg, 1);
    gr_model *grey = load_model(NULL, cfg, NULL);
    gr_engine *grey_engine = engine_of(grey, 2, 1);
    gr_pool *grey_pool = pool_of(grey_engine);
    expect_refused(gr_pool_detect_files(grey_pool, path_list, n_paths, NULL, never, NULL, NULL),
                   GR_ERR_INVALID_ARGUMENT, "the network takes 1 input channels");
    gr_pool_destroy(grey_pool);
    gr_engine_destroy(grey_engine);
    gr_model_destroy(grey);
    unlink(cfg);
}
END_TEST

START_TEST(wrapped_pools_borrow_their_engines)
{
    gr_engine *a = cpu_engine(2, 2), *b = cpu_engine(2, 2), *other = cpu_engine(3, 2);
    gr_pool *pool = NULL;
    expect_refused(gr_pool_wrap(NULL, 1, &pool), GR_ERR_INVALID_ARGUMENT, "gr_pool_wrap");
    gr_engine *twice[] = {a, a};
    expect_refused(gr_pool_wrap(twice, 2, &pool), GR_ERR_INVALID_ARGUMENT, "engine 1 is engine 0");
    gr_engine *unlike[] = {a, other};
    expect_refused(gr_pool_wrap(unlike, 2, &pool), GR_ERR_INVALID_ARGUMENT,
                   "engine 1's input differs");
    gr_engine *with_null[] = {a, NULL};
    expect_refused(gr_pool_wrap(with_null, 2, &pool), GR_ERR_INVALID_ARGUMENT, "engine 1 is NULL");
    ck_assert_ptr_null(pool);
    /* Two engines of one CPU: batches alternate between them, the results are one engine's. */
    seen *want = run_engine(a, NULL);
    gr_engine *both[] = {a, b};
    ck_assert_int_eq(gr_pool_wrap(both, 2, &pool), GR_OK);
    ck_assert_int_eq(gr_pool_devices(pool), 2);
    ck_assert_ptr_eq(gr_pool_engine(pool, 1), b);
    ck_assert_int_eq(gr_pool_device(pool, 0), -1);
    seen *got = run_files(pool, NULL, NULL);
    assert_same(want, got);
    gr_pool_destroy(pool);
    ck_assert_int_eq(gr_engine_run(a), GR_OK); /* still the caller's */
    ck_assert_int_eq(gr_engine_run(b), GR_OK);
    free(want);
    free(got);
    gr_engine_destroy(other);
    gr_engine_destroy(b);
    gr_engine_destroy(a);
}
END_TEST

/* The tiny network with NaN for every weight. */
START_TEST(nan_outputs_are_counted_not_detected)
{
    char cfg[256], weights[256];
    snprintf(cfg, sizeof cfg, "%s/small.cfg", folder);
    snprintf(weights, sizeof weights, "%s/nan.weights", folder);
    write_small_cfg(cfg, 3);
    FILE *f = fopen(weights, "wb");
    ck_assert_ptr_nonnull(f);
    const int32_t header[3] = {0, 2, 0};
    const uint64_t seen_images = 0;
    fwrite(header, sizeof header, 1, f);
    fwrite(&seen_images, sizeof seen_images, 1, f);
    for (int i = 0; i < 374; i++)
        fwrite(&(float){NAN}, sizeof(float), 1, f);
    fclose(f);
    gr_model *nan_model = load_model(NULL, cfg, weights);
    gr_engine *engine = engine_of(nan_model, 2, 1);
    gr_pool *pool = pool_of(engine);
    seen *s = new_seen(path_list);
    nonfinite_total = 0;
    gr_files_options opt;
    gr_files_options_default(&opt);
    opt.jsonl = 1;
    ck_assert_int_eq(gr_pool_detect_files(pool, path_list, n_paths, &opt, count_nonfinite, s,
                                          NULL), GR_OK);
    ck_assert_int_eq(s->calls, n_paths);
    ck_assert_int_gt(nonfinite_total, 0);
    /* Their lines: the CLI's non-finite record (and the unreadable files' error records). */
    for (int k = 0; k < n_paths; k++) {
        assert_clis_line(s, k, nan_model);
        if (bad_words[k])
            continue;
        char want[1024];
        snprintf(want, sizeof want, "{\"input\": \"%s\", \"width\": %d, \"height\": %d, "
                 "\"error\": \"its outputs hold %zu non-finite values (NaN/Inf): activations "
                 "overflow; use --prec fp32 or int8\", \"nonfinite\": %zu}\n", path_list[k],
                 s->width[k], s->height[k], s->nonfinite[k], s->nonfinite[k]);
        ck_assert_str_eq(s->line[k], want);
    }
    free(s);
    gr_pool_destroy(pool);
    gr_engine_destroy(engine);
    gr_model_destroy(nan_model);
    unlink(cfg);
    unlink(weights);
}
END_TEST

START_TEST(lines_are_the_clis_records)
{
    seen *plain = run_files(shared_pool, NULL, NULL);
    for (int k = 0; k < plain->calls; k++)
        ck_assert_str_eq(plain->line[k], ""); /* none unless asked for */
    gr_files_options opt;
    gr_files_options_default(&opt);
    opt.jsonl = 1;
    opt.threads = 3;
    seen *s = run_files(shared_pool, &opt, NULL);
    assert_same(plain, s);
    int errors = 0, detections = 0;
    for (int k = 0; k < s->calls; k++) {
        assert_clis_line(s, k, model);
        assert_spelled_out(s, k, NULL, 0);
        errors += s->failure[k] != GR_FILE_OK;
        detections += s->n_dets[k];
    }
    int bad_files = 0;
    for (int k = 0; k < n_paths; k++)
        bad_files += bad_words[k] != NULL;
    ck_assert_int_eq(errors, bad_files);
    ck_assert_int_gt(detections, 0);
    /* The caller's class names (the shapes model has 5): the rest read "class N". */
    const char *const names[] = {"first", "second \"quoted\""};
    opt.class_names = names;
    opt.n_class_names = 1;
    seen *renamed = run_files(shared_pool, &opt, NULL);
    int named = 0;
    for (int k = 0; k < renamed->calls; k++) {
        assert_spelled_out(renamed, k, names, 1);
        named += strstr(renamed->line[k], "\"class\": \"first\"") != NULL;
    }
    ck_assert_int_gt(named, 0);
    opt.n_class_names = 2; /* a name that needs escaping: JSON text, unlike the spelled-out */
    seen *quoted = run_files(shared_pool, &opt, NULL);
    for (int k = 0; k < quoted->calls; k++)
        if (strstr(quoted->line[k], "\"class_id\": 1,"))
            ck_assert_ptr_nonnull(strstr(quoted->line[k], "{\"class\": \"second \\\"quoted\\\"\", "
                                                          "\"class_id\": 1,"));
    opt.n_class_names = -1;
    expect_refused(gr_pool_detect_files(shared_pool, path_list, n_paths, &opt, never, NULL, NULL),
                   GR_ERR_INVALID_ARGUMENT, "n_class_names is -1");
    free(plain);
    free(s);
    free(renamed);
    free(quoted);
}
END_TEST

/* ---- a caller's source (files.h: the CLI's video frames) ----------------------------------- */

static const char *const photos[] = {"data/dog.jpg", "data/person.jpg", "data/horses.jpg",
                                     "data/eagle.jpg", "data/giraffe.jpg",
                                     "data/shapes-val/000.png", "data/shapes-val/001.png"};
enum { N_PHOTOS = sizeof photos / sizeof photos[0] };

typedef struct frames {
    seen *results;
    gr_image *image[N_PHOTOS];
} frames;

static int next_image(void *user, int index, const gr_image **image)
{
    frames *f = user;
    if (index >= N_PHOTOS)
        return 0;
    *image = f->image[index];
    return 1;
}

/* A source's result has no path: the photo's is put in for keep_result. */
static int keep_frame(void *user, const gr_file_result *r)
{
    ck_assert_ptr_null(r->path);
    gr_file_result named = *r;
    named.path = photos[r->index];
    return keep_result(((frames *)user)->results, &named);
}

START_TEST(a_source_of_images_runs_as_its_files)
{
    gr_engine *engine = cpu_engine(3, 2);
    gr_pool *pool = pool_of(engine);
    frames f = {.results = new_seen(photos)};
    for (int k = 0; k < N_PHOTOS; k++)
        ck_assert_int_eq(gr_image_load(photos[k], &f.image[k]), GR_OK);
    seen *want = run_list(pool, photos, N_PHOTOS, NULL, NULL);
    gr_files_stats st = {.struct_size = sizeof st};
    ck_assert_int_eq(gr_pool_detect_source(pool, next_image, NULL, keep_frame, &f, &st), GR_OK);
    assert_same(want, f.results);
    ck_assert_int_eq(st.images, N_PHOTOS);
    /* A frame's record holds its frame and time, which only the source knows. */
    gr_files_options opt;
    gr_files_options_default(&opt);
    opt.jsonl = 1;
    expect_refused(gr_pool_detect_source(pool, next_image, &opt, keep_frame, &f, NULL),
                   GR_ERR_INVALID_ARGUMENT, "jsonl: a source's records are its caller's");
    for (int k = 0; k < N_PHOTOS; k++)
        gr_image_destroy(f.image[k]);
    free(f.results);
    free(want);
    gr_pool_destroy(pool);
    gr_engine_destroy(engine);
}
END_TEST

/* ---- stand-ins for the GPU's calls on a CPU engine ------------------------------------------ */

/* A CPU engine made to look like a GPU engine (uint8 input, which the CPU backend runs too) whose
 * backend table has a stand-in JPEG decoder and submit. */
static gr_backend_ops stand_in_ops;
static const gr_backend_ops *cpu_ops;
static int decoder_calls, decoded_by_stand_in, fail_decoder_call, fail_submit_call, submit_calls;
static char passed[MAX_FILES][64];
static int n_passed;

/* Every other JPEG it gets is "decoded": gr_image_decode_mem and the uint8 letterbox into the
 * slot's buffer, as the GPU's letterbox equals the CPU's on the same pixels; the rest left to the
 * CPU. Its fail_decoder_call-th call fails as one batch's failure (device memory) would: not a
 * device-level one, so the engine goes on (a lost device is test_failover.c's). */
static gr_status stand_in_decode(gr_engine *e, int slot, int n, const uint8_t *const *jpeg,
                                 const size_t *bytes, int *decoded)
{
    if (++decoder_calls == fail_decoder_call)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "stand-in decoder: out of device memory");
    void *buffer;
    size_t size;
    ck_assert_int_eq(e->ops->input_buffer(e, slot, 1, &buffer, &size), GR_OK);
    size_t per_image = size / (size_t)e->opt.batch;
    for (int i = 0; i < n; i++) {
        decoded[i] = 0;
        if (!jpeg[i])
            continue;
        /* which file: its size names it among the folder's */
        int k = 0;
        for (; k < n_paths; k++) {
            struct stat sb;
            if (stat(path_list[k], &sb) == 0 && (size_t)sb.st_size == bytes[i])
                break;
        }
        ck_assert_int_lt(k, n_paths);
        snprintf(passed[n_passed++], sizeof passed[0], "%s", strrchr(path_list[k], '/') + 1);
        if (n_passed % 2 == 0)
            continue;
        gr_image *im = NULL;
        ck_assert_int_eq(gr_image_decode_mem(jpeg[i], bytes[i], "stand-in", &im), GR_OK);
        ck_assert_int_eq(gr_engine_letterbox(e, im, (uint8_t *)buffer + (size_t)i * per_image),
                         GR_OK);
        gr_image_destroy(im);
        decoded[i] = 1;
        decoded_by_stand_in++;
    }
    return GR_OK;
}

static const char *stand_in_name(const gr_engine *e)
{
    (void)e;
    return "stand-in decoder";
}

static gr_status stand_in_submit(gr_engine *e, int slot, int u8)
{
    if (++submit_calls == fail_submit_call)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "stand-in submit: out of device memory");
    return cpu_ops->submit(e, slot, u8);
}

static gr_engine *stand_in_engine(int batch, int inflight)
{
    gr_engine *e = cpu_engine(batch, inflight);
    cpu_ops = e->ops;
    stand_in_ops = *e->ops;
    stand_in_ops.decode_jpegs = stand_in_decode;
    stand_in_ops.jpeg_decoder = stand_in_name;
    stand_in_ops.submit = stand_in_submit;
    e->ops = &stand_in_ops;
    e->device = GR_DEVICE_GPU; /* gr_engine_image_u8: 1 */
    decoder_calls = decoded_by_stand_in = n_passed = submit_calls = 0;
    fail_decoder_call = fail_submit_call = -1;
    return e;
}

static void destroy_stand_in(gr_engine *e)
{
    e->device = GR_DEVICE_CPU;
    e->ops = cpu_ops;
    gr_engine_destroy(e);
}

static int by_name(const void *a, const void *b) { return strcmp(a, b); }

/* The results of decoding on the CPU, what the stand-in's runs are compared with. */
static seen *cpu_decoding(gr_engine *e, gr_files_options *opt)
{
    gr_files_options_default(opt);
    opt->decode = GR_FILES_DECODE_CPU;
    seen *want = run_engine(e, opt);
    ck_assert_int_eq(decoder_calls, 0);
    return want;
}

START_TEST(jpegs_handed_to_the_gpu_decoder_give_cpu_decodings_results)
{
    gr_engine *engine = stand_in_engine(3, 3);
    gr_files_options opt;
    seen *want = cpu_decoding(engine, &opt);
    opt.decode = GR_FILES_DECODE_AUTO;
    gr_pool *pool = pool_of(engine);
    gr_files_stats st = {.struct_size = sizeof st};
    seen *got = run_files(pool, &opt, &st);
    gr_pool_destroy(pool);
    assert_same(want, got);
    /* The decoder of each slot opened first (no image), then one call per batch. */
    ck_assert_int_eq(decoder_calls, 3 + (n_paths + 2) / 3);
    /* Only the JPEGs whose structure it decodes: not the PNGs, the garbage, the cut, the
     * progressive or the greyscale one, the directory or the FIFO (each batch is handed over by
     * the worker that completes it: in any order). */
    const char *jpegs[] = {"dog.jpg", "eagle.jpg", "giraffe.jpg", "horses.jpg", "person.jpg"};
    qsort(passed, (size_t)n_passed, sizeof passed[0], by_name);
    ck_assert_int_eq(n_passed, 5);
    for (int k = 0; k < 5; k++)
        ck_assert_str_eq(passed[k], jpegs[k]);
    ck_assert_int_eq(st.gpu_decode, 1);
    ck_assert_str_eq(st.decoder, "stand-in decoder");
    ck_assert_int_eq(st.gpu_decoded, decoded_by_stand_in);
    ck_assert_int_eq(decoded_by_stand_in, 3);
    free(want);
    free(got);
    destroy_stand_in(engine);
}
END_TEST

START_TEST(a_failing_batch_fails_its_images_and_the_run_goes_on)
{
    gr_engine *engine = stand_in_engine(3, 3);
    gr_files_options opt;
    seen *want = cpu_decoding(engine, &opt);
    /* The second batch's submit fails (its images' lines: error records). */
    submit_calls = 0;
    fail_submit_call = 2;
    opt.jsonl = 1;
    seen *got = run_engine(engine, &opt);
    opt.jsonl = 0;
    ck_assert_int_eq(got->calls, n_paths);
    for (int k = 0; k < n_paths; k++) {
        assert_spelled_out(got, k, NULL, 0);
        if (k / 3 != 1 || bad_words[k]) { /* a file's own failure comes first */
            ck_assert_int_eq(got->failure[k], want->failure[k]);
            ck_assert_int_eq(got->n_dets[k], want->n_dets[k]);
            continue;
        }
        ck_assert_int_eq(got->failure[k], GR_FILE_FAILED_RUN);
        ck_assert_int_eq(got->status[k], GR_ERR_OUT_OF_MEMORY);
        ck_assert_str_eq(got->error[k], "stand-in submit: out of device memory");
        ck_assert_int_eq(got->n_dets[k], 0);
        char line[512];
        snprintf(line, sizeof line, "{\"input\": \"%s\", \"error\": \"stand-in submit: out of "
                 "device memory\"}\n", path_list[k]);
        ck_assert_str_eq(got->line[k], line);
    }
    free(got);
    /* The GPU decoder fails on the third batch handed over (its decoders' 3 openings come
     * first; batches are handed over as they fill, not always in order): that batch's images
     * fail, the others' do not. */
    fail_submit_call = -1;
    decoder_calls = 0;
    fail_decoder_call = 3 + 3;
    opt.decode = GR_FILES_DECODE_GPU;
    got = run_engine(engine, &opt);
    ck_assert_int_eq(got->calls, n_paths);
    int failed_batch = -1, failed = 0;
    for (int k = 0; k < n_paths; k++) {
        if (bad_words[k]) {
            ck_assert_int_eq(got->failure[k], GR_FILE_FAILED_READ);
            continue;
        }
        if (got->failure[k] == GR_FILE_OK)
            continue;
        ck_assert_int_eq(got->failure[k], GR_FILE_FAILED_RUN);
        ck_assert_int_eq(got->status[k], GR_ERR_OUT_OF_MEMORY);
        ck_assert_str_eq(got->error[k], "JPEG decoding on the GPU: stand-in decoder: out of device "
                                        "memory");
        ck_assert(failed_batch < 0 || failed_batch == k / 3);
        failed_batch = k / 3;
        failed++;
    }
    ck_assert_int_ge(failed, 1);
    for (int k = 3 * failed_batch; k < 3 * failed_batch + 3 && k < n_paths; k++)
        ck_assert(bad_words[k] || got->failure[k] == GR_FILE_FAILED_RUN);
    free(got);
    free(want);
    destroy_stand_in(engine);
}
END_TEST

/* A device that fails with GPU decoding (runtime.h, "A device that fails"; the test hook
 * GR_TEST_FAIL_ENGINE; tests/test_failover.c has the rest): two stand-in engines of 3 slots,
 * batches of 1. Engine 1's second run (file 3) fails with file 5 submitted on it: those two are
 * lost. File 7, already handed to engine 1's decoder, is handed to engine 0's again (a GPU
 * decoder's pixels are in the failed device's memory) and runs there; every file but the two is
 * CPU decoding's result. */
START_TEST(a_failed_devices_decoded_batch_is_decoded_again_on_another)
{
    gr_engine *engines[2];
    engines[0] = stand_in_engine(1, 3);
    engines[1] = stand_in_engine(1, 3);
    enum { N = 16 };
    const char *list[N], *jpegs[] = {"dog.jpg", "person.jpg", "horses.jpg", "eagle.jpg"};
    for (int k = 0; k < N; k++)
        for (int j = 0; j < n_paths; j++)
            if (strcmp(strrchr(path_list[j], '/') + 1, jpegs[k % 4]) == 0)
                list[k] = path_list[j];
    gr_pool *pool = NULL;
    ck_assert_int_eq(gr_pool_wrap(engines, 2, &pool), GR_OK);
    gr_files_options opt;
    gr_files_options_default(&opt);
    opt.decode = GR_FILES_DECODE_CPU;
    seen *want = run_list(pool, list, N, &opt, NULL);
    opt.decode = GR_FILES_DECODE_GPU;
    decoder_calls = 0;
    setenv("GR_TEST_FAIL_ENGINE", "1:2", 1);
    gr_files_stats st = {.struct_size = sizeof st};
    seen *got = run_list(pool, list, N, &opt, &st);
    unsetenv("GR_TEST_FAIL_ENGINE");
    gr_pool_destroy(pool);
    ck_assert_int_eq(got->calls, N);
    for (int k = 0; k < N; k++) {
        ck_assert_int_eq(got->index[k], k);
        if (k == 3 || k == 5) {
            ck_assert_int_eq(got->failure[k], GR_FILE_FAILED_DEVICE);
            continue;
        }
        ck_assert_int_eq(want->failure[k], GR_FILE_OK);
        ck_assert_int_eq(got->failure[k], GR_FILE_OK);
        ck_assert_int_eq(got->n_dets[k], want->n_dets[k]);
        ck_assert(memcmp(got->dets[k], want->dets[k],
                         (size_t)want->n_dets[k] * sizeof(gr_detection)) == 0);
    }
    ck_assert_int_eq(st.gpu_decode, 1);
    ck_assert_int_eq(st.batches_moved, 1);
    ck_assert_int_eq(st.files_lost, 2);
    /* 6 slots' decoders opened, one hand-over per batch, and file 7's again. */
    ck_assert_int_eq(decoder_calls, 6 + N + 1);
    free(want);
    free(got);
    destroy_stand_in(engines[1]);
    destroy_stand_in(engines[0]);
}
END_TEST

/* --fast-decode: a JPEG decoded DCT-scaled is letterboxed where the file's own size puts it, so
 * its boxes, mapped back with that size, fit. 1000x705 at the shapes model's 160x160: the file's
 * letterbox is 160x112, the 1/4 decode (250x177) would give 160x113 on its own. The engine's
 * input as the run submitted it is compared with gr_image_preprocess_as of that decode; and,
 * with the option off, with the reference letterbox of the full decode. */
static float *captured;
static size_t captured_bytes;

static gr_status capturing_submit(gr_engine *e, int slot, int u8)
{
    void *buffer;
    size_t size;
    ck_assert_int_eq(e->ops->input_buffer(e, slot, u8, &buffer, &size), GR_OK);
    free(captured);
    captured = malloc(size);
    ck_assert_ptr_nonnull(captured);
    memcpy(captured, buffer, size);
    captured_bytes = size;
    return cpu_ops->submit(e, slot, u8);
}

START_TEST(fast_decode_places_the_image_as_the_files_size_says)
{
    gr_image *dog = NULL;
    ck_assert_int_eq(gr_image_load("data/dog.jpg", &dog), GR_OK);
    gr_image big = {.w = 1000, .h = 705, .c = 3, .data = malloc((size_t)1000 * 705 * 3)};
    ck_assert_ptr_nonnull(big.data);
    ck_assert_int_eq(gr_image_preprocess_u8(dog, GR_PREPROCESS_STRETCH, 1000, 705, big.data),
                     GR_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/big.jpg", folder);
    ck_assert_int_eq(gr_image_write(&big, path), GR_OK);

    gr_engine *e = cpu_engine(1, 1);
    cpu_ops = e->ops;
    stand_in_ops = *e->ops;
    stand_in_ops.submit = capturing_submit;
    e->ops = &stand_in_ops;
    gr_files_options opt;
    gr_files_options_default(&opt);
    opt.decode = GR_FILES_DECODE_CPU;
    opt.fast_decode = 1;
    const char *list[] = {path};
    gr_pool *pool = pool_of(e);
    seen *got = run_list(pool, list, 1, &opt, NULL);
    gr_pool_destroy(pool);
    ck_assert_int_eq(got->status[0], GR_OK);
    ck_assert_int_eq(got->width[0], 1000); /* boxes map back to the file's size */
    ck_assert_int_eq(got->height[0], 705);

    /* The decode the run made, and where its input must hold it. */
    gr_image_reader *r = NULL;
    const gr_image *small = NULL;
    ck_assert_int_eq(gr_image_reader_create(&r), GR_OK);
    gr_image_reader_fast_decode(r, gr_model_preprocess(model), 160, 160);
    ck_assert_int_eq(gr_image_reader_load(r, path, &small), GR_OK);
    ck_assert_int_eq(small->w, 250);
    ck_assert_int_eq(small->h, 177);
    size_t n = (size_t)3 * 160 * 160;
    float *want = malloc(n * sizeof *want), *own = malloc(n * sizeof *own);
    ck_assert(want && own);
    ck_assert_int_eq(gr_image_preprocess_as(small, 1000, 705, gr_model_preprocess(model), 160,
                                            160, want), GR_OK);
    ck_assert_uint_eq(captured_bytes, n * sizeof *want);
    ck_assert_msg(memcmp(captured, want, n * sizeof *want) == 0,
                  "the run's input is not the decode letterboxed as a 1000x705 image");
    /* What the run gave before: the decode letterboxed at its own size, one row taller. */
    ck_assert_int_eq(gr_image_preprocess(small, gr_model_preprocess(model), 160, 160, own), GR_OK);
    ck_assert(memcmp(own, want, n * sizeof *want) != 0);
    gr_letterbox_geom g;
    gr_letterbox_geometry(gr_model_preprocess(model), 1000, 705, 160, 160, &g);
    ck_assert_int_eq(g.new_h, 112);
    for (int y = 0; y < 160; y++) /* grey exactly outside rows top..top+111 (channel 0) */
        for (int x = 0; x < 160; x++) {
            int inside = y >= g.top && y < g.top + g.new_h;
            if (!inside)
                ck_assert(captured[(size_t)y * 160 + (size_t)x] == 0.5f);
        }
    /* Off (the default): the run's input is Darknet's, the reference letterbox of the full
     * decode, bit for bit - the bytes the folder mode gave before. */
    opt.fast_decode = 0;
    free(got);
    pool = pool_of(e);
    got = run_list(pool, list, 1, &opt, NULL);
    gr_pool_destroy(pool);
    ck_assert_int_eq(got->status[0], GR_OK);
    gr_image *whole = NULL;
    ck_assert_int_eq(gr_image_load(path, &whole), GR_OK);
    ck_assert_int_eq(gr_image_letterbox_reference(whole, gr_model_preprocess(model), 160, 160,
                                                  want), GR_OK);
    ck_assert_msg(memcmp(captured, want, n * sizeof *want) == 0,
                  "without fast_decode the run's input is not the reference letterbox");
    gr_image_destroy(whole);
    free(want);
    free(own);
    free(captured);
    captured = NULL;
    free(got);
    free(big.data);
    gr_image_destroy(dog);
    gr_image_reader_destroy(r);
    e->ops = cpu_ops;
    gr_engine_destroy(e);
    unlink(path);
}
END_TEST

static Suite *files_suite(void)
{
    Suite *s = suite_create("files");
    TCase *tc = tcase_create("cpu");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, results_in_order_each_as_a_plain_engine);
    tcase_add_test(tc, lines_are_the_clis_records);
    tcase_add_test(tc, threads_batches_and_slots_change_nothing);
    tcase_add_test(tc, the_callback_stops_the_run);
    tcase_add_test(tc, prepare_runs_for_every_image_before_its_callback);
    tcase_add_test(tc, stats_and_the_started_hook);
    tcase_add_test(tc, a_batch_of_failed_files_is_not_run);
    tcase_add_test(tc, bad_arguments_are_refused_before_any_image);
    tcase_add_test(tc, wrapped_pools_borrow_their_engines);
    tcase_add_test(tc, nan_outputs_are_counted_not_detected);
    tcase_add_test(tc, a_source_of_images_runs_as_its_files);
    tcase_add_test(tc, jpegs_handed_to_the_gpu_decoder_give_cpu_decodings_results);
    tcase_add_test(tc, a_failing_batch_fails_its_images_and_the_run_goes_on);
    tcase_add_test(tc, a_failed_devices_decoded_batch_is_decoded_again_on_another);
    tcase_add_test(tc, fast_decode_places_the_image_as_the_files_size_says);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(files_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
