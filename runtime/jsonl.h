/* The JSON record of one image: the line `graphrun --input DIR` writes (README, "Result
 * formats"), the record inside --format json's document, and gr_file_result.jsonl (runtime.h,
 * gr_files_options.jsonl). One formatter for all of them: tools/results.c and tools/json.c call it
 * for the CLI, runtime/files.c on the folder pipeline's threads.
 *
 *   {"input": P[, "frame": F, "time": T], "width": W, "height": H, "detections": [D, ...]}
 *   {"input": P[, "frame": F, "time": T], "error": MESSAGE}          the image failed
 *   {"input": P, "width": W, "height": H, "error": "its outputs hold N non-finite values (NaN/Inf):
 *     activations overflow; use --prec fp32 or int8", "nonfinite": N}   (frame/time as above)
 *   D = {"class": NAME, "class_id": C, "prob": %.6f, "objectness": %.6f, "left": %.1f,
 *        "top": %.1f, "right": %.1f, "bottom": %.1f}
 *
 * Strings are JSON string literals of any bytes: valid UTF-8 kept, every byte that starts no
 * well-formed UTF-8 sequence written as \ufffd, control characters and DEL as \u00XX. A class
 * outside the names is "class N" (gr_model_class_name's fallback).
 *
 * Text is appended to a gr_bytes (base/bytes.h), no NUL, no newline; b->failed says memory ran
 * out. Pure: any thread, any number at once. */
#ifndef GR_RUNTIME_JSONL_H
#define GR_RUNTIME_JSONL_H

#include <stddef.h>

#include "base/bytes.h"
#include "graphrun/runtime.h"

/* Class names by id: names[0..n-1]; names NULL and n 0 for none. */
typedef struct gr_class_names {
    const char *const *names;
    int n;
} gr_class_names;

/* The model's own names (borrowed: valid while the model lives); none for NULL. */
gr_class_names gr_model_names(const gr_model *model);

typedef struct gr_jsonl_image {
    const char *path;       /* "input" */
    long long frame;        /* a video frame's index, with time_s; -1 for an image (neither) */
    double time_s;
    int width, height;      /* the image's pixels (the boxes are in them) */
    const char *error;      /* non-NULL: the image failed, its one-line message */
    size_t nonfinite;       /* NaN/Inf among its outputs (no error): the non-finite record */
} gr_jsonl_image;

/* A JSON string literal of s. */
void gr_json_string(gr_bytes *b, const char *s);

/* `"detections": [D, ...]`, each object after `indent` ("" keeps the line whole). */
void gr_json_detections(gr_bytes *b, gr_class_names names, const gr_detection *dets, int n,
                        const char *indent);

/* The image's record (dets ignored for an error or a non-finite record). */
void gr_json_record(gr_bytes *b, const gr_jsonl_image *im, gr_class_names names,
                    const gr_detection *dets, int n);

#endif
