/* Result formats of the detecting commands (one image, a folder or list, a video's frames): one
 * writer per run, one record per image (README "Result formats", docs/eval.md for COCO ids).
 *
 *   json      {"model": ..., "images": [record, ...]}: one document (the records of jsonl)
 *   jsonl     one JSON object per line and image: {"input", "width", "height", "detections"},
 *             or {"input", "error"} for an image that failed; "frame"/"time" for a video frame
 *   coco      one JSON array of COCO results {"image_id", "category_id", "bbox": [x, y, w, h],
 *             "score"}, boxes in the original image's pixels
 *   yolo-txt  per image <dir>/<stem>.txt, one `class cx cy w h [conf]` line per box, normalised to
 *             the original image; nothing on the results stream
 *   csv       a header, then one row per box: path,class_id,class,conf,x1,y1,x2,y2
 *   text      per image `path: N detections` (a frame: `path frame K (T s): ...`), then one
 *             indented line per box: class, probability, box (what `graphrun --input FILE` prints)
 *
 * Threads: gr_results_format only reads the writer (and writes the image's own label file for
 * yolo-txt), so records are formatted on any thread into their own buffers; gr_results_append and
 * gr_results_close belong to one thread, which appends the records in input order. */
#ifndef GR_TOOLS_RESULTS_H
#define GR_TOOLS_RESULTS_H

#include <stddef.h>
#include <stdio.h>

#include "graphrun/runtime.h"

typedef enum gr_result_format {
    GR_FORMAT_DEFAULT = 0, /* the command's own: text for images one by one, jsonl for a folder */
    GR_FORMAT_JSON,
    GR_FORMAT_JSONL,
    GR_FORMAT_COCO,
    GR_FORMAT_YOLO_TXT,
    GR_FORMAT_CSV,
    GR_FORMAT_TEXT         /* --format text: images one by one print it by default */
} gr_result_format;

#define GR_RESULT_FORMAT_CHOICES "text, json, jsonl, coco, yolo-txt or csv"

/* 1 and *out for a format's name, else 0 (in tools/cli_args.c, the flag parser). */
int gr_result_format_parse(const char *s, gr_result_format *out);
const char *gr_result_format_name(gr_result_format f);

/* COCO's category ids (1..90, with gaps) of the 80 classes a COCO-trained Darknet model
 * predicts, in coco.names order (the standard coco80_to_91 table); -1 outside 0..79. The inverse
 * gives -1 for an id that is none of the 80. */
int gr_coco80_to_91(int class_id);
int gr_coco91_to_80(int category_id);

/* COCO's image_id of an image: the integer its file name's stem is made of (COCO's
 * 000000397133.jpg is 397133; at most 18 digits), else `index`, its position in the run. */
long long gr_results_image_id(const char *path, long long index);

typedef struct gr_results_options {
    gr_result_format format;  /* not GR_FORMAT_DEFAULT */
    const char *dest;         /* results file; NULL = stdout (every format but yolo-txt) */
    const char *label_dir;    /* yolo-txt: the folder of the <stem>.txt files (made if missing) */
    int save_conf;            /* yolo-txt: the box's probability as a 6th column */
    int frames;               /* the records are video frames: csv gets frame,time columns */
    const gr_model *model;    /* class names; 80 classes = COCO's (category ids mapped) */
    const char *model_name;   /* json's header */
    int synthetic_weights;    /* json's header */
    const char *precision;    /* json's header */
} gr_results_options;

typedef struct gr_result_image {
    const char *path;       /* the image (or video) file */
    long long index;        /* its position in the run, from 0 (COCO's fallback image_id) */
    int width, height;      /* the original image's pixels (boxes are in them); 0 unknown */
    long long frame;        /* a video frame's index, -1 for an image */
    double time_s;          /* a video frame's presentation time in seconds */
    const char *error;      /* the image failed (its message): a record only in json/jsonl */
    size_t nonfinite;       /* NaN/Inf values among its outputs (json/jsonl: an error record) */
} gr_result_image;

typedef struct gr_results gr_results;

/* Open the writer: the results file (stdout when dest is NULL) and the header (json's "{...
 * [", coco's "[", csv's header line); yolo-txt makes label_dir. Returns 0, or an exit code after
 * one line on stderr. */
int gr_results_open(const gr_results_options *o, gr_results **out);

/* One image's record (its detections in original pixels) onto f: nothing for an image with an
 * error where the format has no place for one (coco, csv, yolo-txt: the caller reports it).
 * yolo-txt writes the image's <stem>.txt instead. json and jsonl records are the library's
 * (runtime/jsonl.h: the text of gr_file_result.jsonl). Returns 0, or with one line in err:
 * GR_EXIT_INPUT (the label file could not be written: counted by the caller, the run goes on),
 * GR_EXIT_OOM (no memory for the record: nothing written). */
int gr_results_format(const gr_results *r, const gr_result_image *im, const gr_detection *dets,
                      int n, FILE *f, char *err, size_t errlen);

/* The text record of an image or frame onto f (--format text; `graphrun --input FILE` prints
 * it too). */
void gr_results_text(FILE *f, const gr_model *model, const gr_result_image *im,
                     const gr_detection *dets, int n);

/* 1 when an image's error is part of its record (json, jsonl). */
int gr_results_carries_errors(const gr_results *r);

/* Append a record made by gr_results_format (records in input order). Returns 0, or
 * GR_EXIT_INPUT after one line on stderr (the results file cannot be written). */
int gr_results_append(gr_results *r, const char *record, size_t len);

/* The results so far reached their file (fflush, ferror): 0, or GR_EXIT_INPUT after one line. */
int gr_results_flush(gr_results *r);

/* gr_results_format and gr_results_append in one: the writer of a single thread. A label file
 * that cannot be written is one line on stderr and GR_EXIT_INPUT. */
int gr_results_write(gr_results *r, const gr_result_image *im, const gr_detection *dets, int n);

/* The footer, flushed and checked (stdout is left open: main checks it at exit), the writer
 * freed. Returns 0 or GR_EXIT_INPUT after one line on stderr. NULL is a no-op. */
int gr_results_close(gr_results *r);

#endif
