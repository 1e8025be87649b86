/* Host-side int8 calibration on the CPU: run an fp32 plan of the network over calibration images
 * with the plan executor, on several threads, gather each layer output's |x| into a histogram
 * (planner/calib_hist.c: no value is stored), and turn the histograms into per-layer ranges by the
 * calibration method (gr_plan_set_ranges makes the scales). The GPU engine may feed the same
 * collector from its own runs; the ranges are what a calibration cache keeps.
 *
 * Threads take images from a shared counter; each has its own executor and one histogram per
 * layer, merged at the end. Merging is exact and order-free, so the ranges do not depend on the
 * thread count or the scheduling. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "planner/calib.h"
#include "planner/calib_hist.h"

#define MAX_THREADS 64

typedef struct calib_shared calib_shared;

typedef struct calib_worker {
    calib_shared *shared;
    gr_plan_exec *ex;
    gr_hist *hists; /* [n_layers + 1]: layers, then the network input */
    float *scratch; /* one tensor as float NCHW */
    size_t scratch_cap;
    float *image;
    gr_status status;
    char error[1024];
} calib_worker;

struct calib_shared {
    const gr_plan *plan;
    const gr_calib_config *cfg;
    int n_images, next, done, failed;
    pthread_mutex_t lock;
};

void gr_calib_config_default(gr_calib_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->method = GR_CALIB_MAX;
    cfg->percentile = 99.99f;
}

static void record_node(const gr_plan_exec *ex, int node, void *user)
{
    calib_worker *w = user;
    const gr_plan *plan = w->shared->plan;
    const gr_plan_node *nd = &plan->nodes[node];
    if (w->status != GR_OK || nd->output < 0)
        return;
    const gr_plan_tensor *t = &plan->tensors[nd->output];
    if (t->layer < 0 || t->layer >= plan->n_layers)
        return;
    size_t n = (size_t)t->n * (size_t)t->c * (size_t)t->h * (size_t)t->w;
    if (n > w->scratch_cap) {
        float *grown = realloc(w->scratch, n * sizeof *grown);
        if (!grown) {
            w->status = gr_fail(GR_ERR_OUT_OF_MEMORY, "calibration: out of memory");
            return;
        }
        w->scratch = grown;
        w->scratch_cap = n;
    }
    gr_plan_exec_read_tensor(ex, nd->output, w->scratch);
    gr_hist_add(&w->hists[t->layer], w->scratch, n);
}

/* Next image index, or -1 when all are taken or a worker failed. */
static int take_image(calib_shared *s)
{
    pthread_mutex_lock(&s->lock);
    int i = s->failed || s->next >= s->n_images ? -1 : s->next++;
    pthread_mutex_unlock(&s->lock);
    return i;
}

static void finish_image(calib_shared *s, gr_status st)
{
    pthread_mutex_lock(&s->lock);
    if (st != GR_OK)
        s->failed = 1;
    else if (s->cfg->progress)
        s->cfg->progress(++s->done, s->n_images, s->cfg->progress_user);
    pthread_mutex_unlock(&s->lock);
}

static void *work(void *arg)
{
    calib_worker *w = arg;
    calib_shared *s = w->shared;
    const gr_plan *plan = s->plan;
    size_t image_elems = (size_t)plan->net_c * (size_t)plan->net_h * (size_t)plan->net_w;
    for (int i; w->status == GR_OK && (i = take_image(s)) >= 0;) {
        w->status = s->cfg->load(i, w->image, s->cfg->load_user);
        if (w->status == GR_OK) {
            gr_hist_add(&w->hists[plan->n_layers], w->image, image_elems);
            w->status = gr_plan_execute(w->ex, w->image);
        }
        finish_image(s, w->status);
    }
    if (w->status != GR_OK) /* the message is thread-local: carry it to the caller's thread */
        snprintf(w->error, sizeof w->error, "%s", gr_last_error());
    return NULL;
}

static gr_status worker_init(calib_worker *w, calib_shared *s)
{
    const gr_plan *plan = s->plan;
    w->shared = s;
    w->hists = gr_malloc(((size_t)plan->n_layers + 1) * sizeof *w->hists, "calibration histograms");
    w->image = gr_malloc((size_t)plan->net_c * (size_t)plan->net_h * (size_t)plan->net_w *
                             sizeof *w->image,
                         "calibration image");
    if (!w->hists || !w->image)
        return GR_ERR_OUT_OF_MEMORY;
    for (int l = 0; l <= plan->n_layers; l++)
        gr_hist_init(&w->hists[l], s->cfg->method == GR_CALIB_MAX);
    GR_TRY(gr_plan_exec_create(plan, 0, &w->ex));
    gr_plan_exec_set_hook(w->ex, record_node, w);
    return GR_OK;
}

static void worker_free(calib_worker *w)
{
    gr_plan_exec_destroy(w->ex);
    free(w->hists);
    free(w->image);
    free(w->scratch);
}

static int thread_count(const gr_calib_config *cfg, int n_images)
{
    long n = cfg->threads > 0 ? cfg->threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > MAX_THREADS)
        n = MAX_THREADS;
    return n > n_images ? n_images : (int)n;
}

gr_status gr_plan_calibrate_images(const gr_net *net, int n_images, const gr_calib_config *cfg,
                                   float *layer_range, float *input_range)
{
    if (!net || n_images < 1 || !cfg || !cfg->load || !layer_range || !input_range)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_calibrate_images: bad argument");
    if ((unsigned)cfg->method > GR_CALIB_MSE)
        return gr_fail(GR_ERR_INVALID_ARGUMENT,
                       "gr_plan_calibrate_images: method %d is not a gr_calib_method",
                       (int)cfg->method);
    if (cfg->method == GR_CALIB_PERCENTILE && !(cfg->percentile > 0.0f && cfg->percentile <= 100.0f))
        return gr_fail(GR_ERR_INVALID_ARGUMENT,
                       "gr_plan_calibrate_images: percentile %g outside (0, 100]",
                       (double)cfg->percentile);
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = GR_PREC_FP32;
    gr_plan *plan = NULL;
    GR_TRY(gr_plan_build(net, &opt, &plan));
    calib_shared s = {.plan = plan, .cfg = cfg, .n_images = n_images};
    pthread_mutex_init(&s.lock, NULL);
    int n_threads = thread_count(cfg, n_images), started = 0;
    calib_worker *workers = gr_calloc((size_t)n_threads, sizeof *workers, "calibration threads");
    pthread_t threads[MAX_THREADS];
    gr_status st = workers ? GR_OK : GR_ERR_OUT_OF_MEMORY;
    for (int t = 0; t < n_threads && st == GR_OK; t++)
        st = worker_init(&workers[t], &s);
    /* The calling thread is worker 0; the others run alongside. */
    for (int t = 1; t < n_threads && st == GR_OK; t++, started++)
        if (pthread_create(&threads[t], NULL, work, &workers[t]) != 0) {
            st = gr_fail(GR_ERR_INTERNAL, "calibration: cannot start thread %d", t);
            finish_image(&s, st); /* stop the others */
        }
    if (st == GR_OK)
        work(&workers[0]);
    for (int t = 1; t <= started; t++)
        pthread_join(threads[t], NULL);
    for (int t = 0; t < n_threads && st == GR_OK && workers; t++)
        if (workers[t].status != GR_OK)
            st = gr_fail(workers[t].status, "%s", workers[t].error);
    for (int t = 1; t < n_threads && st == GR_OK; t++)
        for (int l = 0; l <= net->n_layers; l++)
            gr_hist_merge(&workers[0].hists[l], &workers[t].hists[l]);
    if (st == GR_OK) {
        for (int l = 0; l < net->n_layers; l++)
            layer_range[l] = gr_hist_threshold(&workers[0].hists[l], cfg->method, cfg->percentile);
        *input_range =
            gr_hist_threshold(&workers[0].hists[net->n_layers], cfg->method, cfg->percentile);
    }
    for (int t = 0; workers && t < n_threads; t++)
        worker_free(&workers[t]);
    free(workers);
    pthread_mutex_destroy(&s.lock);
    gr_plan_free(plan);
    return st;
}

typedef struct image_array {
    const float *images;
    size_t image_elems;
} image_array;

static gr_status load_from_array(int index, float *dst, void *user)
{
    const image_array *a = user;
    memcpy(dst, a->images + (size_t)index * a->image_elems, a->image_elems * sizeof *dst);
    return GR_OK;
}

gr_status gr_plan_calibrate_ranges(const gr_net *net, const float *images, int n_images,
                                   gr_calib_method method, float percentile, float *layer_range,
                                   float *input_range)
{
    if (!net || !images)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_calibrate_ranges: bad argument");
    image_array array = {images, (size_t)net->c * (size_t)net->h * (size_t)net->w};
    gr_calib_config cfg;
    gr_calib_config_default(&cfg);
    cfg.method = method;
    cfg.percentile = percentile;
    cfg.load = load_from_array;
    cfg.load_user = &array;
    return gr_plan_calibrate_images(net, n_images, &cfg, layer_range, input_range);
}

gr_status gr_plan_calibrate(gr_plan *plan, const gr_net *net, const float *images, int n_images,
                            gr_calib_method method, float percentile)
{
    if (!plan || !net)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_calibrate: NULL argument");
    if (plan->n_layers != net->n_layers)
        return gr_fail(GR_ERR_INVALID_ARGUMENT,
                       "gr_plan_calibrate: the plan has %d layers, the network %d", plan->n_layers,
                       net->n_layers);
    float *ranges = gr_calloc((size_t)net->n_layers, sizeof *ranges, "calibration ranges");
    if (!ranges)
        return GR_ERR_OUT_OF_MEMORY;
    float input_range = 0.0f;
    gr_status st =
        gr_plan_calibrate_ranges(net, images, n_images, method, percentile, ranges, &input_range);
    if (st == GR_OK)
        st = gr_plan_set_ranges(plan, ranges, input_range);
    free(ranges);
    return st;
}
