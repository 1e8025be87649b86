/* CLI helpers shared by the subcommands (each cmd_*.c depends on this file and runtime.h, never on
 * another command): failing with the documented exit code, loading the model and building the
 * engine the command line asks for, the calibration image folder and its progress bar, the
 * engine's notices, the non-finite output report. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tools/cli.h"

int gr_cli_fail(gr_status st, const char *what)
{
    fprintf(stderr, "graphrun: %s%s%s\n", what ? what : "", what ? ": " : "", gr_last_error());
    return gr_cli_exit_code(st);
}

int gr_cli_is_directory(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int gr_cli_make_dir(const char *path)
{
    char part[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof part) {
        fprintf(stderr, "graphrun: '%s': not a usable folder name\n", path);
        return GR_EXIT_INPUT;
    }
    memcpy(part, path, len + 1);
    /* Each prefix ending before a '/', then the whole path: EEXIST is fine for a folder. */
    for (size_t i = 1; i <= len; i++) {
        if (i < len && part[i] != '/')
            continue;
        part[i] = '\0';
        if (mkdir(part, 0777) != 0 && !(errno == EEXIST && gr_cli_is_directory(part))) {
            fprintf(stderr, "graphrun: %s: cannot make the folder: %s\n", part,
                    errno == EEXIST ? "a file of that name is in the way" : strerror(errno));
            return GR_EXIT_INPUT;
        }
        if (i < len)
            part[i] = '/';
    }
    return GR_EXIT_OK;
}

static int is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return name[0] != '.' && dot &&
           (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".png"));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void gr_cli_free_list(char **paths)
{
    for (char **p = paths; p && *p; p++)
        free(*p);
    free(paths);
}

int gr_cli_list_images(const char *dir, char ***paths)
{
    *paths = NULL;
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "graphrun: --calib-images %s: %s\n", dir, strerror(errno));
        return GR_EXIT_INPUT;
    }
    size_t n = 0, cap = 16;
    char **list = malloc(cap * sizeof *list);
    for (struct dirent *ent; list && (ent = readdir(d));) {
        if (!is_image_name(ent->d_name))
            continue;
        if (n + 1 >= cap) {
            char **grown = realloc(list, (cap *= 2) * sizeof *list);
            if (!grown) {
                list[n] = NULL;
                gr_cli_free_list(list);
                list = NULL;
                break;
            }
            list = grown;
        }
        size_t len = strlen(dir) + strlen(ent->d_name) + 2;
        if (!(list[n] = malloc(len))) {
            gr_cli_free_list(list);
            list = NULL;
            break;
        }
        snprintf(list[n++], len, "%s/%s", dir, ent->d_name);
        list[n] = NULL;
    }
    closedir(d);
    if (!list) {
        fprintf(stderr, "graphrun: out of memory listing %s\n", dir);
        return GR_EXIT_OOM;
    }
    list[n] = NULL;
    if (n == 0) {
        free(list);
        fprintf(stderr, "graphrun: --calib-images %s: no .jpg, .jpeg or .png file in it\n", dir);
        return GR_EXIT_INPUT;
    }
    qsort(list, n, sizeof *list, cmp_str); /* the same set in the same order every time */
    *paths = list;
    return GR_EXIT_OK;
}

static void progress_bar(int done, int total, void *user)
{
    (void)user;
    enum { WIDTH = 30 };
    int filled = (int)((long)done * WIDTH / total);
    fprintf(stderr, "\rcalibrating [%.*s%*s] %d/%d", filled, "##############################",
            WIDTH - filled, "", done, total);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

void gr_cli_calib_options(const gr_cli_options *o, const char *const *images,
                          gr_engine_options *eo)
{
    (void)o;
    eo->calib_images = images;
    if (isatty(2))
        eo->calib_progress = progress_bar;
}

/* The command line's engine options (gr_cli_engine_options, the one fill) with detect's run-time
 * flags: --letterbox / --stretch, and the streaming path's runs in flight. */
static void cli_engine_options(const gr_cli_options *o, gr_engine_options *eo)
{
    gr_cli_engine_options(&o->engine, o->device, o->precision, o->batch, eo);
    eo->preprocess = o->preprocess;
    if (o->inflight > 0)
        eo->inflight = o->inflight;
}

void gr_cli_print_notices(const gr_engine *engine)
{
    for (const char *line = gr_engine_notice(engine); *line;) {
        size_t len = strcspn(line, "\n");
        fprintf(stderr, "graphrun: %.*s\n", (int)len, line);
        line += len + (line[len] == '\n');
    }
}

int gr_cli_report_nonfinite(const gr_engine *engine, const char *what)
{
    int bad_outputs = 0;
    for (int k = 0; k < gr_engine_output_count(engine); k++) {
        size_t bad = 0;
        gr_tensor_desc d;
        if (gr_engine_output_nonfinite(engine, k, &bad) != GR_OK || bad == 0)
            continue;
        gr_engine_output_desc(engine, k, &d);
        size_t n = (size_t)d.n * (size_t)d.c * (size_t)d.h * (size_t)d.w;
        fprintf(stderr,
                "graphrun: %s: output %d holds %zu non-finite values (NaN/Inf) of %zu: activations "
                "overflow; use --prec fp32 or int8 (--find-overflow names the first layer)\n",
                what, k, bad, n);
        bad_outputs++;
    }
    return bad_outputs;
}

gr_status gr_cli_load_model(const gr_cli_options *o, gr_model **model)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = o->cfg ? NULL : o->model;
    mo.cfg_path = o->cfg;
    mo.weights_path = o->weights;
    mo.seed = o->seed;
    mo.nonfinite_weights_is_error = o->strict_weights;
    gr_status st = gr_model_load(&mo, model);
    if (st != GR_OK)
        return st;
    /* NaN/Inf among the weights (without --strict-weights): never silent. */
    const char *notice = gr_model_notice(*model);
    if (notice && notice[0])
        fprintf(stderr, "graphrun: warning: %s\n", notice);
    return GR_OK;
}

const gr_model *gr_cli_model(const gr_model *model, const gr_engine *engine)
{
    return model ? model : gr_engine_model(engine);
}

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The pool's device list from --device: gpu:all every visible GPU, gpu:N,M those, otherwise
 * one device (gpu_index 0; the CPU accepts that list too). */
static const int *pool_devices(const gr_cli_options *o, int *n)
{
    static const int first = 0;
    if (o->all_devices) {
        *n = 0;
        return NULL;
    }
    *n = o->n_devices ? o->n_devices : 1;
    return o->n_devices ? o->devices : &first;
}

/* Several devices are for the modes that spread batches over a pool. */
static int refuse_device_list(const gr_cli_options *o)
{
    if (!o->all_devices && o->n_devices <= 1)
        return GR_EXIT_OK;
    char text[128];
    fprintf(stderr, "graphrun: --device %s: several GPUs apply to --input DIR, --input-list, a "
                    "video and graphrun bench (one image runs on one GPU: --device gpu:N)\n",
            gr_cli_device_text(o, text, sizeof text));
    return GR_EXIT_USAGE;
}

/* The engine built or loaded: a plain engine into *engine, or a pool into *pool (one of them
 * NULL). */
static gr_status build_or_load(const gr_cli_options *o, const gr_model *model,
                               const gr_engine_options *eo, gr_engine **engine, gr_pool **pool)
{
    int n = 0;
    const int *devices = pool_devices(o, &n);
    if (pool)
        return model ? gr_pool_build(model, eo, devices, n, pool)
                     : gr_pool_load(o->engine_file, eo, devices, n, pool);
    gr_engine_options one = *eo;
    one.gpu_index = o->n_devices ? o->devices[0] : 0;
    return model ? gr_engine_build(model, &one, engine)
                 : gr_engine_load(o->engine_file, &one, engine);
}

/* --engine FILE: the saved engine with the command line's run-time options; the flags that
 * would change its plan must agree with it. */
static int open_saved(gr_cli_options *o, gr_engine **engine, gr_pool **pool, gr_model_info *info)
{
    gr_engine_options eo;
    cli_engine_options(o, &eo);
    double start = wall_ms();
    gr_status st = build_or_load(o, NULL, &eo, engine, pool);
    if (st != GR_OK)
        return gr_cli_fail(st, "loading the engine");
    double ms = wall_ms() - start;
    gr_engine *first = pool ? gr_pool_engine(*pool, 0) : *engine;
    int rc = gr_cli_check_engine_flags(o, first);
    if (rc != GR_EXIT_OK) {
        if (pool) {
            gr_pool_destroy(*pool);
            *pool = NULL;
        } else {
            gr_engine_destroy(*engine);
            *engine = NULL;
        }
        return rc;
    }
    gr_tensor_desc in;
    gr_engine_input_desc(first, &in);
    o->batch = in.n;
    o->precision = gr_cli_engine_precision(first);
    gr_model_get_info(gr_engine_model(first), info);
    fprintf(stderr, "graphrun %s: engine %s: model %s (%dx%dx%d, %d layers), device %s, precision "
                    "%s, batch %d, images %s, loaded in %.1f ms\n", gr_version(), o->engine_file,
            info->name, info->width, info->height, info->channels, info->n_layers,
            gr_engine_device_name(first), gr_precision_name(o->precision), o->batch,
            gr_preprocess_name(gr_model_preprocess(gr_engine_model(first))), ms);
    gr_cli_print_notices(first);
    return GR_EXIT_OK;
}

static void print_engine(const gr_cli_options *o, gr_engine *engine)
{
    gr_cli_print_notices(engine);
    fprintf(stderr, "graphrun: device %s, precision %s%s, batch %d, images %s%s\n",
            gr_engine_device_name(engine), gr_precision_name(o->precision),
            o->precision == GR_PREC_AUTO ? " (mixed int8/fp16, map above)" : "", o->batch,
            gr_preprocess_name(gr_model_preprocess(gr_engine_model(engine))),
            o->eager && gr_engine_device(engine) == GR_DEVICE_GPU ? ", eager (no CUDA graph)" : "");
    gr_engine_memory_info mem;
    if (gr_engine_device(engine) == GR_DEVICE_GPU && gr_engine_memory(engine, &mem) == GR_OK)
        fprintf(stderr, "graphrun: device memory %.1f MiB: weights %.1f MiB (shared), per run in "
                        "flight %.1f MiB (activations, scratch, io) x %d, cuBLAS %.1f MiB\n",
                (double)mem.total_bytes / 1048576.0, (double)mem.weights_bytes / 1048576.0,
                (double)(mem.arena_bytes + mem.workspace_bytes + mem.io_bytes) / 1048576.0,
                mem.inflight, (double)mem.cublas_workspace_bytes / 1048576.0);
    if (gr_engine_device(engine) == GR_DEVICE_CPU && o->precision != GR_PREC_FP32)
        fprintf(stderr, "graphrun: %s on the CPU emulates the GPU's arithmetic: slow, for checking "
                        "numbers, not speed\n", gr_precision_name(o->precision));
}

/* A pool's devices, one line, and what its build said beyond the first engine's notices. */
static void print_pool(const gr_pool *pool, int saved)
{
    int n = gr_pool_devices(pool);
    if (n > 1 || gr_pool_device(pool, 0) > 0) {
        fprintf(stderr, "graphrun: %d device%s:", n, n == 1 ? "" : "s");
        for (int k = 0; k < n; k++)
            fprintf(stderr, "%s gpu %d (%s)", k ? "," : "", gr_pool_device(pool, k),
                    gr_engine_device_name(gr_pool_engine(pool, k)));
        const char *how = saved ? "; each loaded from the engine file"
                                : "; the first built, the others loaded from it";
        fprintf(stderr, "%s\n", n == 1 ? "" : how);
    }
    for (const char *line = gr_pool_notice(pool); *line;) {
        size_t len = strcspn(line, "\n");
        fprintf(stderr, "graphrun: %.*s\n", (int)len, line);
        line += len + (line[len] == '\n');
    }
}

static int open_any(gr_cli_options *o, gr_model **model, gr_engine **engine, gr_pool **pool,
                    gr_model_info *info)
{
    *model = NULL;
    if (engine)
        *engine = NULL;
    if (pool)
        *pool = NULL;
    int rc = pool ? GR_EXIT_OK : refuse_device_list(o);
    if (rc != GR_EXIT_OK)
        return rc;
    if (o->engine_file) {
        rc = open_saved(o, engine, pool, info);
        if (rc == GR_EXIT_OK && pool)
            print_pool(*pool, 1);
        return rc;
    }
    char **calib_list = NULL;
    rc = o->calib_images ? gr_cli_list_images(o->calib_images, &calib_list) : GR_EXIT_OK;
    if (rc != GR_EXIT_OK)
        return rc;
    gr_status st = gr_cli_load_model(o, model);
    if (st == GR_OK && o->names)
        st = gr_model_set_class_names(*model, o->names);
    if (st != GR_OK) {
        gr_cli_free_list(calib_list);
        gr_model_destroy(*model);
        *model = NULL;
        return gr_cli_fail(st, NULL);
    }
    gr_model_get_info(*model, info);
    fprintf(stderr, "graphrun %s: model %s (%dx%dx%d, %d layers, %.2f GFLOP/image)\n", gr_version(),
            info->name, info->width, info->height, info->channels, info->n_layers, info->gflops);
    if (info->synthetic_weights)
        fprintf(stderr, "graphrun: weights: SYNTHETIC (seed %llu) - boxes are not meaningful; pass "
                        "--weights FILE for trained Darknet weights\n", o->seed);

    gr_engine_options eo;
    cli_engine_options(o, &eo);
    gr_cli_calib_options(o, (const char *const *)calib_list, &eo);
    if (o->device == GR_DEVICE_AUTO && gr_cuda_device_count() == 0)
        fprintf(stderr, "graphrun: no CUDA device visible: running the CPU reference (slow)\n");
    st = build_or_load(o, *model, &eo, engine, pool);
    gr_cli_free_list(calib_list); /* the engine keeps no pointer to the calibration inputs */
    if (st != GR_OK) {
        gr_model_destroy(*model);
        *model = NULL;
        return gr_cli_fail(st, "building the engine");
    }
    print_engine(o, pool ? gr_pool_engine(*pool, 0) : *engine);
    if (pool)
        print_pool(*pool, 0);
    return GR_EXIT_OK;
}

int gr_cli_open(gr_cli_options *o, gr_model **model, gr_engine **engine, gr_model_info *info)
{
    return open_any(o, model, engine, NULL, info);
}

int gr_cli_open_pool(gr_cli_options *o, gr_model **model, gr_pool **pool, gr_model_info *info)
{
    return open_any(o, model, NULL, pool, info);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void gr_cli_sort(double *values, int n)
{
    if (n > 1)
        qsort(values, (size_t)n, sizeof *values, cmp_double);
}

/* Linear interpolation between the closest ranks (NumPy's default): monotone in q, so p99 >= p50
 * for every n; one value is every percentile, two give their mean as the median. */
double gr_cli_percentile(const double *sorted, int n, double q)
{
    if (n <= 0)
        return 0.0;
    double pos = q / 100.0 * (double)(n - 1);
    if (pos <= 0.0)
        return sorted[0];
    if (pos >= (double)(n - 1))
        return sorted[n - 1];
    int k = (int)pos;
    return sorted[k] + (pos - (double)k) * (sorted[k + 1] - sorted[k]);
}

/* Said once: the stream mode checks after each batch, main() again at exit. */
static int stdout_failed;

int gr_cli_check_stdout(void)
{
    int flushed = fflush(stdout) == 0;
    int err = errno;
    if (flushed && !ferror(stdout))
        return GR_EXIT_OK;
    if (!stdout_failed)
        fprintf(stderr, "graphrun: writing the results to stdout: %s\n",
                flushed ? "write error" : strerror(err));
    stdout_failed = 1;
    return GR_EXIT_INPUT;
}

int gr_cli_close_stdout(void)
{
    int rc = gr_cli_check_stdout();
    if (fclose(stdout) != 0 && rc == GR_EXIT_OK) {
        if (!stdout_failed)
            fprintf(stderr, "graphrun: writing the results to stdout: %s\n", strerror(errno));
        rc = GR_EXIT_INPUT;
    }
    return rc;
}

int gr_cli_check_image_channels(int channels, int height, int width, const char *model_name)
{
    if (channels == 3)
        return GR_EXIT_OK;
    fprintf(stderr, "graphrun: %s: the network's input has %d channels ([net] channels=%d); "
                    "images are decoded to 3 (RGB): give a float32 .npy of its input shape "
                    "(%dx%dx%d) instead\n",
            model_name, channels, channels, channels, height, width);
    return GR_EXIT_INPUT;
}

int gr_cli_check_image_input(const gr_engine *engine, const char *model_name)
{
    gr_tensor_desc d;
    if (gr_engine_input_desc(engine, &d) != GR_OK)
        return GR_EXIT_OK; /* no engine input to letterbox into */
    return gr_cli_check_image_channels(d.c, d.h, d.w, model_name);
}

/* ---- outputs and inputs ------------------------------------------------------------------ */

void gr_cli_drawn_name(const char *dir, const char *path, char *out, size_t size)
{
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const char *dot = strrchr(name, '.');
    size_t stem = dot && dot != name ? (size_t)(dot - name) : strlen(name);
    /* The encoder writes PNG and JPEG: any other image (.bmp, .webp, .tiff) is drawn as .png */
    int writable = dot && dot != name &&
                   (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
    const char *ext = writable ? dot : ".png";
    size_t dir_len = strlen(dir);
    snprintf(out, size, "%s%s%.*s%s", dir, dir_len && dir[dir_len - 1] == '/' ? "" : "/",
             (int)stem, name, ext);
}

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* The folder that holds path (its directory part, or "." without one) into out. */
static void parent_of(const char *path, char *out, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, size, ".");
    else if (slash == path)
        snprintf(out, size, "/");
    else
        snprintf(out, size, "%.*s", (int)(slash - path), path);
}

int gr_cli_check_output(const char *flag, const char *output, int is_dir,
                        const char *const *inputs, int n)
{
    struct stat out;
    if (!output || !output[0] || stat(output, &out) != 0)
        return GR_EXIT_OK; /* not there yet: no input can be it, nor be in it */
    char parent[4096], last[4096] = "";
    struct stat in, dir;
    int have_dir = 0;
    for (int i = 0; i < n; i++) {
        if (!inputs[i] || stat(inputs[i], &in) != 0)
            continue; /* a missing input, a URL, a camera that is gone: nothing to overwrite */
        const char *how = same_file(&in, &out) ? "is the input" : NULL;
        if (!how && is_dir) {
            parent_of(inputs[i], parent, sizeof parent);
            if (strcmp(parent, last) != 0) { /* a folder's files share their parent */
                have_dir = stat(parent, &dir) == 0;
                snprintf(last, sizeof last, "%s", parent);
            }
            how = have_dir && same_file(&dir, &out) ? "holds the input" : NULL;
        }
        if (how) {
            fprintf(stderr, "graphrun: %s %s %s %s: writing %s could destroy inputs; give "
                            "another %s\n", flag, output, how, inputs[i],
                    is_dir ? "into it" : "it", flag);
            return GR_EXIT_USAGE;
        }
    }
    return GR_EXIT_OK;
}
