/* The result writer of the detecting commands: the formats of tools/results.h.
 *
 * Numbers that a reader parses back (COCO's bbox and score) are written with the fewest digits
 * that read back as the same float, so `graphrun eval --detections` scores exactly the boxes the
 * run found (tests/cli_formats.sh compares the two mAPs). */
#define _POSIX_C_SOURCE 200809L
#include "tools/results.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "runtime/jsonl.h"
#include "tools/cli.h"

struct gr_results {
    gr_results_options o;
    FILE *f;         /* the results stream (NULL for yolo-txt) */
    int own_file;    /* f was opened here (dest), closed by gr_results_close */
    long long n_records; /* records appended that held something (separators of json, coco) */
    int coco_classes;    /* the model has COCO's 80 classes: category ids through coco80_to_91 */
    const char *dest_name;
};

/* COCO's 91-id space keeps the ids of the 2014 paper's categories that were dropped (12, 26,
 * 29, 30, 45, 66, 68, 69, 71, 83): the 80 of coco.names map onto the rest, in order. */
static const unsigned char coco_ids[80] = {
    1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21,
    22, 23, 24, 25, 27, 28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44,
    46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65,
    67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90};

int gr_coco80_to_91(int class_id)
{
    return class_id >= 0 && class_id < 80 ? coco_ids[class_id] : -1;
}

int gr_coco91_to_80(int category_id)
{
    for (int k = 0; k < 80; k++)
        if (coco_ids[k] == category_id)
            return k;
    return -1;
}

/* The file name without its folder. */
static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Length of the name's stem: up to its last '.', the whole name without one. */
static size_t stem_length(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && dot != name ? (size_t)(dot - name) : strlen(name);
}

long long gr_results_image_id(const char *path, long long index)
{
    const char *name = base_name(path);
    size_t len = stem_length(name);
    if (len == 0 || len > 18)
        return index;
    long long id = 0;
    for (size_t i = 0; i < len; i++) {
        if (name[i] < '0' || name[i] > '9')
            return index;
        id = id * 10 + (name[i] - '0');
    }
    return id;
}

/* The shortest of %.6g..%.9g that reads back as v (%.9g always does for a float). */
static void put_float(FILE *f, float v)
{
    char buf[32];
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
}

/* ---- opening and closing ------------------------------------------------------------------ */

static int write_header(gr_results *r)
{
    const gr_results_options *o = &r->o;
    switch (o->format) {
    case GR_FORMAT_JSON:
        fputs("{\"model\": ", r->f);
        gr_cli_json_string(r->f, o->model_name ? o->model_name : "");
        fprintf(r->f, ", \"synthetic_weights\": %s, \"precision\": \"%s\", \"images\": [",
                o->synthetic_weights ? "true" : "false", o->precision ? o->precision : "");
        break;
    case GR_FORMAT_COCO: fputc('[', r->f); break;
    case GR_FORMAT_CSV:
        fprintf(r->f, "path,%sclass_id,class,conf,x1,y1,x2,y2\n", o->frames ? "frame,time," : "");
        break;
    default: break;
    }
    return GR_EXIT_OK;
}

int gr_results_open(const gr_results_options *o, gr_results **out)
{
    *out = NULL;
    gr_results *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "graphrun: out of memory for the results writer\n");
        return GR_EXIT_OOM;
    }
    r->o = *o;
    gr_model_info info;
    r->coco_classes = gr_model_get_info(o->model, &info) == GR_OK && info.classes == 80;
    if (o->format == GR_FORMAT_YOLO_TXT) {
        int rc = gr_cli_make_dir(o->label_dir);
        if (rc != GR_EXIT_OK) {
            free(r);
            return rc;
        }
        *out = r;
        return GR_EXIT_OK;
    }
    r->dest_name = o->dest ? o->dest : "stdout";
    r->f = o->dest ? fopen(o->dest, "w") : stdout;
    if (!r->f) {
        fprintf(stderr, "graphrun: %s: cannot write the results: %s\n", o->dest, strerror(errno));
        free(r);
        return GR_EXIT_INPUT;
    }
    r->own_file = o->dest != NULL;
    write_header(r);
    *out = r;
    return GR_EXIT_OK;
}

static int check_stream(gr_results *r)
{
    if (!r->own_file)
        return gr_cli_check_stdout();
    if (fflush(r->f) == 0 && !ferror(r->f))
        return GR_EXIT_OK;
    fprintf(stderr, "graphrun: writing the results to %s: %s\n", r->dest_name,
            errno ? strerror(errno) : "write error");
    return GR_EXIT_INPUT;
}

int gr_results_flush(gr_results *r)
{
    return r->f ? check_stream(r) : GR_EXIT_OK;
}

int gr_results_close(gr_results *r)
{
    if (!r)
        return GR_EXIT_OK;
    int rc = GR_EXIT_OK;
    if (r->f) {
        if (r->o.format == GR_FORMAT_JSON)
            fputs(r->n_records ? "\n]}\n" : "]}\n", r->f);
        else if (r->o.format == GR_FORMAT_COCO)
            fputs(r->n_records ? "\n]\n" : "]\n", r->f);
        rc = check_stream(r);
        if (r->own_file && fclose(r->f) != 0 && rc == GR_EXIT_OK) {
            fprintf(stderr, "graphrun: writing the results to %s: %s\n", r->dest_name,
                    strerror(errno));
            rc = GR_EXIT_INPUT;
        }
    }
    free(r);
    return rc;
}

/* ---- records ------------------------------------------------------------------------------ */

/* The object of json and jsonl (without a newline): the library's record (runtime/jsonl.h), the
 * same text as the folder pipeline's gr_file_result.jsonl. 0, or GR_EXIT_OOM (nothing written). */
static int format_json(const gr_results *r, const gr_result_image *im, const gr_detection *dets,
                       int n, FILE *f)
{
    gr_jsonl_image record = {.path = im->path, .frame = im->frame, .time_s = im->time_s,
                             .width = im->width, .height = im->height, .error = im->error,
                             .nonfinite = im->nonfinite};
    gr_bytes text = {0};
    gr_json_record(&text, &record, gr_model_names(r->o.model), dets, n);
    int failed = text.failed;
    if (!failed)
        fwrite(text.data, 1, text.len, f);
    gr_bytes_free(&text);
    return failed ? GR_EXIT_OOM : GR_EXIT_OK;
}

static int category_id(const gr_results *r, int class_id)
{
    return r->coco_classes ? gr_coco80_to_91(class_id) : class_id;
}

/* COCO results: one object per box, ",\n" between them (the writer puts the one between
 * images). */
static void format_coco(const gr_results *r, const gr_result_image *im, const gr_detection *dets,
                        int n, FILE *f)
{
    long long image_id = im->frame >= 0 ? im->frame : gr_results_image_id(im->path, im->index);
    for (int i = 0; i < n; i++) {
        const gr_detection *d = &dets[i];
        fprintf(f, "%s{\"image_id\": %lld, \"category_id\": %d, \"bbox\": [", i ? ",\n" : "",
                image_id, category_id(r, d->class_id));
        put_float(f, d->left);
        fputs(", ", f);
        put_float(f, d->top);
        fputs(", ", f);
        put_float(f, d->right - d->left);
        fputs(", ", f);
        put_float(f, d->bottom - d->top);
        fputs("], \"score\": ", f);
        put_float(f, d->prob);
        fputc('}', f);
    }
}

/* A CSV field: quoted (quotes doubled) when it holds a comma, a quote or a line break. */
static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void format_csv(const gr_results *r, const gr_result_image *im, const gr_detection *dets,
                       int n, FILE *f)
{
    for (int i = 0; i < n; i++) {
        const gr_detection *d = &dets[i];
        csv_field(f, im->path);
        if (r->o.frames)
            fprintf(f, ",%lld,%.6f", im->frame, im->time_s);
        fprintf(f, ",%d,", d->class_id);
        csv_field(f, gr_model_class_name(r->o.model, d->class_id));
        fprintf(f, ",%.6f,%.1f,%.1f,%.1f,%.1f\n", (double)d->prob, (double)d->left,
                (double)d->top, (double)d->right, (double)d->bottom);
    }
}

/* <label_dir>/<stem>.txt (a frame: <stem>_<frame, 6 digits>.txt): empty when nothing was
 * found, so that every image has its file. */
static int write_labels(const gr_results *r, const gr_result_image *im, const gr_detection *dets,
                        int n, char *err, size_t errlen)
{
    const char *name = base_name(im->path);
    char path[4200];
    size_t dir_len = strlen(r->o.label_dir);
    const char *sep = dir_len && r->o.label_dir[dir_len - 1] == '/' ? "" : "/";
    if (im->frame >= 0)
        snprintf(path, sizeof path, "%s%s%.*s_%06lld.txt", r->o.label_dir, sep,
                 (int)stem_length(name), name, im->frame);
    else
        snprintf(path, sizeof path, "%s%s%.*s.txt", r->o.label_dir, sep, (int)stem_length(name),
                 name);
    gr_memfile out; /* written whole by rename (base/bytes.h) */
    FILE *f = gr_memfile_open(&out, path);
    if (!f) {
        snprintf(err, errlen, "%s", gr_last_error());
        return GR_EXIT_INPUT;
    }
    double w = im->width > 0 ? im->width : 1, h = im->height > 0 ? im->height : 1;
    for (int i = 0; i < n; i++) {
        const gr_detection *d = &dets[i];
        double left = d->left, top = d->top, right = d->right, bottom = d->bottom;
        fprintf(f, "%d %.6f %.6f %.6f %.6f", d->class_id, (left + right) / 2.0 / w,
                (top + bottom) / 2.0 / h, (right - left) / w, (bottom - top) / h);
        if (r->o.save_conf)
            fprintf(f, " %.6f", (double)d->prob);
        fputc('\n', f);
    }
    if (gr_memfile_commit(&out, path, "labels") != GR_OK) {
        snprintf(err, errlen, "%s", gr_last_error());
        return GR_EXIT_INPUT;
    }
    return GR_EXIT_OK;
}

void gr_results_text(FILE *f, const gr_model *model, const gr_result_image *im,
                     const gr_detection *dets, int n)
{
    if (im->frame >= 0)
        fprintf(f, "%s frame %lld (%.6f s): ", im->path, im->frame, im->time_s);
    else
        fprintf(f, "%s: ", im->path);
    fprintf(f, "%d detection%s\n", n, n == 1 ? "" : "s");
    for (int i = 0; i < n; i++)
        fprintf(f, "  %-14s %5.1f%%  box left %.0f top %.0f right %.0f bottom %.0f\n",
                gr_model_class_name(model, dets[i].class_id), 100.0 * (double)dets[i].prob,
                (double)dets[i].left, (double)dets[i].top, (double)dets[i].right,
                (double)dets[i].bottom);
}

int gr_results_carries_errors(const gr_results *r)
{
    return r->o.format == GR_FORMAT_JSON || r->o.format == GR_FORMAT_JSONL;
}

int gr_results_format(const gr_results *r, const gr_result_image *im, const gr_detection *dets,
                      int n, FILE *f, char *err, size_t errlen)
{
    err[0] = '\0';
    int failed = im->error || im->nonfinite;
    if (gr_results_carries_errors(r)) {
        if (format_json(r, im, failed ? NULL : dets, failed ? 0 : n, f) != GR_EXIT_OK) {
            snprintf(err, errlen, "%s: out of memory for its record", im->path);
            return GR_EXIT_OOM;
        }
        if (r->o.format == GR_FORMAT_JSONL)
            fputc('\n', f);
        return GR_EXIT_OK;
    }
    if (failed)
        return GR_EXIT_OK;
    switch (r->o.format) {
    case GR_FORMAT_COCO: format_coco(r, im, dets, n, f); break;
    case GR_FORMAT_CSV: format_csv(r, im, dets, n, f); break;
    case GR_FORMAT_YOLO_TXT: return write_labels(r, im, dets, n, err, errlen);
    case GR_FORMAT_TEXT: gr_results_text(f, r->o.model, im, dets, n); break;
    default: break;
    }
    return GR_EXIT_OK;
}

int gr_results_append(gr_results *r, const char *record, size_t len)
{
    if (!r->f || len == 0)
        return GR_EXIT_OK;
    if (r->o.format == GR_FORMAT_JSON)
        fputs(r->n_records ? ",\n  " : "\n  ", r->f);
    else if (r->o.format == GR_FORMAT_COCO)
        fputs(r->n_records ? ",\n" : "\n", r->f);
    fwrite(record, 1, len, r->f);
    r->n_records++;
    return ferror(r->f) ? check_stream(r) : GR_EXIT_OK;
}

int gr_results_write(gr_results *r, const gr_result_image *im, const gr_detection *dets, int n)
{
    char *text = NULL, err[4400];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        fprintf(stderr, "graphrun: out of memory for a record of %s\n", im->path);
        return GR_EXIT_OOM;
    }
    int rc = gr_results_format(r, im, dets, n, f, err, sizeof err);
    int closed = fclose(f) == 0 && text;
    if (rc != GR_EXIT_OK)
        fprintf(stderr, "graphrun: %s\n", err);
    else if (!closed) {
        fprintf(stderr, "graphrun: out of memory for a record of %s\n", im->path);
        rc = GR_EXIT_OOM;
    } else
        rc = gr_results_append(r, text, len);
    free(text);
    return rc;
}
