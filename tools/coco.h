/* COCO JSON files for `graphrun eval`: the instances file of a dataset (instances_val2017.json:
 * images, annotations, categories) and a results file (an array of {image_id, category_id, bbox,
 * score}, what `graphrun --format coco` writes). A small reader for this subset of JSON: members
 * it does not use (segmentation, licenses, info, ...) are checked for syntax and skipped, so a
 * 450 MB train file costs its size in memory once, not a tree. Every error is one line naming the
 * file and the byte offset (from 0) where it was found. */
#ifndef GR_TOOLS_COCO_H
#define GR_TOOLS_COCO_H

#include "graphrun/runtime.h"

typedef struct gr_coco_image {
    char *file_name;
    long long id;
    int width, height; /* 0 when the file does not say */
} gr_coco_image;

/* An annotation or a result: bbox is [x, y, width, height] in pixels. */
typedef struct gr_coco_box {
    long long image_id;
    int category_id;
    int iscrowd;       /* annotations: 1 for a crowd region */
    double bbox[4];
    double area;       /* annotations: the `area` member (COCOeval's area ranges use it) */
    int has_area;      /* 0: the file has no `area` for it */
    double score;      /* results */
} gr_coco_box;

typedef struct gr_coco_category {
    int id;
    char *name;
} gr_coco_category;

typedef struct gr_coco {
    gr_coco_image *images;
    int n_images;
    gr_coco_box *boxes;
    long long n_boxes;
    gr_coco_category *categories;
    int n_categories;
} gr_coco;

/* An instances file: images[] (id and file_name required, unique ids), annotations[] (image_id,
 * category_id, bbox required, iscrowd 0 when absent, area a number >= 0 when present; image and
 * category must be listed),
 * categories[] (id, name). */
gr_status gr_coco_read_instances(const char *path, gr_coco *out);

/* A results file: boxes[] (image_id, category_id, bbox, score required); images and categories
 * stay empty. */
gr_status gr_coco_read_results(const char *path, gr_coco *out);

/* The same from memory: text[0..len) (not NUL-terminated) named `name` in messages; results
 * selects a results array. */
gr_status gr_coco_parse(const char *text, size_t len, const char *name, int results,
                        gr_coco *out);

void gr_coco_free(gr_coco *c);

#endif
