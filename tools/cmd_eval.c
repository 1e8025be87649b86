/* `graphrun eval`: accuracy of a model on a folder of labelled images - mAP@0.5:0.95, mAP@0.5 and
 * mAP@0.75 as pycocotools scores them (or the VOC way, --metric voc), with a per-class AP table,
 * for one or every precision. Labels are YOLO text
 * files (one `class cx cy w h` line per object, normalised to the image) with the image's stem;
 * an image without one has no objects; or a COCO instances file (--coco-annotations, read by
 * tools/coco.c, images matched by file name). --detections scores a COCO results file against
 * such a file without a model. Detections are kept down to --thresh 0.005 with NMS 0.45, as
 * Darknet's `detector map` does; the metric is tools/eval.c.
 *
 * stdout carries only results; progress, timing and notices go to stderr. */
#define _POSIX_C_SOURCE 200809L /* opendir, strdup, strcasecmp */

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "base/base.h"
#include "tools/coco.h"
#include "tools/eval.h"
#include "tools/cli.h"
#include "tools/results.h"


#define MAX_LABEL_LINE 1024
#define MAX_CALIB_IMAGES 64
#define MAX_EVAL_IMAGES 1000000
/* How far (a fraction of the image's side) a box may reach past the image's edge: converters
 * round; a box further out is not of this image. */
#define BOX_SLACK 0.01

/* Ground truth from a COCO instances file, per image of the run (name order), in pixels. */
typedef struct coco_truth {
    gr_detection **boxes; /* [n_images], NULL for none */
    double **area;        /* [n_images][n]: each box's COCO area */
    unsigned char **crowd_flag; /* [n_images][n]: iscrowd */
    int *n;
    int *width, *height;  /* [n_images]: the sizes the file gives (0: none) */
    int n_images;
    int unlisted;         /* images of the folder that the file does not list: no objects */
    long long crowd;      /* iscrowd annotations */
} coco_truth;

typedef struct eval_args {
    const char *model, *cfg, *weights, *names;
    const char *images, *labels, *calib_images;
    const char *coco_annotations, *detections; /* --coco-annotations, --detections */
    const coco_truth *truth; /* the ground truth of --coco-annotations, once read */
    gr_precision precs[3];
    int n_precs;
    gr_device device;
    int batch, max_images, json;
    gr_ap_method metric;  /* --metric: GR_AP_COCO by default */
    float thresh, nms;
    gr_engine_options engine; /* graphrun/options.def's flags (--calib, --max-nrmse, --tf32, ...) */
} eval_args;

static void eval_usage(FILE *f)
{
    fprintf(f,
            "usage: graphrun eval --images DIR [options]\n"
            "       graphrun eval --coco-annotations FILE --detections FILE [--json]\n"
            "  mAP@0.5:0.95, mAP@0.5 and mAP@0.75 (as pycocotools) of a model on images with\n"
            "  YOLO labels or COCO annotations, or of a COCO results file\n"
            "  --model NAME | --cfg FILE   network (default yolo); --weights FILE, --names FILE\n"
            "  --images DIR        JPEG/PNG/BMP images, evaluated in name order\n"
            "  --labels DIR        YOLO label files <stem>.txt (default: the images' folder)\n"
            "  --coco-annotations FILE  ground truth from a COCO instances file instead (images\n"
            "                      matched by file_name; areas and iscrowd as COCOeval, docs/eval.md)\n"
            "  --detections FILE   with --coco-annotations and no model: score a COCO results\n"
            "                      file (graphrun --format coco) on every image of the annotations\n"
            "  --max-images N      only the first N images\n"
            "  --prec P            fp32 (default), fp16, int8, auto (mixed, see --max-nrmse) or all\n"
            "  --device D          auto (default), cpu, gpu\n"
            "  --batch N           images per run (default 1)\n"
            "  --calib-images DIR  int8 calibration images (default: the bundled shapes-calib for\n"
            "                      --model shapes, else the engine's default, the bundled photos)\n"
            "  --thresh T          detection threshold (default 0.005), --nms T (default 0.45)\n"
            "  --metric M          coco (default: pycocotools' COCOeval), voc (VOC matching,\n"
            "                      all-point AP) or voc07 (VOC matching, 11-point AP)\n"
            "  --json              results as JSON\n");
    gr_cli_engine_usage(f, GR_CMD_EVAL);
}

static int fail(gr_status st, const char *what)
{
    fprintf(stderr, "graphrun eval: %s%s%s\n", what ? what : "", what ? ": " : "",
            gr_last_error());
    return gr_cli_exit_code(st);
}

enum {
    E_JSON = 1, E_MODEL, E_CFG, E_WEIGHTS, E_NAMES, E_IMAGES, E_LABELS, E_CALIB_IMAGES, E_PREC, E_DEVICE, E_BATCH, E_MAX_IMAGES, E_THRESH, E_NMS, E_COCO, E_DETECTIONS,
    E_METRIC
};

static const gr_cli_flag eval_flags[] = {
    {"--json", E_JSON, 0}, {"--model", E_MODEL, 1}, {"--cfg", E_CFG, 1},
    {"--weights", E_WEIGHTS, 1}, {"--names", E_NAMES, 1}, {"--images", E_IMAGES, 1},
    {"--labels", E_LABELS, 1}, {"--calib-images", E_CALIB_IMAGES, 1},
    {"--prec", E_PREC, 1}, {"--device", E_DEVICE, 1},
    {"--batch", E_BATCH, 1}, {"--max-images", E_MAX_IMAGES, 1}, {"--thresh", E_THRESH, 1},
    {"--nms", E_NMS, 1}, {"--coco-annotations", E_COCO, 1}, {"--detections", E_DETECTIONS, 1},
    {"--metric", E_METRIC, 1}, {NULL, 0, 0}};

static const char *metric_name(gr_ap_method m)
{
    return m == GR_AP_COCO ? "coco" : m == GR_AP_ALL_POINT ? "voc" : "voc07";
}

static int parse_metric(const char *v, gr_ap_method *m)
{
    static const gr_ap_method all[] = {GR_AP_COCO, GR_AP_ALL_POINT, GR_AP_11_POINT};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (!strcmp(v, metric_name(all[i]))) {
            *m = all[i];
            return 1;
        }
    return 0;
}

/* --prec: one precision, or all three. */
static int parse_precs(const char *v, eval_args *a)
{
    if (!strcmp(v, "all")) {
        a->n_precs = 3;
        a->precs[1] = GR_PREC_FP16;
        a->precs[2] = GR_PREC_INT8;
        return 1;
    }
    a->n_precs = 1;
    return gr_precision_parse(v, &a->precs[0]) == GR_OK;
}

static const char *apply_value(eval_args *a, int id, const char *v)
{
    switch (id) {
    case E_MODEL: a->model = v; break;
    case E_CFG: a->cfg = v; break;
    case E_WEIGHTS: a->weights = v; break;
    case E_NAMES: a->names = v; break;
    case E_IMAGES: a->images = v; break;
    case E_LABELS: a->labels = v; break;
    case E_CALIB_IMAGES: a->calib_images = v; break;
    case E_COCO: a->coco_annotations = v; break;
    case E_DETECTIONS: a->detections = v; break;
    case E_PREC: return parse_precs(v, a) ? NULL : "fp32, fp16, int8, auto or all";
    case E_DEVICE: return gr_cli_parse_device(v, &a->device) ? NULL : "auto, cpu or gpu";
    case E_BATCH:
        return gr_cli_parse_int(v, 1, GR_MAX_BATCH_CLI, &a->batch)
                   ? NULL : "an integer in 1..4096";
    case E_MAX_IMAGES:
        return gr_cli_parse_int(v, 1, MAX_EVAL_IMAGES, &a->max_images) ? NULL
                                                                         : "a positive integer";
    case E_THRESH:
        return gr_cli_parse_float(v, 0.0f, 1.0f, &a->thresh)
                   ? NULL : "a number in [0, 1]";
    case E_NMS: return gr_cli_parse_float(v, 0.0f, 1.0f, &a->nms) ? NULL : "a number in [0, 1]";
    case E_METRIC: return parse_metric(v, &a->metric) ? NULL : "coco, voc or voc07";
    default: break;
    }
    return NULL;
}

static int eval_apply(void *ctx, int id, const char *name, const char *v, char *err, size_t errlen)
{
    eval_args *a = ctx;
    if (id == E_JSON) {
        a->json = 1;
        return GR_EXIT_OK;
    }
    const char *want = apply_value(a, id, v);
    return want ? gr_cli_usage_error(err, errlen, "%s '%s' is not %s", name, v, want) : GR_EXIT_OK;
}

/* Returns -1 to go on, else the exit status (help, version, a usage error: printed). */
static int parse_args(int argc, char **argv, eval_args *a)
{
    memset(a, 0, sizeof *a);
    a->model = "yolo";
    a->precs[0] = GR_PREC_FP32;
    a->n_precs = 1;
    a->batch = 1;
    a->max_images = MAX_EVAL_IMAGES;
    a->thresh = 0.005f;
    gr_engine_options_default(&a->engine);
    a->nms = 0.45f;
    a->metric = GR_AP_COCO;
    gr_cli_parser parser = {.command = "graphrun eval", .own = eval_flags, .apply = eval_apply,
                            .ctx = a, .engine = &a->engine, .commands = GR_CMD_EVAL};
    int rc = gr_cli_run_parser(&parser, argc, argv, eval_usage);
    if (rc >= 0)
        return rc;
    const char *clash = a->detections && !a->coco_annotations
                            ? "--detections FILE needs --coco-annotations FILE (its ground truth)"
                        : a->detections && (a->images || a->cfg || a->weights)
                            ? "--detections FILE is scored without a model: no --images, --cfg "
                              "or --weights"
                        : a->labels && a->coco_annotations
                            ? "--labels and --coco-annotations are two sources of ground truth"
                        : !a->images && !a->detections
                            ? "--images DIR is required (see graphrun eval --help)"
                            : NULL;
    if (clash) {
        fprintf(stderr, "graphrun eval: %s\n", clash);
        return GR_EXIT_USAGE;
    }
    if (!a->labels)
        a->labels = a->images;
    return -1;
}

/* ---- files -------------------------------------------------------------------------------- */

typedef struct name_list {
    char **names;
    int n, cap;
} name_list;

static void names_free(name_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->names[i]);
    free(l->names);
    memset(l, 0, sizeof *l);
}

static int is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") ||
                   !strcasecmp(dot, ".png") || !strcasecmp(dot, ".bmp"));
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The image files of `dir` (names only), sorted, at most `max`. */
static gr_status list_images(const char *dir, int max, name_list *out)
{
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d)
        return gr_fail(GR_ERR_IO, "%s: cannot open the folder: %s", dir, strerror(errno));
    struct dirent *e;
    gr_status st = GR_OK;
    while (st == GR_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !is_image_name(e->d_name))
            continue;
        if (out->n == out->cap) {
            int cap = out->cap ? 2 * out->cap : 256;
            char **grown = realloc(out->names, (size_t)cap * sizeof *grown);
            if (!grown) {
                st = gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory listing images", dir);
                break;
            }
            out->names = grown;
            out->cap = cap;
        }
        if (!(out->names[out->n] = strdup(e->d_name)))
            st = gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory listing images", dir);
        else
            out->n++;
    }
    closedir(d);
    if (st != GR_OK) {
        names_free(out);
        return st;
    }
    if (out->n == 0)
        return gr_fail(GR_ERR_IO, "%s: no .jpg, .jpeg, .png or .bmp images", dir);
    qsort(out->names, (size_t)out->n, sizeof *out->names, by_name);
    while (out->n > max)
        free(out->names[--out->n]);
    return GR_OK;
}

static void join_path(char *dst, size_t len, const char *dir, const char *name)
{
    size_t n = strlen(dir);
    snprintf(dst, len, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
}

/* <labels>/<stem of image_name>.txt into full. */
static void label_path(char *full, size_t len, const char *labels_dir, const char *image_name)
{
    char stem[1024], name[1100];
    snprintf(stem, sizeof stem, "%s", image_name);
    char *dot = strrchr(stem, '.');
    if (dot)
        *dot = '\0';
    snprintf(name, sizeof name, "%s.txt", stem);
    join_path(full, len, labels_dir, name);
}

/* The label file, or *f = NULL when there is none (an image without objects). */
static gr_status open_labels(const char *full, FILE **f)
{
    *f = NULL;
    struct stat sb;
    if (stat(full, &sb) != 0)
        return errno == ENOENT ? GR_OK
                               : gr_fail(GR_ERR_IO, "%s: cannot open: %s", full, strerror(errno));
    /* A directory opens and reads as an empty file: it would pass for an image without objects. */
    if (!S_ISREG(sb.st_mode))
        return gr_fail(GR_ERR_IO, "%s: not a regular file (%s): a label file must be a file", full,
                       S_ISDIR(sb.st_mode) ? "a directory" : "a device, FIFO or socket");
    if (!(*f = fopen(full, "r")))
        return gr_fail(GR_ERR_IO, "%s: cannot open: %s", full, strerror(errno));
    return GR_OK;
}

static char *skip_space(char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    return p;
}

/* One `class cx cy w h` line into v; *blank for an empty line. */
static gr_status parse_label_line(char *line, const char *full, int line_no, int classes,
                                  double v[5], int *blank)
{
    char *p = skip_space(line);
    *blank = *p == '\0';
    if (*blank)
        return GR_OK;
    int k = 0;
    for (; k < 5; k++) {
        char *end;
        errno = 0;
        v[k] = strtod(p, &end);
        if (end == p || errno || !isfinite(v[k]))
            break;
        p = end;
    }
    if (k < 5 || *skip_space(p))
        return gr_fail(GR_ERR_PARSE, "%s:%d: expected 'class cx cy w h' (5 numbers)", full,
                       line_no);
    if (v[0] != floor(v[0]) || v[0] < 0 || v[0] >= classes)
        return gr_fail(GR_ERR_PARSE, "%s:%d: class %g is not an integer in 0..%d (the model's "
                                     "classes)", full, line_no, v[0], classes - 1);
    if (v[3] < 0 || v[4] < 0)
        return gr_fail(GR_ERR_PARSE, "%s:%d: negative box size", full, line_no);
    if (v[3] == 0 || v[4] == 0)
        return gr_fail(GR_ERR_PARSE, "%s:%d: box of zero width or height (no detection can "
                                     "match it)", full, line_no);
    if (v[1] - v[3] / 2 < -BOX_SLACK || v[1] + v[3] / 2 > 1 + BOX_SLACK ||
        v[2] - v[4] / 2 < -BOX_SLACK || v[2] + v[4] / 2 > 1 + BOX_SLACK)
        return gr_fail(GR_ERR_PARSE, "%s:%d: box x %g..%g, y %g..%g is outside the image (0..1, "
                                     "normalised)", full, line_no, v[1] - v[3] / 2,
                       v[1] + v[3] / 2, v[2] - v[4] / 2, v[2] + v[4] / 2);
    return GR_OK;
}

/* The box of a label line, in pixels of the w x h image, appended to *out. */
static gr_status add_box(const double v[5], int w, int h, const char *full, gr_detection **out,
                         int *n, int *cap)
{
    if (*n == *cap) {
        int grown_cap = *cap ? 2 * *cap : 16;
        gr_detection *grown = realloc(*out, (size_t)grown_cap * sizeof *grown);
        if (!grown)
            return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory", full);
        *out = grown;
        *cap = grown_cap;
    }
    gr_detection *g = &(*out)[(*n)++];
    memset(g, 0, sizeof *g);
    g->class_id = (int)v[0];
    g->left = (float)((v[1] - v[3] / 2) * w);
    g->right = (float)((v[1] + v[3] / 2) * w);
    g->top = (float)((v[2] - v[4] / 2) * h);
    g->bottom = (float)((v[2] + v[4] / 2) * h);
    return GR_OK;
}

/* Ground truth of one image from <labels>/<stem>.txt, in pixels of the w x h image. A missing
 * file means no objects (*missing is set). */
static gr_status read_labels(const char *labels_dir, const char *image_name, int w, int h,
                             int classes, gr_detection **out, int *n, int *missing)
{
    *out = NULL;
    *n = 0;
    char full[4200];
    label_path(full, sizeof full, labels_dir, image_name);
    FILE *f;
    GR_TRY(open_labels(full, &f));
    *missing = f == NULL;
    char line[MAX_LABEL_LINE];
    int line_no = 0, cap = 0;
    gr_status st = GR_OK;
    while (f && st == GR_OK && fgets(line, sizeof line, f)) {
        line_no++;
        double v[5];
        int blank;
        if (!strchr(line, '\n') && !feof(f))
            st = gr_fail(GR_ERR_PARSE, "%s:%d: line longer than %d bytes", full, line_no,
                         MAX_LABEL_LINE - 2);
        else if ((st = parse_label_line(line, full, line_no, classes, v, &blank)) == GR_OK)
            st = blank ? GR_OK : add_box(v, w, h, full, out, n, &cap);
    }
    if (f && st == GR_OK && ferror(f))
        st = gr_fail(GR_ERR_IO, "%s: read error: %s", full, strerror(errno));
    if (f)
        fclose(f);
    if (st != GR_OK) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return st;
}

/* ---- one precision ------------------------------------------------------------------------ */

typedef struct eval_result {
    gr_precision prec;
    gr_eval_summary sum;
    double seconds;
    long long dets;
    gr_eval_class *per_class;
} eval_result;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One precision's engine and its input batch. */
typedef struct eval_batch {
    gr_engine *engine;
    gr_image **images; /* [batch]: the batch's decoded images (their sizes map boxes back) */
    int batch;
} eval_batch;

static gr_status eval_batch_open(const eval_args *a, const gr_model *model,
                                 const char *const *calib, gr_precision prec, eval_batch *eb)
{
    gr_engine_options eo;
    gr_cli_engine_options(&a->engine, a->device, prec, a->batch, &eo);
    eo.calib_images = calib;
    gr_status st = gr_engine_build(model, &eo, &eb->engine);
    if (st != GR_OK)
        return gr_fail_prefix(st, "building the %s engine: ", gr_precision_name(prec));
    gr_cli_print_notices(eb->engine); /* e.g. the int8 calibration's time */
    fprintf(stderr, "graphrun eval: %s on %s, batch %d\n", gr_precision_name(prec),
            gr_engine_device_name(eb->engine), a->batch);
    eb->batch = a->batch;
    eb->images = calloc((size_t)a->batch, sizeof *eb->images);
    if (!eb->images)
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "eval: input batch of %d", a->batch);
    return GR_OK;
}

static void eval_batch_close(eval_batch *eb)
{
    for (int b = 0; eb->images && b < eb->batch; b++)
        gr_image_destroy(eb->images[b]);
    free(eb->images);
    gr_engine_destroy(eb->engine);
}

/* Images first..first+count-1 decoded and letterboxed into the batch (the rest of a last, short
 * batch repeats the first) and run. */
static gr_status run_batch(const eval_args *a, const name_list *images, int first, int count,
                           eval_batch *eb)
{
    for (int b = 0; b < eb->batch; b++) {
        char path[4200];
        join_path(path, sizeof path, a->images, images->names[first + (b < count ? b : 0)]);
        gr_image_destroy(eb->images[b]);
        eb->images[b] = NULL;
        GR_TRY(gr_image_load(path, &eb->images[b]));
        GR_TRY(gr_engine_set_image(eb->engine, 0, b, eb->images[b])); /* as `graphrun` does */
    }
    return gr_engine_run(eb->engine);
}

/* Image b of the batch (image `index` of the run, named `name`): its detections against its
 * labels (or the COCO file's boxes) into ev. */
static gr_status score_image(const eval_args *a, const gr_model_info *info, eval_batch *eb, int b,
                             int index, const char *name, gr_eval *ev, int *n_missing)
{
    gr_detect_options dopt;
    gr_detect_options_default(&dopt);
    dopt.thresh = a->thresh;
    dopt.nms = a->nms;
    dopt.image_w = eb->images[b]->w;
    dopt.image_h = eb->images[b]->h;
    gr_detection *dets = NULL, *gt = NULL;
    int nd = 0, ng = 0, missing = 0;
    gr_status st = gr_engine_detect(eb->engine, b, &dopt, &dets, &nd);
    if (st == GR_OK && a->truth) {
        const coco_truth *t = a->truth;
        int w = eb->images[b]->w, h = eb->images[b]->h;
        if ((t->width[index] && t->width[index] != w) || (t->height[index] && t->height[index] != h))
            st = gr_fail(GR_ERR_PARSE, "%s: %s is %dx%d but the annotations say %dx%d: its boxes "
                                       "are not of this image", a->coco_annotations, name, w, h,
                         t->width[index], t->height[index]);
        if (st == GR_OK)
            st = gr_eval_add_image_coco(ev, dets, nd, t->boxes[index], t->n[index],
                                        t->area[index], t->crowd_flag[index]);
        gr_detections_free(dets);
        return st;
    }
    if (st == GR_OK)
        st = read_labels(a->labels, name, eb->images[b]->w, eb->images[b]->h, info->classes, &gt,
                         &ng, &missing);
    if (st == GR_OK)
        st = gr_eval_add_image(ev, dets, nd, gt, ng);
    *n_missing += missing;
    gr_detections_free(dets);
    free(gt);
    return st;
}

static gr_status eval_images(const eval_args *a, const gr_model_info *info,
                             const name_list *images, eval_batch *eb, gr_eval *ev, int *n_missing)
{
    *n_missing = 0;
    for (int first = 0; first < images->n; first += a->batch) {
        int count = images->n - first < a->batch ? images->n - first : a->batch;
        GR_TRY(run_batch(a, images, first, count, eb));
        for (int b = 0; b < count; b++)
            GR_TRY(score_image(a, info, eb, b, first + b, images->names[first + b], ev,
                               n_missing));
    }
    return GR_OK;
}

/* The metric of what ev holds into res (per_class allocated here); no ground truth at all is an
 * error: there is nothing to score. */
static gr_status finish_result(const eval_args *a, const gr_eval *ev, int classes,
                               eval_result *res, long long *n_gt)
{
    int images;
    gr_eval_counts(ev, &images, n_gt, &res->dets);
    if (*n_gt == 0)
        return gr_fail(GR_ERR_PARSE, "no ground truth: none of the %d images has a labelled "
                                     "object in %s (wrong --labels or annotations?)", images,
                       a->coco_annotations ? a->coco_annotations : a->labels);
    if (!(res->per_class = calloc((size_t)classes, sizeof *res->per_class)))
        return gr_fail(GR_ERR_OUT_OF_MEMORY, "eval: results");
    return gr_eval_summarize(ev, a->metric, res->per_class, &res->sum);
}

static gr_status run_precision(const eval_args *a, const gr_model *model, const gr_model_info *info,
                               const name_list *images, const char *const *calib, gr_precision prec,
                               eval_result *res, long long *n_gt, int *n_missing)
{
    double start = now_seconds();
    eval_batch eb = {0};
    gr_eval *ev = NULL;
    gr_status st = eval_batch_open(a, model, calib, prec, &eb);
    if (st == GR_OK)
        st = gr_eval_create(info->classes, &ev);
    if (st == GR_OK)
        st = eval_images(a, info, images, &eb, ev, n_missing);
    res->prec = prec;
    if (st == GR_OK)
        st = finish_result(a, ev, info->classes, res, n_gt);
    res->seconds = now_seconds() - start;
    gr_eval_destroy(ev);
    eval_batch_close(&eb);
    return st;
}

/* ---- output ------------------------------------------------------------------------------- */

/* What the results are of: a model's name, size and class names, or a results file's. */
typedef struct eval_subject {
    const char *name;       /* the model, or the --detections file */
    int width, height;      /* the model's input; 0 for a results file */
    int classes;
    const char **class_names; /* [classes] */
} eval_subject;

/* An AP, or "-" for none (-1). */
static const char *ap_text(double v, char buf[16])
{
    if (v < 0)
        return "-";
    snprintf(buf, 16, "%.4f", v);
    return buf;
}

static void print_text(const eval_subject *sub, gr_ap_method metric, const eval_result *r)
{
    const gr_eval_summary *m = &r->sum;
    printf("%s  mAP@0.5 %.4f  mAP@0.5:0.95 %.4f  mAP@0.75 %.4f  (%lld detections)\n",
           sub->width ? gr_precision_name(r->prec) : "detections", m->map50, m->map50_95,
           m->map75, r->dets);
    char s[16], md[16], l[16];
    if (metric == GR_AP_COCO)
        printf("  mAP@0.5:0.95 by area: small %s  medium %s  large %s\n",
               ap_text(m->map_area[0], s), ap_text(m->map_area[1], md),
               ap_text(m->map_area[2], l));
    printf("  %-16s %6s %7s %8s %12s\n", "class", "GT", "dets", "AP@0.5", "AP@0.5:0.95");
    for (int c = 0; c < sub->classes; c++) {
        const gr_eval_class *k = &r->per_class[c];
        if (k->n_gt == 0 && k->n_dets == 0)
            continue;
        if (k->n_gt == 0)
            printf("  %-16.16s %6d %7d %8s %12s\n", sub->class_names[c], 0, k->n_dets, "-", "-");
        else
            printf("  %-16.16s %6d %7d %8.4f %12.4f\n", sub->class_names[c], k->n_gt, k->n_dets,
                   k->ap[0], k->ap50_95);
    }
}

static void print_json(const eval_subject *sub, gr_ap_method metric, const eval_result *res,
                       int n_res, int n_images, long long n_gt)
{
    printf(sub->width ? "{\"model\": " : "{\"detections\": ");
    gr_cli_json_string(stdout, sub->name);
    printf(", \"metric\": \"%s\", \"images\": %d, \"ground_truth\": %lld, \"results\": [",
           metric_name(metric), n_images, n_gt);
    for (int i = 0; i < n_res; i++) {
        const eval_result *r = &res[i];
        const gr_eval_summary *m = &r->sum;
        printf("%s\n  {\"precision\": \"%s\", \"map50\": %.6f, \"map50_95\": %.6f, "
               "\"map75\": %.6f, \"map_small\": %.6f, \"map_medium\": %.6f, "
               "\"map_large\": %.6f, \"detections\": %lld, \"classes\": [", i ? "," : "",
               sub->width ? gr_precision_name(r->prec) : "detections", m->map50, m->map50_95,
               m->map75, m->map_area[0], m->map_area[1], m->map_area[2], r->dets);
        int first = 1;
        for (int c = 0; c < sub->classes; c++) {
            const gr_eval_class *k = &r->per_class[c];
            if (k->n_gt == 0)
                continue;
            printf("%s\n    {\"class\": ", first ? "" : ",");
            gr_cli_json_string(stdout, sub->class_names[c]);
            printf(", \"class_id\": %d, \"ground_truth\": %d, \"detections\": %d, \"ap50\": %.6f, "
                   "\"ap50_95\": %.6f}", c, k->n_gt, k->n_dets, k->ap[0], k->ap50_95);
            first = 0;
        }
        printf("]}");
    }
    printf("\n]}\n");
}

/* The model, checked: images need 3 channels, mAP needs a detection head. */
static int load_model(const eval_args *a, gr_model **model, gr_model_info *info)
{
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = a->cfg ? NULL : a->model;
    mo.cfg_path = a->cfg;
    mo.weights_path = a->weights;
    gr_status st = gr_model_load(&mo, model);
    if (st == GR_OK && a->names)
        st = gr_model_set_class_names(*model, a->names);
    if (st != GR_OK)
        return fail(st, NULL);
    gr_model_get_info(*model, info);
    int rc = gr_cli_check_image_channels(info->channels, info->height, info->width,
                                         a->cfg ? a->cfg : info->name);
    if (rc != GR_EXIT_OK)
        return rc;
    if (info->classes < 1) {
        fprintf(stderr, "graphrun eval: %s has no detection head\n", info->name);
        return GR_EXIT_INPUT;
    }
    if (info->synthetic_weights)
        fprintf(stderr, "graphrun eval: weights: SYNTHETIC - expect a mAP near 0; pass --weights "
                        "FILE\n");
    return GR_EXIT_OK;
}

/* int8 / auto calibration images: --calib-images, or the shapes model's own calibration set;
 * calib[] stays empty (the engine's default) otherwise. */
typedef struct calib_set {
    name_list names;
    char *paths[MAX_CALIB_IMAGES];
    const char *list[MAX_CALIB_IMAGES + 1]; /* NULL-terminated */
} calib_set;

static int load_calib(const eval_args *a, calib_set *c)
{
    const char *dir = a->calib_images;
    char shapes_calib[4096];
    if (!dir && !a->cfg && !strcmp(a->model, "shapes")) {
        gr_status st = gr_data_path("shapes-calib", shapes_calib, sizeof shapes_calib);
        if (st != GR_OK)
            return fail(st, "int8 calibration images");
        dir = shapes_calib;
    }
    int needed = 0;
    for (int i = 0; i < a->n_precs; i++)
        needed |= a->precs[i] == GR_PREC_INT8 || a->precs[i] == GR_PREC_AUTO;
    if (!needed || !dir)
        return GR_EXIT_OK;
    gr_status st = list_images(dir, MAX_CALIB_IMAGES, &c->names);
    if (st != GR_OK)
        return fail(st, "int8 calibration images");
    for (int k = 0; k < c->names.n; k++) {
        size_t len = strlen(dir) + strlen(c->names.names[k]) + 2;
        if (!(c->paths[k] = malloc(len)))
            return fail(gr_fail(GR_ERR_OUT_OF_MEMORY, "calibration paths"), NULL);
        join_path(c->paths[k], len, dir, c->names.names[k]);
        c->list[k] = c->paths[k];
    }
    return GR_EXIT_OK;
}

static void calib_free(calib_set *c)
{
    for (int k = 0; k < MAX_CALIB_IMAGES; k++)
        free(c->paths[k]);
    names_free(&c->names);
}

static void print_results(const eval_args *a, const eval_subject *sub, const eval_result *res,
                          int n_res, int n_images, long long n_gt)
{
    if (a->json) {
        print_json(sub, a->metric, res, n_res, n_images, n_gt);
        return;
    }
    if (sub->width)
        printf("model %s (%dx%d, %d classes): %d images, %lld ground-truth boxes; detections "
               "above %g, NMS %g; metric %s\n", sub->name, sub->width, sub->height, sub->classes,
               n_images, n_gt, (double)a->thresh, (double)a->nms, metric_name(a->metric));
    else
        printf("detections %s (%d classes): %d images, %lld ground-truth boxes; metric %s\n",
               sub->name, sub->classes, n_images, n_gt, metric_name(a->metric));
    for (int i = 0; i < n_res; i++)
        print_text(sub, a->metric, &res[i]);
}

/* ---- COCO files (--coco-annotations, --detections) ---------------------------------------- */

/* A COCO image id, its index in the file and its position in the run (-1: listed in the file,
 * not in the run). */
typedef struct id_pos {
    long long id;
    int index, pos;
} id_pos;

static int by_image_id(const void *a, const void *b)
{
    long long x = ((const id_pos *)a)->id, y = ((const id_pos *)b)->id;
    return (x > y) - (x < y);
}

static const id_pos *find_image(const id_pos *ix, int n, long long id)
{
    id_pos key = {id, 0, 0};
    return bsearch(&key, ix, (size_t)n, sizeof *ix, by_image_id);
}

static int category_index(const gr_coco *c, int id)
{
    for (int k = 0; k < c->n_categories; k++)
        if (c->categories[k].id == id)
            return k;
    return -1;
}

/* Where a file's boxes go: images by id (sorted), classes by category index. */
typedef struct box_target {
    const char *path;      /* the file the boxes come from, for messages */
    const id_pos *images;
    int n_images;
    const gr_coco *truth;  /* its categories */
    const int *class_of;   /* [n_categories] */
    int n_pos;             /* images of the run */
} box_target;

static gr_status box_class(const box_target *t, const gr_coco_box *b, int *cls)
{
    int k = category_index(t->truth, b->category_id);
    if (k < 0)
        return gr_fail(GR_ERR_PARSE, "%s: category_id %d is not among the annotations' "
                                     "categories", t->path, b->category_id);
    *cls = t->class_of[k];
    if (*cls < 0)
        return gr_fail(GR_ERR_PARSE, "%s: category %d (\"%s\") is none of the model's classes "
                                     "(docs/eval.md: how categories map to classes)", t->path,
                       b->category_id, t->truth->categories[k].name);
    return GR_OK;
}

/* Where boxes go: per image of the run, the boxes and (ground truth) their areas and crowd
 * flags; each array [n_pos], its rows allocated here. */
typedef struct box_groups {
    gr_detection **box;
    double **area;         /* NULL for results */
    unsigned char **crowd; /* NULL for results */
    int *n;
} box_groups;

/* A ground-truth box COCOeval could never use: zero width or height, or outside its image (the
 * size the file gives, with BOX_SLACK). */
static gr_status check_truth_box(const box_target *t, long long i, const gr_coco_box *b,
                                 const gr_coco_image *im)
{
    const double *v = b->bbox;
    if (v[2] <= 0 || v[3] <= 0)
        return gr_fail(GR_ERR_PARSE, "%s: annotation %lld (image_id %lld): bbox of zero width or "
                                     "height", t->path, i, b->image_id);
    double sx = im->width * BOX_SLACK + 1, sy = im->height * BOX_SLACK + 1;
    if (im->width > 0 && im->height > 0 &&
        (v[0] < -sx || v[1] < -sy || v[0] + v[2] > im->width + sx ||
         v[1] + v[3] > im->height + sy))
        return gr_fail(GR_ERR_PARSE, "%s: annotation %lld (image_id %lld): bbox [%g, %g, %g, %g] "
                                     "is outside its %dx%d image", t->path, i, b->image_id, v[0],
                       v[1], v[2], v[3], im->width, im->height);
    return GR_OK;
}

/* The file's boxes grouped per image of the run, as detections in pixels (ground truth: with
 * its areas, the `area` member or else the bbox's, and crowd flags, counted in *crowd); a box of
 * an image the annotations do not list is an error, one of an image listed but not in the run
 * is left out. */
static gr_status group_boxes(const box_target *t, const gr_coco *c, const box_groups *g,
                             long long *crowd)
{
    for (int pass = 0; pass < 2; pass++) {
        for (int p = 0; p < t->n_pos; p++) {
            int k = g->n[p];
            if (pass && k && (!(g->box[p] = calloc((size_t)k, sizeof **g->box)) ||
                              (g->area && !(g->area[p] = calloc((size_t)k, sizeof **g->area))) ||
                              (g->crowd && !(g->crowd[p] = calloc((size_t)k, 1)))))
                return gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory", t->path);
            g->n[p] = 0;
        }
        for (long long i = 0; i < c->n_boxes; i++) {
            const gr_coco_box *b = &c->boxes[i];
            const id_pos *im = find_image(t->images, t->n_images, b->image_id);
            if (!im)
                return gr_fail(GR_ERR_PARSE, "%s: box %lld: image_id %lld is not among the "
                                             "annotations' images", t->path, i, b->image_id);
            int cls = -1;
            GR_TRY(box_class(t, b, &cls));
            if (g->area && !pass)
                GR_TRY(check_truth_box(t, i, b, &t->truth->images[im->index]));
            *crowd += g->crowd && !pass && b->iscrowd;
            if (im->pos < 0)
                continue;
            int k = g->n[im->pos]++;
            if (!pass)
                continue;
            gr_detection *d = &g->box[im->pos][k];
            d->class_id = cls;
            d->prob = (float)b->score;
            d->left = (float)b->bbox[0];
            d->top = (float)b->bbox[1];
            d->right = (float)(b->bbox[0] + b->bbox[2]);
            d->bottom = (float)(b->bbox[1] + b->bbox[3]);
            if (g->area)
                g->area[im->pos][k] = b->has_area ? b->area : b->bbox[2] * b->bbox[3];
            if (g->crowd)
                g->crowd[im->pos][k] = (unsigned char)(b->iscrowd != 0);
        }
    }
    return GR_OK;
}

static void free_rows(void **rows, int n)
{
    for (int p = 0; rows && p < n; p++)
        free(rows[p]);
    free(rows);
}

static void free_groups(box_groups *g, int n)
{
    free_rows((void **)g->box, n);
    free_rows((void **)g->area, n);
    free_rows((void **)g->crowd, n);
    free(g->n);
    memset(g, 0, sizeof *g);
}

/* n rows of groups (with areas and crowd flags for ground truth). */
static int alloc_groups(box_groups *g, int n, int truth)
{
    g->box = calloc((size_t)n, sizeof *g->box);
    g->n = calloc((size_t)n, sizeof *g->n);
    if (truth) {
        g->area = calloc((size_t)n, sizeof *g->area);
        g->crowd = calloc((size_t)n, sizeof *g->crowd);
    }
    return g->box && g->n && (!truth || (g->area && g->crowd));
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Two categories of one name: mapping by name could not tell them apart. */
static gr_status check_category_names(const char *path, const gr_coco *c)
{
    for (int k = 0; k < c->n_categories; k++)
        for (int j = 0; j < k; j++)
            if (!strcmp(c->categories[k].name, c->categories[j].name))
                return gr_fail(GR_ERR_PARSE, "%s: categories %d and %d have the same name \"%s\"",
                               path, c->categories[j].id, c->categories[k].id,
                               c->categories[k].name);
    return GR_OK;
}

/* Each category's model class: by name when every category's name is a class name of the
 * model; when none is, for a model of COCO's 80 classes, COCO's id (coco80_to_91 inverted), else
 * the id is the 0-based class (what `graphrun --format coco` writes for such a model), said on
 * stderr. Some names matching and others not is an error: neither way can be right. -1: none. */
static gr_status map_categories(const char *path, const gr_coco *c, const gr_model *model,
                                int classes, int *class_of)
{
    GR_TRY(check_category_names(path, c));
    int named = 0, first_unnamed = -1;
    for (int k = 0; k < c->n_categories; k++) {
        class_of[k] = -1;
        for (int m = 0; m < classes && class_of[k] < 0; m++)
            if (!strcmp(c->categories[k].name, gr_model_class_name(model, m)))
                class_of[k] = m;
        named += class_of[k] >= 0;
        if (class_of[k] < 0 && first_unnamed < 0)
            first_unnamed = k;
    }
    if (named == c->n_categories)
        return GR_OK;
    if (named > 0)
        return gr_fail(GR_ERR_PARSE, "%s: %d of its %d category names are the model's class "
                                     "names but category %d (\"%s\") is not: give --names FILE "
                                     "with every category's name (docs/eval.md)", path, named,
                       c->n_categories, c->categories[first_unnamed].id,
                       c->categories[first_unnamed].name);
    for (int k = 0; k < c->n_categories; k++) {
        int id = c->categories[k].id;
        class_of[k] = classes == 80 ? gr_coco91_to_80(id) : id < classes ? id : -1;
    }
    fprintf(stderr, "graphrun eval: no category name of %s is a class name of the model: "
                    "categories mapped by id (%s)\n", path,
            classes == 80 ? "COCO's 91 ids" : "category_id = class");
    return GR_OK;
}

static int by_base_name(const void *a, const void *b)
{
    return strcmp(base_name(**(char *const *const *)a), base_name(**(char *const *const *)b));
}

/* Two images of one file name (its last component): the folder's image would be both. */
static gr_status check_file_names(const char *path, const gr_coco *c)
{
    char **names = malloc((size_t)c->n_images * sizeof *names);
    char ***refs = malloc((size_t)c->n_images * sizeof *refs);
    gr_status st = names && refs ? GR_OK : gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    for (int i = 0; st == GR_OK && i < c->n_images; i++) {
        names[i] = c->images[i].file_name;
        refs[i] = &names[i];
    }
    if (st == GR_OK && c->n_images > 1)
        qsort(refs, (size_t)c->n_images, sizeof *refs, by_base_name);
    for (int i = 1; st == GR_OK && i < c->n_images; i++)
        if (!strcmp(base_name(*refs[i]), base_name(*refs[i - 1])))
            st = gr_fail(GR_ERR_PARSE, "%s: images %lld and %lld have the same file_name \"%s\"",
                         path, c->images[refs[i - 1] - names].id, c->images[refs[i] - names].id,
                         base_name(*refs[i]));
    free(names);
    free(refs);
    return st;
}

/* --coco-annotations: the ground truth of each image of the run (matched by file name). */
static gr_status read_truth(const char *path, const gr_model *model, int classes,
                            const name_list *images, coco_truth *t)
{
    gr_coco c;
    GR_TRY(gr_coco_read_instances(path, &c));
    memset(t, 0, sizeof *t);
    t->n_images = images->n;
    id_pos *ix = calloc((size_t)c.n_images, sizeof *ix);
    int *class_of = calloc((size_t)c.n_categories, sizeof *class_of);
    box_groups g = {0};
    int ok = alloc_groups(&g, images->n, 1);
    t->width = calloc((size_t)images->n, sizeof *t->width);
    t->height = calloc((size_t)images->n, sizeof *t->height);
    gr_status st = ix && class_of && ok && t->width && t->height
                       ? check_file_names(path, &c)
                       : gr_fail(GR_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    int matched = 0;
    for (int i = 0; st == GR_OK && i < c.n_images; i++) {
        const char *want = base_name(c.images[i].file_name);
        char *const *hit = bsearch(&want, images->names, (size_t)images->n, sizeof *images->names,
                                   by_name);
        int pos = hit ? (int)(hit - images->names) : -1;
        ix[i] = (id_pos){c.images[i].id, i, pos};
        if (hit) {
            t->width[pos] = c.images[i].width;
            t->height[pos] = c.images[i].height;
        }
        matched += hit != NULL;
    }
    if (st == GR_OK && matched == 0)
        st = gr_fail(GR_ERR_PARSE, "%s: none of its %d images (file_name) is in the folder",
                     path, c.n_images);
    t->unlisted = images->n - matched;
    if (st == GR_OK) {
        qsort(ix, (size_t)c.n_images, sizeof *ix, by_image_id);
        st = map_categories(path, &c, model, classes, class_of);
    }
    if (st == GR_OK) {
        box_target target = {path, ix, c.n_images, &c, class_of, images->n};
        st = group_boxes(&target, &c, &g, &t->crowd);
    }
    t->boxes = g.box;
    t->area = g.area;
    t->crowd_flag = g.crowd;
    t->n = g.n;
    free(ix);
    free(class_of);
    gr_coco_free(&c);
    return st;
}

static void free_truth(coco_truth *t)
{
    box_groups g = {t->boxes, t->area, t->crowd_flag, t->n};
    free_groups(&g, t->n_images);
    free(t->width);
    free(t->height);
}

/* --detections: the results file against the annotations, image by image in increasing id (as
 * pycocotools, so that ties of score rank alike), no model. Classes are the annotations'
 * categories in their order. */
static gr_status score_detections(const eval_args *a, const gr_coco *truth, eval_result *res,
                                  long long *n_gt)
{
    int n = truth->n_images;
    gr_coco dets = {0};
    id_pos *ix = calloc((size_t)n, sizeof *ix);
    int *class_of = calloc((size_t)truth->n_categories, sizeof *class_of);
    box_groups gt = {0}, found = {0};
    int ok = alloc_groups(&gt, n, 1) && alloc_groups(&found, n, 0);
    gr_eval *ev = NULL;
    long long crowd = 0, unused = 0;
    gr_status st = ix && class_of && ok ? gr_coco_read_results(a->detections, &dets)
                                        : gr_fail(GR_ERR_OUT_OF_MEMORY, "eval: out of memory");
    for (int i = 0; st == GR_OK && i < n; i++)
        ix[i] = (id_pos){truth->images[i].id, i, i};
    for (int k = 0; k < truth->n_categories; k++)
        class_of[k] = k;
    if (st == GR_OK) {
        qsort(ix, (size_t)n, sizeof *ix, by_image_id);
        box_target t = {a->coco_annotations, ix, n, truth, class_of, n};
        st = group_boxes(&t, truth, &gt, &crowd);
        t.path = a->detections;
        if (st == GR_OK)
            st = group_boxes(&t, &dets, &found, &unused);
    }
    if (st == GR_OK)
        st = gr_eval_create(truth->n_categories, &ev);
    for (int k = 0; st == GR_OK && k < n; k++) {
        int i = ix[k].pos;
        st = gr_eval_add_image_coco(ev, found.box[i], found.n[i], gt.box[i], gt.n[i], gt.area[i],
                                    gt.crowd[i]);
    }
    if (st == GR_OK)
        st = finish_result(a, ev, truth->n_categories, res, n_gt);
    if (st == GR_OK && crowd)
        fprintf(stderr, "graphrun eval: %lld crowd annotations (iscrowd 1)%s\n", crowd,
                a->metric == GR_AP_COCO ? "" : " left out");
    gr_eval_destroy(ev);
    free_groups(&gt, n);
    free_groups(&found, n);
    free(ix);
    free(class_of);
    gr_coco_free(&dets);
    return st;
}

static int eval_detections(const eval_args *a)
{
    gr_coco truth;
    gr_status st = gr_coco_read_instances(a->coco_annotations, &truth);
    if (st != GR_OK)
        return fail(st, NULL);
    const char **names = calloc((size_t)truth.n_categories, sizeof *names);
    eval_result res = {0};
    long long n_gt = 0;
    st = names ? score_detections(a, &truth, &res, &n_gt)
               : gr_fail(GR_ERR_OUT_OF_MEMORY, "eval: out of memory");
    int rc = st == GR_OK ? GR_EXIT_OK : fail(st, NULL);
    if (rc == GR_EXIT_OK) {
        for (int k = 0; k < truth.n_categories; k++)
            names[k] = truth.categories[k].name;
        eval_subject sub = {a->detections, 0, 0, truth.n_categories, names};
        print_results(a, &sub, &res, 1, truth.n_images, n_gt);
    }
    free(res.per_class);
    free(names);
    gr_coco_free(&truth);
    return rc;
}

/* The model's subject for the report: its name, input and class names. */
static const char **model_class_names(const gr_model *model, int classes)
{
    const char **names = calloc((size_t)classes, sizeof *names);
    for (int c = 0; names && c < classes; c++)
        names[c] = gr_model_class_name(model, c);
    return names;
}

/* Every precision asked, then the report. */
static int eval_model(const eval_args *a, const gr_model *model, const gr_model_info *info,
                      const name_list *images, const calib_set *calib)
{
    eval_result res[3];
    memset(res, 0, sizeof res);
    long long n_gt = 0;
    int n_missing = 0, rc = GR_EXIT_OK;
    for (int i = 0; i < a->n_precs && rc == GR_EXIT_OK; i++) {
        gr_status st = run_precision(a, model, info, images, calib->list[0] ? calib->list : NULL,
                                     a->precs[i], &res[i], &n_gt, &n_missing);
        if (st != GR_OK)
            rc = fail(st, NULL);
        else
            fprintf(stderr, "graphrun eval: %s: %d images in %.1f s\n",
                    gr_precision_name(a->precs[i]), images->n, res[i].seconds);
    }
    if (rc == GR_EXIT_OK && n_missing)
        fprintf(stderr, "graphrun eval: %d images have no label file in %s (no objects)\n",
                n_missing, a->labels);
    const char **names = rc == GR_EXIT_OK ? model_class_names(model, info->classes) : NULL;
    if (rc == GR_EXIT_OK && !names)
        rc = fail(gr_fail(GR_ERR_OUT_OF_MEMORY, "eval: out of memory"), NULL);
    if (rc == GR_EXIT_OK) {
        eval_subject sub = {info->name, info->width, info->height, info->classes, names};
        print_results(a, &sub, res, a->n_precs, images->n, n_gt);
    }
    free(names);
    for (int i = 0; i < 3; i++)
        free(res[i].per_class);
    return rc;
}

/* --coco-annotations: read once for every precision, with what it leaves out said. */
static int load_truth(eval_args *a, const gr_model *model, const gr_model_info *info,
                      const name_list *images, coco_truth *truth)
{
    gr_status st = read_truth(a->coco_annotations, model, info->classes, images, truth);
    if (st != GR_OK)
        return fail(st, NULL);
    a->truth = truth;
    if (truth->unlisted)
        fprintf(stderr, "graphrun eval: %d images of %s are not in %s (no objects)\n",
                truth->unlisted, a->images, a->coco_annotations);
    if (truth->crowd)
        fprintf(stderr, "graphrun eval: %lld crowd annotations (iscrowd 1)%s\n", truth->crowd,
                a->metric == GR_AP_COCO ? "" : " left out");
    return GR_EXIT_OK;
}

/* YOLO labels: the folder must be one, and hold a label file of at least one image (else every
 * image would score as having no objects). */
static gr_status check_labels(const eval_args *a, const name_list *images)
{
    struct stat sb;
    if (stat(a->labels, &sb) != 0)
        return gr_fail(GR_ERR_IO, "--labels %s: %s", a->labels, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return gr_fail(GR_ERR_IO, "--labels %s: not a folder", a->labels);
    for (int i = 0; i < images->n; i++) {
        char full[4200];
        label_path(full, sizeof full, a->labels, images->names[i]);
        if (stat(full, &sb) == 0)
            return GR_OK;
    }
    return gr_fail(GR_ERR_PARSE, "no ground truth: none of the %d images has a label file "
                                 "<stem>.txt in %s", images->n, a->labels);
}

int gr_cli_eval(int argc, char **argv)
{
    eval_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    if (a.detections)
        return eval_detections(&a);
    gr_model *model = NULL;
    gr_model_info info;
    name_list images = {0};
    calib_set calib = {0};
    coco_truth truth = {0};
    rc = load_model(&a, &model, &info);
    gr_status st = rc == GR_EXIT_OK ? list_images(a.images, a.max_images, &images) : GR_OK;
    if (st != GR_OK)
        rc = fail(st, NULL);
    if (rc == GR_EXIT_OK && a.coco_annotations)
        rc = load_truth(&a, model, &info, &images, &truth);
    else if (rc == GR_EXIT_OK && (st = check_labels(&a, &images)) != GR_OK)
        rc = fail(st, NULL);
    if (rc == GR_EXIT_OK)
        rc = load_calib(&a, &calib);
    if (rc == GR_EXIT_OK && a.device == GR_DEVICE_AUTO && gr_cuda_device_count() == 0)
        fprintf(stderr,
                "graphrun eval: no CUDA device visible: running the CPU reference (slow)\n");
    if (rc == GR_EXIT_OK)
        rc = eval_model(&a, model, &info, &images, &calib);
    free_truth(&truth);
    calib_free(&calib);
    names_free(&images);
    gr_model_destroy(model);
    return rc;
}
