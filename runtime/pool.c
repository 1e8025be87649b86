/* gr_pool: one engine per device of the host. The first device's engine is built (or loaded) as
 * any engine is; every other device's engine is that engine saved to memory and loaded with its
 * gpu_index, so calibration and the tactic search happen once and each GPU only plans and uploads
 * its own copy of the weights. A GPU the saved engine refuses (another model, driver, SM count) is
 * built from the model instead, and the notice says so. Written for any number of devices; the
 * CPU reference is one device. gr_pool_wrap makes a pool of engines the caller owns (borrowed:
 * never destroyed here). Uses only the public engine calls (and the options' struct_size rule;
 * a wrapped engine's gpu_index for its ordinal), so it sits on top of the runtime without knowing
 * a backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine_internal.h"

struct gr_pool {
    int n;
    int device[GR_MAX_DEVICES];   /* CUDA ordinal, -1 for the CPU */
    gr_engine *engine[GR_MAX_DEVICES];
    int borrowed;                 /* gr_pool_wrap: the engines are the caller's */
    char notice[GR_NOTICE_LEN];
};

/* The list's own sense, before any device is asked about. */
static gr_status check_list(const int *devices, int n_devices)
{
    if (n_devices < 0 || n_devices > GR_MAX_DEVICES)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "pool device list: %d devices (1..%d, or 0 for "
                       "every visible GPU)", n_devices, GR_MAX_DEVICES);
    if (n_devices > 0 && !devices)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "pool device list: NULL with n_devices = %d",
                       n_devices);
    for (int i = 0; i < n_devices; i++) {
        if (devices[i] < 0)
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "pool device list: entry %d is gpu %d "
                           "(ordinals are >= 0)", i, devices[i]);
        for (int j = 0; j < i; j++)
            if (devices[j] == devices[i])
                return gr_fail(GR_ERR_INVALID_ARGUMENT, "pool device list: gpu %d given twice "
                               "(entries %d and %d)", devices[i], j, i);
    }
    return GR_OK;
}

/* The devices the pool runs on (a checked list): p->n ordinals, -1 alone for the CPU. */
static gr_status resolve_devices(gr_pool *p, gr_device device, const int *devices, int n_devices)
{
    int visible = gr_cuda_device_count();
    if (device == GR_DEVICE_AUTO)
        device = visible > 0 ? GR_DEVICE_GPU : GR_DEVICE_CPU;
    if (device == GR_DEVICE_CPU) {
        if (n_devices > 1 || (n_devices == 1 && devices[0] != 0))
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "pool device list: the CPU is one device "
                           "(list empty or {0}); the list has %d entr%s, the first %d", n_devices,
                           n_devices == 1 ? "y" : "ies", devices[0]);
        p->device[0] = -1;
        p->n = 1;
        return GR_OK;
    }
    if (visible == 0)
        return gr_fail(GR_ERR_NO_DEVICE, "pool: no CUDA device is visible");
    for (int i = 0; i < n_devices; i++)
        if (devices[i] >= visible)
            return gr_fail(GR_ERR_NO_DEVICE, "pool device list: gpu %d: only %d CUDA device%s "
                           "visible", devices[i], visible, visible == 1 ? " is" : "s are");
    p->n = n_devices ? n_devices : visible < GR_MAX_DEVICES ? visible : GR_MAX_DEVICES;
    for (int i = 0; i < p->n; i++)
        p->device[i] = n_devices ? devices[i] : i;
    return GR_OK;
}

static void add_notice(gr_pool *p, const char *fmt, const char *what, int dev, const char *why)
{
    size_t used = strlen(p->notice);
    if (used + 1 >= sizeof p->notice)
        return;
    if (used)
        p->notice[used++] = '\n';
    snprintf(p->notice + used, sizeof p->notice - used, fmt, what, dev, why);
}

/* Engines 1..n-1 from engine 0's saved bytes; with a model, a device that refuses them (another
 * GPU's identity) gets its own build. */
static gr_status replicate(gr_pool *p, const gr_model *model, const gr_engine_options *opt)
{
    if (p->n == 1)
        return GR_OK;
    void *bytes = NULL;
    size_t len = 0;
    GR_TRY(gr_engine_save_to_memory(p->engine[0], &bytes, &len));
    gr_status st = GR_OK;
    for (int k = 1; k < p->n && st == GR_OK; k++) {
        gr_engine_options o = *opt;
        o.gpu_index = p->device[k];
        st = gr_engine_load_from_memory(bytes, len, &o, &p->engine[k]);
        if (st == GR_ERR_UNSUPPORTED && model) {
            char why[512];
            snprintf(why, sizeof why, "%s", gr_last_error());
            add_notice(p, "%s: gpu %d: %s; built there separately (its own calibration and "
                       "tactic search)", "pool", p->device[k], why);
            st = gr_engine_build(model, &o, &p->engine[k]);
        }
        if (st != GR_OK)
            gr_fail_prefix(st, "pool: gpu %d: ", p->device[k]);
    }
    free(bytes);
    return st;
}

/* The pool around engine 0: built from the model, or loaded from path (whose device is the
 * file's, so its list is resolved once engine 0 says which). */
static gr_status make_pool(const gr_model *model, const char *path, const gr_engine_options *opt,
                           const int *devices, int n_devices, gr_pool **out)
{
    if (!out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_pool_%s: NULL out", model ? "build" : "load");
    *out = NULL;
    gr_engine_options o;
    if (opt)
        GR_TRY(gr_engine_options_take(opt, &o));
    else
        gr_engine_options_default(&o);
    GR_TRY(check_list(devices, n_devices));
    gr_pool *p = gr_calloc(1, sizeof *p, "pool");
    if (!p)
        return GR_ERR_OUT_OF_MEMORY;
    gr_status st = GR_OK;
    if (path) {
        o.gpu_index = n_devices ? devices[0] : 0;
        st = gr_engine_load(path, &o, &p->engine[0]);
        if (st == GR_OK)
            st = resolve_devices(p, gr_engine_device(p->engine[0]), devices, n_devices);
    } else {
        st = resolve_devices(p, o.device, devices, n_devices);
        o.gpu_index = p->device[0] < 0 ? 0 : p->device[0];
        if (st == GR_OK)
            st = gr_engine_build(model, &o, &p->engine[0]);
    }
    if (st == GR_OK)
        st = replicate(p, model, &o);
    if (st != GR_OK) {
        p->n = p->n ? p->n : 1; /* engine 0 may exist before the list resolved */
        gr_pool_destroy(p);
        return st;
    }
    *out = p;
    return GR_OK;
}

gr_status gr_pool_build(const gr_model *model, const gr_engine_options *opt, const int *devices,
                        int n_devices, gr_pool **out)
{
    if (!model)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_pool_build: NULL model");
    return make_pool(model, NULL, opt, devices, n_devices, out);
}

gr_status gr_pool_load(const char *path, const gr_engine_options *opt, const int *devices,
                       int n_devices, gr_pool **out)
{
    if (!path)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_pool_load: NULL path");
    return make_pool(NULL, path, opt, devices, n_devices, out);
}

/* Engine k of a wrapped pool against engine 0: one engine on another device takes the same
 * input and gives the same outputs. */
static gr_status check_same_engine(gr_engine *const *engines, int k)
{
    gr_tensor_desc a, b;
    const char *what = NULL;
    GR_TRY(gr_engine_input_desc(engines[0], &a));
    GR_TRY(gr_engine_input_desc(engines[k], &b));
    if (a.n != b.n || a.c != b.c || a.h != b.h || a.w != b.w)
        what = "input";
    else if (gr_engine_image_u8(engines[0]) != gr_engine_image_u8(engines[k]))
        what = "input type (device)";
    else if (gr_engine_output_count(engines[0]) != gr_engine_output_count(engines[k]))
        what = "output count";
    for (int i = 0; !what && i < gr_engine_output_count(engines[0]); i++) {
        GR_TRY(gr_engine_output_desc(engines[0], i, &a));
        GR_TRY(gr_engine_output_desc(engines[k], i, &b));
        if (a.n != b.n || a.c != b.c || a.h != b.h || a.w != b.w)
            what = "outputs";
    }
    for (int j = 0; !what && j < k; j++)
        if (engines[j] == engines[k])
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_pool_wrap: engine %d is engine %d again",
                           k, j);
    if (what)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_pool_wrap: engine %d's %s differs from "
                       "engine 0's", k, what);
    return GR_OK;
}

gr_status gr_pool_wrap(gr_engine *const *engines, int n, gr_pool **out)
{
    if (!out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_pool_wrap: NULL out");
    *out = NULL;
    if (!engines)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_pool_wrap: NULL engines");
    if (n < 1 || n > GR_MAX_DEVICES)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_pool_wrap: %d engines (1..%d)", n,
                       GR_MAX_DEVICES);
    for (int k = 0; k < n; k++)
        if (!engines[k])
            return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_pool_wrap: engine %d is NULL", k);
    for (int k = 1; k < n; k++)
        GR_TRY(check_same_engine(engines, k));
    gr_pool *p = gr_calloc(1, sizeof *p, "pool");
    if (!p)
        return GR_ERR_OUT_OF_MEMORY;
    p->n = n;
    p->borrowed = 1;
    for (int k = 0; k < n; k++) {
        p->engine[k] = engines[k];
        p->device[k] = gr_engine_device(engines[k]) == GR_DEVICE_GPU ? engines[k]->opt.gpu_index
                                                                     : -1;
    }
    *out = p;
    return GR_OK;
}

/* Each engine's destroy waits for its own runs in flight. */
void gr_pool_destroy(gr_pool *pool)
{
    if (!pool)
        return;
    for (int k = 0; k < pool->n && !pool->borrowed; k++)
        gr_engine_destroy(pool->engine[k]);
    free(pool);
}

int gr_pool_devices(const gr_pool *pool) { return pool ? pool->n : 0; }

gr_engine *gr_pool_engine(const gr_pool *pool, int index)
{
    return pool && index >= 0 && index < pool->n ? pool->engine[index] : NULL;
}

int gr_pool_device(const gr_pool *pool, int index)
{
    return pool && index >= 0 && index < pool->n ? pool->device[index] : -1;
}

const char *gr_pool_notice(const gr_pool *pool) { return pool ? pool->notice : ""; }
