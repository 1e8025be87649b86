/* Built-in models (cfg and class names compiled into the library by cmake/embed.cmake) and class
 * name lists. "yolo" is an alias of yolov2-tiny-voc (20 VOC classes); yolov2-tiny and yolov3-tiny
 * use the 80 COCO classes; "shapes" is the project's own small detector of coloured shapes, whose
 * trained weights ship as a data file (tools/train/train_shapes.py). "darknet19" and "resnet18" are
 * Darknet's ImageNet classifiers (cfg/darknet19.cfg and cfg/resnet18.cfg of pjreddie/darknet,
 * unchanged; 256x256, 1000 classes named by the first 1000 lines of Darknet's
 * data/imagenet.shortnames.list, the order its 1k classifiers output). "yolov4-tiny", "yolov4",
 * "yolov7-tiny" and "yolov4-csp" are AlexeyAB Darknet's COCO detectors (its cfg/<name>.cfg,
 * unchanged below a header comment; docs/darknet.md lists what they add over pjreddie's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/embedded.h"
#include "models/internal.h"
#include "models/net.h"

#define MAX_CLASS_NAMES GR_MAX_DIM
#define MAX_CLASS_NAME_LEN 4096
#define MAX_NAMES_BYTES ((size_t)16 << 20)

typedef struct builtin_model {
    const char *name;  /* as the user writes it */
    const char *model; /* canonical model: <model>.cfg */
    const char *names; /* class names file */
    const char *weights; /* bundled trained weights in the data directory, or NULL */
} builtin_model;

static const builtin_model builtins[] = {
    {"yolo", "yolov2-tiny-voc", "voc.names", NULL},
    {"yolov2-tiny-voc", "yolov2-tiny-voc", "voc.names", NULL},
    {"yolov2-tiny", "yolov2-tiny", "coco.names", NULL},
    {"yolov3-tiny", "yolov3-tiny", "coco.names", NULL},
    {"shapes", "shapes", "shapes.names", "shapes.weights"},
    {"darknet19", "darknet19", "imagenet.names", NULL},
    {"resnet18", "resnet18", "imagenet.names", NULL},
    {"yolov4-tiny", "yolov4-tiny", "coco.names", NULL},
    {"yolov4", "yolov4", "coco.names", NULL},
    {"yolov7-tiny", "yolov7-tiny", "coco.names", NULL},
    {"yolov4-csp", "yolov4-csp", "coco.names", NULL},
};

static const char *const builtin_names[] = {
    "yolo",      "yolov2-tiny-voc", "yolov2-tiny", "yolov3-tiny", "shapes",     "darknet19",
    "resnet18",  "yolov4-tiny",     "yolov4",      "yolov7-tiny", "yolov4-csp", NULL};

static const builtin_model *find_builtin(const char *name)
{
    for (size_t i = 0; name && i < sizeof builtins / sizeof builtins[0]; i++)
        if (strcmp(builtins[i].name, name) == 0)
            return &builtins[i];
    return NULL;
}

const char *gr_net_builtin_weights(const char *name)
{
    const builtin_model *b = find_builtin(name);
    return b ? b->weights : NULL;
}

const gr_embedded_file *gr_embedded_find(const char *name)
{
    if (!name)
        return NULL;
    for (const gr_embedded_file *f = gr_embedded_files; f->name; f++)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

const char *const *gr_net_builtin_names(void) { return builtin_names; }

gr_status gr_net_builtin(const char *name, gr_net **out)
{
    if (!name || !out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_net_builtin: NULL argument");
    *out = NULL;
    const builtin_model *b = find_builtin(name);
    if (!b)
        return gr_fail(GR_ERR_INVALID_ARGUMENT,
                       "unknown built-in model '%s' (built-in: yolo, yolov2-tiny-voc, "
                       "yolov2-tiny, yolov3-tiny, shapes, darknet19, resnet18, yolov4-tiny, "
                       "yolov4, yolov7-tiny, yolov4-csp)",
                       name);
    char cfg_name[GR_NET_NAME_LEN + 8];
    snprintf(cfg_name, sizeof cfg_name, "%s.cfg", b->model);
    const gr_embedded_file *cfg = gr_embedded_find(cfg_name);
    const gr_embedded_file *names = gr_embedded_find(b->names);
    if (!cfg || !names)
        return gr_fail(GR_ERR_INTERNAL, "built-in model '%s': %s is not embedded in the library",
                       name, cfg ? b->names : cfg_name);
    gr_net *net;
    GR_TRY(gr_net_parse(cfg->data, cfg->size, cfg->name, &net));
    gr_status st = gr_net_set_class_names_text(net, names->data, names->size, names->name);
    if (st != GR_OK) {
        gr_net_free(net);
        return st;
    }
    snprintf(net->name, sizeof net->name, "%s", b->model);
    *out = net;
    return GR_OK;
}

static void free_names(char **names, int n)
{
    if (!names)
        return;
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static bool is_name_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

gr_status gr_net_set_class_names_text(gr_net *net, const char *text, size_t len, const char *source)
{
    if (!net || (!text && len > 0))
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_net_set_class_names_text: NULL argument");
    if (!source)
        source = "<names>";
    if (len > MAX_NAMES_BYTES)
        return gr_fail(GR_ERR_LIMIT, "%s: %zu bytes is too large for a class names list", source,
                       len);
    /* First pass: validate and count. */
    int count = 0, line = 1;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && text[i] != '\n') {
            unsigned char ch = (unsigned char)text[i];
            if ((ch < 0x20 && !is_name_space((char)ch)) || ch == 0x7f)
                return gr_fail(GR_ERR_PARSE, "%s:%d: binary data (byte 0x%02x at offset %zu)",
                               source, line, ch, i);
            if (i - start >= MAX_CLASS_NAME_LEN)
                return gr_fail(GR_ERR_LIMIT, "%s:%d: class name longer than %d bytes", source,
                               line, MAX_CLASS_NAME_LEN);
            continue;
        }
        for (size_t k = start; k < i; k++) {
            if (!is_name_space(text[k])) {
                count++;
                break;
            }
        }
        if (count > MAX_CLASS_NAMES)
            return gr_fail(GR_ERR_LIMIT, "%s:%d: more than %d class names", source, line,
                           MAX_CLASS_NAMES);
        line++;
        start = i + 1;
    }
    char **names = count ? gr_calloc((size_t)count, sizeof *names, "class names") : NULL;
    if (count && !names)
        return GR_ERR_OUT_OF_MEMORY;
    /* Second pass: copy each non-blank line without surrounding whitespace. */
    int n = 0;
    start = 0;
    for (size_t i = 0; i <= len && n < count; i++) {
        if (i < len && text[i] != '\n')
            continue;
        size_t b = start, e = i;
        while (b < e && is_name_space(text[b]))
            b++;
        while (e > b && is_name_space(text[e - 1]))
            e--;
        start = i + 1;
        if (b == e)
            continue;
        names[n] = gr_malloc(e - b + 1, "class name");
        if (!names[n]) {
            free_names(names, n);
            return GR_ERR_OUT_OF_MEMORY;
        }
        memcpy(names[n], text + b, e - b);
        names[n][e - b] = '\0';
        n++;
    }
    free_names(net->class_names, net->n_class_names);
    net->class_names = names;
    net->n_class_names = count;
    return GR_OK;
}

gr_status gr_net_load_class_names(gr_net *net, const char *path)
{
    if (!net || !path)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_net_load_class_names: NULL argument");
    char *text;
    size_t len;
    GR_TRY(gr_read_file(path, MAX_NAMES_BYTES, "class names", &text, &len));
    gr_status st = gr_net_set_class_names_text(net, text, len, path);
    free(text);
    return st;
}
