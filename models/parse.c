/* Darknet .cfg parser: text -> gr_net (layer list with inferred shapes, no weights).
 *
 * Accepts what Darknet's parse.c accepts, with the same meaning:
 *   - sections [net]/[network] (must come first), [convolutional]/[conv], [maxpool]/[max],
 *     [local_avgpool]/[local_avg],
 *     [avgpool]/[avg], [route], [shortcut], [upsample], [reorg], [connected]/[conn],
 *     [softmax]/[soft], [region], [yolo], and AlexeyAB's [sam], [scale_channels] and [dropout];
 *     names are case-sensitive as in Darknet;
 *   - `key=value` lines; like Darknet's strip() every whitespace character is removed from a line
 *     first, so "anchors = 1, 2" reads "anchors=1,2"; lines starting with '#' or ';' are comments;
 *     blank lines and CRLF line ends are fine; a repeated key keeps its first value (Darknet's
 *     option_find);
 *   - Darknet's defaults (conv activation logistic, maxpool padding size-1, ...).
 * Stricter than Darknet, because Darknet's leniency hides mistakes or is undefined behaviour:
 *   - a key this section does not know is an error (Darknet only prints "Unused field"); the known
 *     training keys of each section are accepted and ignored;
 *   - keys that would change inference in ways graphrun does not implement (dilation, binary,
 *     dontload, scale_x_y, ...) are accepted only at Darknet's default value, else
 *     GR_ERR_UNSUPPORTED; so are valid Darknet sections graphrun does not run ([crnn], ...);
 *   - numbers must be whole: "16abc" is an error where atoi() would read 16; an inline comment
 *     after a value ("filters=16 # note") is allowed;
 *   - conv `filters`, connected `output`, route `layers` and shortcut/sam/scale_channels `from`
 *     are required;
 *   - anchors must number exactly 2*num; route/shortcut/sam/scale_channels indices must point at
 *     an earlier layer.
 * Every error is one line "source:line: [section] what" with GR_ERR_PARSE, GR_ERR_LIMIT (absurd
 * sizes, too many layers/inputs/anchors) or GR_ERR_UNSUPPORTED. No input crashes the parser:
 * NUL bytes and other control characters, lines over 4096 bytes and files over 16 MiB are
 * rejected before any parsing. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/internal.h"
#include "models/net.h"

#define MAX_LINE 4096
#define MAX_CFG_BYTES ((size_t)16 << 20)

/* ---- section table ---------------------------------------------------------------------- */

/* A key accepted only at Darknet's default value: other values change inference in ways
 * graphrun does not implement. */
typedef struct fixed_key {
    const char *key;
    double value;
} fixed_key;

typedef struct section_spec {
    const char *name;          /* as written between the brackets */
    const char *op_section;    /* the op's Darknet section (ops.def), or NULL for [net] */
    const char *const *keys;   /* keys graphrun reads */
    const char *const *ignored; /* training-only keys: accepted, ignored */
    const fixed_key *fixed;
} section_spec;

#define END_KEYS NULL
#define END_FIXED {NULL, 0.0}

static const char *const net_keys[] = {"width", "height", "channels", "letter_box", END_KEYS};
static const char *const net_ignored[] = {
    "batch", "subdivisions", "learning_rate", "momentum", "decay", "time_steps", "notruth",
    "random", "adam", "B1", "B2", "eps", "inputs", "max_crop", "min_crop", "max_ratio",
    "min_ratio", "center", "clip", "angle", "aspect", "saturation", "exposure", "hue", "policy",
    "burn_in", "power", "step", "scale", "steps", "scales", "gamma", "max_batches", "mosaic",
    "mixup", "cutmix", "flip", "blur", "gaussian_noise", "track",
    "augment_speed", "sequential_subdivisions", "init_sequential_subdivisions", "try_fix_nan",
    "label_smooth_eps", "adversarial_lr", "loss_scale", "dynamic_minibatch", "optimized_memory",
    "workspace_size_limit_MB", "ema_alpha", "resize_step", "attention", "mosaic_bound",
    "contrastive", "unsupervised", "max_chart_loss", "equidistant_point", "burn_in_update",
    "n", END_KEYS};
static const fixed_key no_fixed[] = {END_FIXED};

/* Keys Darknet's parse_network_cfg reads for every layer. */
static const char *const layer_ignored[] = {"truth", "onlyforward", "stopbackward", "dontsave",
                                            "learning_rate", "smooth", "train_only_bn",
                                            "dont_update", "burnin_update", END_KEYS};
static const fixed_key layer_fixed[] = {{"dontload", 0}, {"numload", 0}, {"dontloadscales", 0},
                                        END_FIXED};

static const char *const conv_keys[] = {"filters",  "size",     "stride",  "stride_x",
                                        "stride_y", "dilation", "pad",     "padding",
                                        "groups",   "batch_normalize", "activation", END_KEYS};
static const char *const conv_ignored[] = {"dot", "share_index", "assisted_excitation",
                                           "coordconv", END_KEYS};
static const fixed_key conv_fixed[] = {{"binary", 0},   {"xnor", 0},         {"flipped", 0},
                                       {"antialiasing", 0}, {"deform", 0},
                                       {"sway", 0},     {"rotate", 0},       {"stretch", 0},
                                       {"stretch_sway", 0}, END_FIXED};

static const char *const maxpool_keys[] = {"size", "stride", "padding", "stride_x", "stride_y",
                                           END_KEYS};
/* out_channels is read only with maxpool_depth (maxpool_layer.c); maxpool_zero_nonmax only in
 * training's backward pass. */
static const char *const maxpool_ignored[] = {"out_channels", "maxpool_zero_nonmax", END_KEYS};
static const fixed_key maxpool_fixed[] = {{"maxpool_depth", 0}, {"antialiasing", 0}, END_FIXED};

static const char *const none_keys[] = {END_KEYS};

static const char *const route_keys[] = {"layers", "groups", "group_id", END_KEYS};

static const char *const shortcut_keys[] = {"from", "activation", "weights_type",
                                            "weights_normalization", END_KEYS};
static const fixed_key shortcut_fixed[] = {{"alpha", 1}, {"beta", 1}, END_FIXED};

/* AlexeyAB's [sam] and [scale_channels] (parser.c:990-1030) read from, activation and scale_wh. */
static const char *const sam_keys[] = {"from", "activation", END_KEYS};
static const char *const scale_channels_keys[] = {"from", "scale_wh", "activation", END_KEYS};

static const char *const upsample_keys[] = {"stride", END_KEYS};
static const fixed_key upsample_fixed[] = {{"scale", 1}, END_FIXED};

static const char *const reorg_keys[] = {"stride", END_KEYS};
static const fixed_key reorg_fixed[] = {{"reverse", 0}, {"flatten", 0}, {"extra", 0}, END_FIXED};

static const char *const connected_keys[] = {"output", "activation", "batch_normalize", END_KEYS};

static const char *const softmax_keys[] = {"groups", END_KEYS};
static const char *const softmax_ignored[] = {"noloss", END_KEYS};
static const fixed_key softmax_fixed[] = {{"temperature", 1}, {"spatial", 0}, END_FIXED};

static const char *const region_keys[] = {"anchors", "classes", "coords", "num", "softmax",
                                          END_KEYS};
static const char *const region_ignored[] = {
    "log", "sqrt", "background", "max", "jitter", "rescore", "thresh", "classfix", "absolute",
    "random", "coord_scale", "object_scale", "noobject_scale", "mask_scale", "class_scale",
    "bias_match", "focal_loss", "resize", END_KEYS};

static const char *const yolo_keys[] = {"mask",       "anchors",  "classes",  "num",
                                        "scale_x_y",  "new_coords", "nms_kind", "beta_nms",
                                        END_KEYS};
static const char *const yolo_ignored[] = {
    "max", "jitter", "ignore_thresh", "truth_thresh", "random", "iou_normalizer",
    "cls_normalizer", "obj_normalizer", "delta_normalizer", "iou_loss", "iou_thresh",
    "iou_thresh_kind", "label_smooth_eps", "counters_per_class",
    "objectness_smooth", "focal_loss", "resize", "max_delta", "uc_normalizer",
    "track_history_size", "sim_thresh", "dets_for_track", "dets_for_show", "track_ciou_norm",
    "embedding_layer", "show_details", END_KEYS};

static const char *const none_ignored[] = {END_KEYS};

/* [dropout] is the identity at inference (AlexeyAB's parse_network_cfg makes its output the
 * previous layer's, parser.c dropout case); graphrun runs it as a one-input [route]. */
static const char *const dropout_ignored[] = {"probability", "dropblock", "dropblock_size_rel",
                                              "dropblock_size_abs", END_KEYS};

static const section_spec sections[] = {
    {"net", NULL, net_keys, net_ignored, no_fixed},
    {"network", NULL, net_keys, net_ignored, no_fixed},
    {"convolutional", "convolutional", conv_keys, conv_ignored, conv_fixed},
    {"conv", "convolutional", conv_keys, conv_ignored, conv_fixed},
    {"maxpool", "maxpool", maxpool_keys, maxpool_ignored, maxpool_fixed},
    {"max", "maxpool", maxpool_keys, maxpool_ignored, maxpool_fixed},
    {"avgpool", "avgpool", none_keys, none_ignored, no_fixed},
    /* AlexeyAB's parse_local_avgpool reads maxpool's keys and nothing else */
    {"local_avgpool", "local_avgpool", maxpool_keys, none_ignored, no_fixed},
    {"local_avg", "local_avgpool", maxpool_keys, none_ignored, no_fixed},
    {"avg", "avgpool", none_keys, none_ignored, no_fixed},
    {"route", "route", route_keys, none_ignored, no_fixed},
    {"shortcut", "shortcut", shortcut_keys, none_ignored, shortcut_fixed},
    {"sam", "sam", sam_keys, none_ignored, no_fixed},
    {"scale_channels", "scale_channels", scale_channels_keys, none_ignored, no_fixed},
    {"upsample", "upsample", upsample_keys, none_ignored, upsample_fixed},
    {"reorg", "reorg", reorg_keys, none_ignored, reorg_fixed},
    {"connected", "connected", connected_keys, none_ignored, no_fixed},
    {"conn", "connected", connected_keys, none_ignored, no_fixed},
    {"softmax", "softmax", softmax_keys, softmax_ignored, softmax_fixed},
    {"soft", "softmax", softmax_keys, softmax_ignored, softmax_fixed},
    {"region", "region", region_keys, region_ignored, no_fixed},
    {"yolo", "yolo", yolo_keys, yolo_ignored, no_fixed},
    {"dropout", "route", none_keys, dropout_ignored, no_fixed},
};

/* Valid Darknet sections graphrun does not run. */
static const char *const unsupported_sections[] = {
    "local", "deconvolutional", "deconv", "activation", "logistic", "l2norm", "rnn", "gru",
    "lstm", "crnn", "conv_lstm", "crop", "cost", "detection", "normalization", "lrn",
    "batchnorm", "iseg", "xnor", "Gaussian_yolo",
    "gaussian_yolo", "empty", "silence", "implicit", "implicit_add", "implicit_mul",
    "contrastive", "history", "reorg3d", NULL};

/* Refusals checked in code rather than by the tables above (gr_cfg_refusals lists them too). */
static const gr_cfg_refusal coded_refusals[] = {
    {"maxpool", "stride_x", "stride"},
    {"maxpool", "stride_y", "stride"},
    {"local_avgpool", "stride_x", "stride"},
    {"local_avgpool", "stride_y", "stride"},
    {"shortcut", "from", "one layer"},
    {"shortcut", "weights_type", "none"},
    {"sam", "activation", "no mish/swish/hard_mish"},
    {"scale_channels", "activation", "no mish/swish/hard_mish"},
};

static void add_refusal(gr_cfg_refusal *out, int max, int *n, const char *section,
                        const char *key, const char *accepted)
{
    if (*n < max) {
        out[*n].section = section;
        out[*n].key = key;
        snprintf(out[*n].accepted, sizeof out[*n].accepted, "%s", accepted);
    }
    (*n)++;
}

static void add_fixed(gr_cfg_refusal *out, int max, int *n, const char *section,
                      const fixed_key *list)
{
    for (; list->key; list++) {
        char v[sizeof out->accepted];
        snprintf(v, sizeof v, "%.6g", list->value);
        add_refusal(out, max, n, section, list->key, v);
    }
}

int gr_cfg_refusals(gr_cfg_refusal *out, int max)
{
    int n = 0;
    for (const char *const *s = unsupported_sections; *s; s++)
        add_refusal(out, max, &n, *s, NULL, "");
    add_fixed(out, max, &n, "any layer", layer_fixed);
    const section_spec *seen[sizeof sections / sizeof sections[0]];
    int n_seen = 0;
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
        bool dup = false; /* aliases ([conv], [max]) share their canonical section's list */
        for (int k = 0; k < n_seen; k++)
            dup = dup || seen[k]->fixed == sections[i].fixed;
        if (dup || sections[i].fixed == no_fixed)
            continue;
        seen[n_seen++] = &sections[i];
        add_fixed(out, max, &n, sections[i].name, sections[i].fixed);
    }
    for (size_t i = 0; i < sizeof coded_refusals / sizeof coded_refusals[0]; i++)
        add_refusal(out, max, &n, coded_refusals[i].section, coded_refusals[i].key,
                    coded_refusals[i].accepted);
    return n;
}

static const section_spec *find_section_spec(const char *name)
{
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
        if (strcmp(sections[i].name, name) == 0)
            return &sections[i];
    return NULL;
}

static bool in_list(const char *const *list, const char *key)
{
    for (; *list; list++)
        if (strcmp(*list, key) == 0)
            return true;
    return false;
}

static const fixed_key *find_fixed(const fixed_key *list, const char *key)
{
    for (; list->key; list++)
        if (strcmp(list->key, key) == 0)
            return list;
    return NULL;
}

/* ---- tokenizing -------------------------------------------------------------------------- */

typedef struct cfg_entry {
    int line;
    char *key;
    char *value; /* "" when empty */
} cfg_entry;

typedef struct cfg_section {
    int line;
    char *name; /* without brackets */
    const section_spec *spec;
    int first_entry, n_entries;
} cfg_section;

typedef struct cfg_doc {
    const char *source;
    char *text; /* mutable copy, lines cut in place */
    cfg_entry *entries;
    int n_entries;
    cfg_section *sections;
    int n_sections;
} cfg_doc;

static void doc_free(cfg_doc *doc)
{
    free(doc->text);
    free(doc->entries);
    free(doc->sections);
}

static bool is_cfg_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Reject anything that is not text before looking at it as a cfg. */
static gr_status check_text(const char *text, size_t len, const char *source)
{
    if (len > MAX_CFG_BYTES)
        return gr_fail(GR_ERR_LIMIT, "%s: %zu bytes is too large for a cfg (limit %zu bytes)",
                       source, len, MAX_CFG_BYTES);
    int line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (ch == '\n') {
            line++;
            line_start = i + 1;
            continue;
        }
        if ((ch < 0x20 && !is_cfg_space((char)ch)) || ch == 0x7f)
            return gr_fail(GR_ERR_PARSE,
                           "%s:%d: binary data (byte 0x%02x at offset %zu): not a text cfg",
                           source, line, ch, i);
        if (i - line_start >= MAX_LINE)
            return gr_fail(GR_ERR_LIMIT, "%s:%d: line longer than %d bytes", source, line,
                           MAX_LINE);
    }
    return GR_OK;
}

/* Remove every whitespace character in place (Darknet's strip()). */
static void strip_all_space(char *s)
{
    char *dst = s;
    for (char *src = s; *src; src++)
        if (!is_cfg_space(*src))
            *dst++ = *src;
    *dst = '\0';
}

static gr_status tokenize(cfg_doc *doc, const char *text, size_t len)
{
    size_t n_lines = 1;
    for (size_t i = 0; i < len; i++)
        n_lines += text[i] == '\n';
    doc->text = gr_malloc(len + 1, "cfg text");
    doc->entries = gr_calloc(n_lines, sizeof *doc->entries, "cfg entries");
    doc->sections = gr_calloc(n_lines, sizeof *doc->sections, "cfg sections");
    if (!doc->text || !doc->entries || !doc->sections)
        return GR_ERR_OUT_OF_MEMORY;
    memcpy(doc->text, text, len);
    doc->text[len] = '\0';

    char *p = doc->text;
    /* A UTF-8 byte order mark is an editor artefact, not content. */
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3;
    for (int line = 1; p; line++) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        char *s = p;
        p = nl ? nl + 1 : NULL;
        strip_all_space(s);
        if (s[0] == '\0' || s[0] == '#' || s[0] == ';')
            continue;
        if (s[0] == '[') {
            size_t n = strlen(s);
            if (n < 3 || s[n - 1] != ']')
                return gr_fail(GR_ERR_PARSE, "%s:%d: malformed section header '%s'", doc->source,
                               line, s);
            s[n - 1] = '\0';
            if (doc->n_sections > GR_MAX_LAYERS) /* [net] plus GR_MAX_LAYERS layers */
                return gr_fail(GR_ERR_LIMIT, "%s:%d: too many layers (more than %d)", doc->source,
                               line, GR_MAX_LAYERS);
            cfg_section *sec = &doc->sections[doc->n_sections++];
            sec->line = line;
            sec->name = s + 1;
            sec->first_entry = doc->n_entries;
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq)
            return gr_fail(GR_ERR_PARSE, "%s:%d: expected 'key=value' or '[section]', found '%s'",
                           doc->source, line, s);
        if (doc->n_sections == 0)
            return gr_fail(GR_ERR_PARSE, "%s:%d: 'key=value' before the first section (the cfg "
                           "must start with [net])", doc->source, line);
        *eq = '\0';
        if (s[0] == '\0')
            return gr_fail(GR_ERR_PARSE, "%s:%d: empty key before '='", doc->source, line);
        char *value = eq + 1;
        value[strcspn(value, "#;")] = '\0'; /* inline comment */
        cfg_entry *e = &doc->entries[doc->n_entries++];
        e->line = line;
        e->key = s;
        e->value = value;
        doc->sections[doc->n_sections - 1].n_entries++;
    }
    return GR_OK;
}

/* ---- typed values ------------------------------------------------------------------------ */

typedef struct section_ctx {
    const cfg_doc *doc;
    const cfg_section *sec;
} section_ctx;

static const cfg_entry *find_entry(const section_ctx *cx, const char *key)
{
    for (int i = 0; i < cx->sec->n_entries; i++) {
        const cfg_entry *e = &cx->doc->entries[cx->sec->first_entry + i];
        if (strcmp(e->key, key) == 0)
            return e;
    }
    return NULL;
}

static gr_status fail_key(const section_ctx *cx, const cfg_entry *e, gr_status status,
                          const char *what)
{
    return gr_fail(status, "%s:%d: [%s] key '%s': '%s' %s", cx->doc->source, e->line,
                   cx->sec->name, e->key, e->value, what);
}

static bool parse_long(const char *s, long *out)
{
    if (!*s)
        return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end != '\0')
        return false;
    if (errno == ERANGE)
        v = v < 0 ? LONG_MIN : LONG_MAX; /* reported as out of range by the caller */
    *out = v;
    return true;
}

static bool parse_double(const char *s, double *out)
{
    if (!*s)
        return false;
    char *end;
    double v = strtod(s, &end);
    if (*end != '\0' || !isfinite(v))
        return false;
    *out = v;
    return true;
}

/* Integer key in [lo, hi]; values below lo are parse errors, above hi limit errors. */
/* *out keeps its value (the op's Darknet default, ops/ops.c) when an optional key is absent. */
static gr_status get_int(const section_ctx *cx, const char *key, bool required, int lo, int hi,
                         int *out)
{
    const cfg_entry *e = find_entry(cx, key);
    if (!e) {
        if (required)
            return gr_fail(GR_ERR_PARSE, "%s:%d: [%s] missing required key '%s'",
                           cx->doc->source, cx->sec->line, cx->sec->name, key);
        return GR_OK;
    }
    long v;
    if (!parse_long(e->value, &v))
        return fail_key(cx, e, GR_ERR_PARSE, "is not an integer");
    if (v < lo) {
        char what[64];
        if (lo == 1)
            snprintf(what, sizeof what, "is not a positive integer");
        else if (lo == 0)
            snprintf(what, sizeof what, "is negative");
        else
            snprintf(what, sizeof what, "is below the minimum %d", lo);
        return fail_key(cx, e, GR_ERR_PARSE, what);
    }
    if (v > hi) {
        char what[64];
        snprintf(what, sizeof what, "is too large (at most %d)", hi);
        return fail_key(cx, e, GR_ERR_LIMIT, what);
    }
    *out = (int)v;
    return GR_OK;
}

/* Float key in [lo, hi] (Darknet's option_find_float); *out keeps its default when absent. */
static gr_status get_float(const section_ctx *cx, const char *key, double lo, double hi,
                           float *out)
{
    const cfg_entry *e = find_entry(cx, key);
    if (!e)
        return GR_OK;
    double v;
    if (!parse_double(e->value, &v))
        return fail_key(cx, e, GR_ERR_PARSE, "is not a number");
    if (!(v >= lo && v <= hi)) {
        char what[96];
        snprintf(what, sizeof what, "is outside %g..%g", lo, hi);
        return fail_key(cx, e, GR_ERR_PARSE, what);
    }
    *out = (float)v;
    return GR_OK;
}

/* A Darknet boolean: any non-negative integer, nonzero meaning true (stored as 0 or 1). */
static gr_status get_flag(const section_ctx *cx, const char *key, int *out)
{
    GR_TRY(get_int(cx, key, false, 0, INT_MAX, out));
    *out = *out != 0;
    return GR_OK;
}

/* Comma-separated numbers. `count` receives how many; more than `max` is a limit error. */
static gr_status get_list(const section_ctx *cx, const cfg_entry *e, bool integers, int max,
                          const char *what, double *values, int *count)
{
    char item[MAX_LINE + 1];
    const char *p = e->value;
    int n = 0;
    for (;;) {
        size_t item_len = strcspn(p, ",");
        memcpy(item, p, item_len);
        item[item_len] = '\0';
        double v;
        long iv;
        bool ok = integers ? parse_long(item, &iv) : parse_double(item, &v);
        if (!ok) {
            char msg[MAX_LINE + 64];
            snprintf(msg, sizeof msg, "has %s item %d '%s', not %s", item_len ? "the" : "an empty",
                     n + 1, item, integers ? "an integer" : "a number");
            return fail_key(cx, e, GR_ERR_PARSE, msg);
        }
        if (n == max) {
            char msg[96];
            snprintf(msg, sizeof msg, "has too many %s (at most %d)", what, max);
            return fail_key(cx, e, GR_ERR_LIMIT, msg);
        }
        if (integers) {
            if (iv < -GR_MAX_LAYERS - 1 || iv > GR_MAX_LAYERS)
                iv = iv < 0 ? -GR_MAX_LAYERS - 1 : GR_MAX_LAYERS + 1; /* out of range anyway */
            v = (double)iv;
        }
        values[n++] = v;
        if (p[item_len] == '\0')
            break;
        p += item_len + 1;
    }
    *count = n;
    return GR_OK;
}

static gr_status get_activation(const section_ctx *cx, gr_activation *out)
{
    /* AlexeyAB's cross-channel "activations" (activations.c:183-260): not elementwise */
    static const char *const darknet_only[] = {"normalize_channels", "normalize_channels_softmax",
                                               "normalize_channels_softmax_maxval", NULL};
    const cfg_entry *e = find_entry(cx, "activation");
    if (!e)
        return GR_OK;
    if (gr_activation_parse(e->value, out))
        return GR_OK;
    if (in_list(darknet_only, e->value))
        return fail_key(cx, e, GR_ERR_UNSUPPORTED,
                        "is a Darknet channel normalization graphrun does not implement");
    return fail_key(cx, e, GR_ERR_PARSE,
                    "is not an activation (linear, leaky, relu, logistic, mish, swish, relu6, "
                    "hard_mish, elu, selu, gelu, tanh, loggy, relie, ramp, plse, stair, hardtan, "
                    "lhtan, revleaky)");
}

/* AlexeyAB's parse_convolutional (parser.c:174-185): stride_x / stride_y, each defaulting to
 * `stride` (default 1). p->stride holds the horizontal one. */
static gr_status get_conv_strides(const section_ctx *cx, gr_op_params *p)
{
    int stride = p->stride, stride_x = 0, stride_y = 0;
    GR_TRY(get_int(cx, "stride", false, 1, GR_MAX_DIM, &stride));
    GR_TRY(get_int(cx, "stride_x", false, 1, GR_MAX_DIM, &stride_x));
    GR_TRY(get_int(cx, "stride_y", false, 1, GR_MAX_DIM, &stride_y));
    p->stride = stride_x > 0 ? stride_x : stride;
    p->stride_y = stride_y > 0 ? stride_y : stride;
    return GR_OK;
}

/* Every key must be known to the section; keys that change inference must have their default. */
static gr_status check_keys(const section_ctx *cx)
{
    const section_spec *spec = cx->sec->spec;
    bool is_net = spec->op_section == NULL;
    for (int i = 0; i < cx->sec->n_entries; i++) {
        const cfg_entry *e = &cx->doc->entries[cx->sec->first_entry + i];
        if (in_list(spec->keys, e->key) || in_list(spec->ignored, e->key))
            continue;
        if (!is_net && in_list(layer_ignored, e->key))
            continue;
        const fixed_key *fixed = find_fixed(spec->fixed, e->key);
        if (!fixed && !is_net)
            fixed = find_fixed(layer_fixed, e->key);
        if (fixed) {
            double v;
            if (!parse_double(e->value, &v))
                return fail_key(cx, e, GR_ERR_PARSE, "is not a number");
            if (v != fixed->value) {
                char what[128];
                snprintf(what, sizeof what, "is not supported (graphrun implements only %g)",
                         fixed->value);
                return fail_key(cx, e, GR_ERR_UNSUPPORTED, what);
            }
            continue;
        }
        char known[512];
        size_t used = 0;
        known[0] = '\0';
        for (const char *const *k = spec->keys; *k && used < sizeof known; k++)
            used += (size_t)snprintf(known + used, sizeof known - used, "%s%s",
                                     k == spec->keys ? "" : ", ", *k);
        return gr_fail(GR_ERR_PARSE, "%s:%d: [%s] unknown key '%s' (known: %s%s)",
                       cx->doc->source, e->line, cx->sec->name, e->key,
                       known[0] ? known : "none", known[0] ? ", and Darknet training keys" : "");
    }
    return GR_OK;
}

/* ---- layers ------------------------------------------------------------------------------- */

/* Absolute index of a route/shortcut reference written in the cfg at layer `index`. */
static gr_status resolve_index(const section_ctx *cx, const cfg_entry *e, int index, long ref,
                               int *out)
{
    long abs_index = ref < 0 ? index + ref : ref;
    char what[128];
    if (abs_index < 0) {
        snprintf(what, sizeof what, "points before the first layer (resolves to %ld at layer %d)",
                 abs_index, index);
        return fail_key(cx, e, GR_ERR_PARSE, what);
    }
    if (abs_index >= index) {
        snprintf(what, sizeof what, "must point at an earlier layer (layer %ld is %s layer %d)",
                 abs_index, abs_index == index ? "this" : "after this", index);
        return fail_key(cx, e, GR_ERR_PARSE, what);
    }
    *out = (int)abs_index;
    return GR_OK;
}

static gr_status parse_anchors(const section_ctx *cx, int num, gr_op_params *p)
{
    const cfg_entry *e = find_entry(cx, "anchors");
    if (!e)
        return GR_OK; /* Darknet's default biases, set by gr_op_params_default */
    double values[2 * GR_MAX_ANCHORS];
    int n;
    GR_TRY(get_list(cx, e, false, 2 * GR_MAX_ANCHORS, "anchor values", values, &n));
    if (n != 2 * num) {
        char what[96];
        snprintf(what, sizeof what, "has %d values; num=%d needs %d (w,h pairs)", n, num, 2 * num);
        return fail_key(cx, e, GR_ERR_PARSE, what);
    }
    for (int i = 0; i < n; i++) {
        if (!(values[i] > 0.0))
            return fail_key(cx, e, GR_ERR_PARSE, "has an anchor that is not positive");
        p->anchors[i] = (float)values[i];
    }
    return GR_OK;
}

/* AlexeyAB's maxpool stride_x / stride_y (default: stride): graphrun pools with one stride. */
static gr_status check_same_stride(const section_ctx *cx, const char *key, int stride)
{
    int v = stride;
    GR_TRY(get_int(cx, key, false, 1, GR_MAX_DIM, &v));
    if (v == stride)
        return GR_OK;
    char what[96];
    snprintf(what, sizeof what, "is not supported (graphrun implements only stride_x = stride_y "
             "= stride = %d)", stride);
    return fail_key(cx, find_entry(cx, key), GR_ERR_UNSUPPORTED, what);
}

/* A string key graphrun implements at one value only (shortcut weights_type=none). */
static gr_status check_string_key(const section_ctx *cx, const char *key, const char *only)
{
    const cfg_entry *e = find_entry(cx, key);
    if (!e || strcmp(e->value, only) == 0)
        return GR_OK;
    char what[96];
    snprintf(what, sizeof what, "is not supported (graphrun implements only %s)", only);
    return fail_key(cx, e, GR_ERR_UNSUPPORTED, what);
}

/* [sam] / [scale_channels] (AlexeyAB's parse_sam, parse_scale_channels, parser.c:990-1030): one
 * `from` layer, an activation (default linear) and scale_channels' scale_wh. Inputs as
 * ops/sam.c and ops/scale_channels.c want them: sam (previous, from), scale_channels (from,
 * previous). AlexeyAB applies these activations with activate_array (activations.c:115-136),
 * whose activate() has no case for mish, swish or hard_mish and returns 0 for them, on the CPU
 * and the GPU alike (parser.c:1005-1007 and 1025-1027 warn that they are not supported):
 * refused rather than reproduced. */
static gr_status parse_product_layer(const section_ctx *cx, gr_layer *l, int index)
{
    gr_op_params *p = &l->p;
    const cfg_entry *e = find_entry(cx, "from");
    double values[GR_MAX_INPUTS];
    int n, from;
    if (!e)
        return gr_fail(GR_ERR_PARSE, "%s:%d: [%s] missing required key 'from'", cx->doc->source,
                       cx->sec->line, cx->sec->name);
    GR_TRY(get_list(cx, e, true, GR_MAX_INPUTS, "layers", values, &n));
    if (n != 1)
        return fail_key(cx, e, GR_ERR_PARSE, "takes one layer (AlexeyAB reads only the first)");
    GR_TRY(resolve_index(cx, e, index, (long)values[0], &from));
    l->n_inputs = 2;
    l->inputs[0] = p->op == GR_OP_SAM ? index - 1 : from;
    l->inputs[1] = p->op == GR_OP_SAM ? from : index - 1;
    if (p->op == GR_OP_SCALE_CHANNELS)
        GR_TRY(get_int(cx, "scale_wh", false, 0, 1, &p->scale_wh));
    GR_TRY(get_activation(cx, &p->activation));
    if (p->activation == GR_ACT_MISH || p->activation == GR_ACT_SWISH ||
        p->activation == GR_ACT_HARD_MISH)
        return fail_key(cx, find_entry(cx, "activation"), GR_ERR_UNSUPPORTED,
                        "is not supported here (AlexeyAB Darknet computes 0 for it in this "
                        "layer: its activate() has no case for mish, swish or hard_mish)");
    return GR_OK;
}

/* AlexeyAB's [yolo] keys that change inference (parser.c:466-500): scale_x_y, new_coords, and
 * the NMS its detections get. Unlike AlexeyAB, an unknown nms_kind is an error, not "default". */
static gr_status parse_yolo_extras(const section_ctx *cx, gr_op_params *p)
{
    GR_TRY(get_float(cx, "scale_x_y", 0.0625, 16.0, &p->scale_x_y));
    GR_TRY(get_int(cx, "new_coords", false, 0, 1, &p->new_coords));
    GR_TRY(get_float(cx, "beta_nms", 0.0625, 16.0, &p->beta_nms));
    const cfg_entry *e = find_entry(cx, "nms_kind");
    if (!e)
        return GR_OK;
    if (strcmp(e->value, "default") == 0)
        p->nms_kind = GR_NMS_DEFAULT;
    else if (strcmp(e->value, "greedynms") == 0)
        p->nms_kind = GR_NMS_GREEDY;
    else if (strcmp(e->value, "diounms") == 0)
        p->nms_kind = GR_NMS_DIOU;
    else
        return fail_key(cx, e, GR_ERR_PARSE, "is not an NMS kind (default, greedynms, diounms)");
    return GR_OK;
}

static gr_status parse_layer_params(const section_ctx *cx, gr_layer *l, int index)
{
    gr_op_params *p = &l->p;
    const cfg_entry *e;
    double values[GR_MAX_ANCHORS > GR_MAX_INPUTS ? GR_MAX_ANCHORS : GR_MAX_INPUTS];
    int n;
    /* Default: read the previous layer (or the network input for layer 0). */
    l->n_inputs = 1;
    l->inputs[0] = index - 1;

    switch (p->op) {
    case GR_OP_CONV: {
        int pad_flag = 0;
        GR_TRY(get_int(cx, "filters", true, 1, GR_MAX_DIM, &p->filters));
        GR_TRY(get_int(cx, "size", false, 1, GR_MAX_DIM, &p->size));
        GR_TRY(get_conv_strides(cx, p));
        GR_TRY(get_int(cx, "dilation", false, 1, GR_MAX_DIM, &p->dilation));
        if (p->size == 1) /* parse_convolutional: a 1x1 has no taps to spread */
            p->dilation = 1;
        GR_TRY(get_flag(cx, "pad", &pad_flag));
        GR_TRY(get_int(cx, "padding", false, 0, GR_MAX_DIM, &p->pad));
        GR_TRY(get_int(cx, "groups", false, 1, GR_MAX_DIM, &p->groups));
        GR_TRY(get_flag(cx, "batch_normalize", &p->batch_normalize));
        GR_TRY(get_activation(cx, &p->activation));
        if (pad_flag) /* Darknet: pad=1 means size/2, overriding padding */
            p->pad = p->size / 2;
        e = find_entry(cx, "dilation");
        if (e && p->dilation > 1 && 2 * p->pad != p->size - 1) /* ops/conv.c says why */
            return fail_key(cx, e, GR_ERR_UNSUPPORTED,
                            "needs padding (size-1)/2 (pad=1 with an odd size): Darknet's output "
                            "size and its im2col disagree otherwise");
        break;
    }
    case GR_OP_MAXPOOL:
    case GR_OP_LOCAL_AVGPOOL:
        GR_TRY(get_int(cx, "stride", false, 1, GR_MAX_DIM, &p->stride));
        GR_TRY(get_int(cx, "size", false, 1, GR_MAX_DIM, &p->size));
        GR_TRY(get_int(cx, "padding", false, 0, GR_MAX_DIM, &p->pad));
        GR_TRY(check_same_stride(cx, "stride_x", p->stride));
        GR_TRY(check_same_stride(cx, "stride_y", p->stride));
        break;
    case GR_OP_ROUTE: {
        if (strcmp(cx->sec->spec->name, "dropout") == 0)
            break; /* the identity: reads the previous layer, groups 1 */
        e = find_entry(cx, "layers");
        if (!e)
            return gr_fail(GR_ERR_PARSE, "%s:%d: [%s] missing required key 'layers'",
                           cx->doc->source, cx->sec->line, cx->sec->name);
        GR_TRY(get_list(cx, e, true, GR_MAX_INPUTS, "route inputs", values, &n));
        for (int k = 0; k < n; k++)
            GR_TRY(resolve_index(cx, e, index, (long)values[k], &l->inputs[k]));
        l->n_inputs = n;
        GR_TRY(get_int(cx, "groups", false, 1, GR_MAX_DIM, &p->groups));
        GR_TRY(get_int(cx, "group_id", false, 0, GR_MAX_DIM, &p->group_id));
        if (p->group_id >= p->groups)
            return gr_fail(GR_ERR_PARSE, "%s:%d: [%s] group_id %d must be less than groups %d",
                           cx->doc->source, cx->sec->line, cx->sec->name, p->group_id, p->groups);
        break;
    }
    case GR_OP_SHORTCUT: {
        e = find_entry(cx, "from");
        if (!e)
            return gr_fail(GR_ERR_PARSE, "%s:%d: [%s] missing required key 'from'",
                           cx->doc->source, cx->sec->line, cx->sec->name);
        GR_TRY(get_list(cx, e, true, GR_MAX_INPUTS, "layers", values, &n));
        if (n > 1)
            return fail_key(cx, e, GR_ERR_UNSUPPORTED,
                            "is not supported (graphrun adds exactly one layer, AlexeyAB's "
                            "shortcut_multilayer is not implemented)");
        GR_TRY(resolve_index(cx, e, index, (long)values[0], &l->inputs[1]));
        l->n_inputs = 2;
        GR_TRY(get_activation(cx, &p->activation));
        GR_TRY(check_string_key(cx, "weights_type", "none"));
        break;
    }
    case GR_OP_SAM:
    case GR_OP_SCALE_CHANNELS:
        GR_TRY(parse_product_layer(cx, l, index));
        break;
    case GR_OP_UPSAMPLE:
        GR_TRY(get_int(cx, "stride", false, 1, GR_MAX_DIM, &p->stride));
        break;
    case GR_OP_REORG:
        GR_TRY(get_int(cx, "stride", false, 1, GR_MAX_DIM, &p->stride));
        break;
    case GR_OP_CONNECTED:
        GR_TRY(get_int(cx, "output", true, 1, GR_MAX_DIM, &p->filters));
        GR_TRY(get_flag(cx, "batch_normalize", &p->batch_normalize));
        GR_TRY(get_activation(cx, &p->activation));
        break;
    case GR_OP_SOFTMAX:
        GR_TRY(get_int(cx, "groups", false, 1, GR_MAX_DIM, &p->groups));
        break;
    case GR_OP_REGION:
        GR_TRY(get_int(cx, "classes", false, 1, GR_MAX_DIM, &p->classes));
        GR_TRY(get_int(cx, "coords", false, 4, 4, &p->coords));
        GR_TRY(get_int(cx, "num", false, 1, GR_MAX_ANCHORS, &p->num));
        GR_TRY(get_flag(cx, "softmax", &p->softmax));
        GR_TRY(parse_anchors(cx, p->num, p));
        break;
    case GR_OP_YOLO:
        GR_TRY(parse_yolo_extras(cx, p));
        GR_TRY(get_int(cx, "classes", false, 1, GR_MAX_DIM, &p->classes));
        GR_TRY(get_int(cx, "num", false, 1, GR_MAX_ANCHORS, &p->num));
        GR_TRY(parse_anchors(cx, p->num, p));
        e = find_entry(cx, "mask");
        if (e) {
            GR_TRY(get_list(cx, e, true, GR_MAX_ANCHORS, "mask entries", values, &n));
            for (int k = 0; k < n; k++) {
                if (values[k] < 0 || values[k] >= p->num) {
                    char what[96];
                    snprintf(what, sizeof what, "has index %d outside the %d anchors",
                             (int)values[k], p->num);
                    return fail_key(cx, e, GR_ERR_PARSE, what);
                }
                p->mask[k] = (int)values[k];
            }
            p->n_mask = n;
        }
        break;
    default:
        break; /* avgpool: no parameters */
    }
    return GR_OK;
}

/* Parameter floats of a conv / connected layer must stay addressable; everything else has none. */
static gr_status check_param_count(const section_ctx *cx, const gr_net *net, int index)
{
    const gr_layer *l = &net->layers[index];
    if (!gr_op_has((int)l->p.op, GR_OPF_WEIGHTS))
        return GR_OK;
    gr_shape in = gr_net_input_shape(net, index, 0);
    size_t n = (size_t)l->p.filters, fan_in;
    if (l->p.op == GR_OP_CONV) {
        if (l->p.groups <= 0 || !gr_mul_size((size_t)(in.c / l->p.groups),
                                             (size_t)l->p.size * (size_t)l->p.size, &fan_in))
            fan_in = SIZE_MAX;
    } else {
        fan_in = gr_shape_elems(in);
    }
    size_t n_weights;
    if (fan_in == SIZE_MAX || !gr_mul_size(n, fan_in, &n_weights) ||
        n_weights > GR_MAX_TENSOR_ELEMS)
        return gr_fail(GR_ERR_LIMIT, "%s:%d: [%s] layer %d has too many weights (more than %zu)",
                       cx->doc->source, cx->sec->line, cx->sec->name, index,
                       (size_t)GR_MAX_TENSOR_ELEMS);
    return GR_OK;
}

static gr_status build_layer(const section_ctx *cx, gr_net *net, int index)
{
    gr_layer *l = &net->layers[index];
    gr_op_kind op;
    if (!gr_op_from_section(cx->sec->spec->op_section, &op))
        return gr_fail(GR_ERR_INTERNAL, "%s:%d: [%s] has no op in ops/ops.def", cx->doc->source,
                       cx->sec->line, cx->sec->name);
    memset(l, 0, sizeof *l);
    gr_op_params_default(op, &l->p);
    l->p.op = op;
    l->cfg_line = cx->sec->line;
    GR_TRY(check_keys(cx));
    GR_TRY(parse_layer_params(cx, l, index));
    gr_op_params_resolve(&l->p);

    gr_shape in[GR_MAX_INPUTS];
    for (int k = 0; k < l->n_inputs; k++)
        in[k] = gr_net_input_shape(net, index, k);
    gr_status st = gr_op_infer(&l->p, in, l->n_inputs, &l->out);
    if (st != GR_OK)
        return gr_fail_prefix(st, "%s:%d: layer %d: ", cx->doc->source, cx->sec->line, index);
    /* Defensive: whatever infer() allows, the IR never holds an empty or absurd tensor. */
    if (l->out.c <= 0 || l->out.h <= 0 || l->out.w <= 0 || l->out.c > GR_MAX_DIM ||
        l->out.h > GR_MAX_DIM || l->out.w > GR_MAX_DIM ||
        gr_shape_elems(l->out) > GR_MAX_TENSOR_ELEMS)
        return gr_fail(GR_ERR_LIMIT, "%s:%d: [%s] layer %d: output %dx%dx%d is empty or too large",
                       cx->doc->source, cx->sec->line, cx->sec->name, index, l->out.c, l->out.h,
                       l->out.w);
    return check_param_count(cx, net, index);
}

/* Keys and activations only AlexeyAB Darknet reads: a cfg using any of them is of that fork, and
 * gets its batch norm (x / sqrt(var + 1e-5), ops/ops.h gr_bn_denominator) instead of pjreddie's
 * (x / (sqrt(var) + 1e-6)). A cfg valid in both (yolov3.cfg) keeps pjreddie's: the difference is
 * ~5e-6 relative per batch-normalized layer. */
static const char *const alexeyab_keys[] = {
    "scale_x_y", "new_coords", "nms_kind", "beta_nms", "iou_loss", "iou_normalizer",
    "cls_normalizer", "obj_normalizer", "iou_thresh", "max_delta", "group_id", "mosaic",
    "letter_box", "cutmix", "stride_x", "stride_y", "weights_type", "maxpool_depth", "scale_wh",
    NULL};
static const char *const alexeyab_sections[] = {"sam", "scale_channels", NULL};
static const char *const alexeyab_activations[] = {"mish", "swish", "hard_mish", "gelu", NULL};

static bool is_alexeyab_cfg(const cfg_doc *doc)
{
    for (int i = 0; i < doc->n_sections; i++)
        if (in_list(alexeyab_sections, doc->sections[i].name))
            return true;
    for (int i = 0; i < doc->n_entries; i++) {
        const cfg_entry *e = &doc->entries[i];
        if (in_list(alexeyab_keys, e->key))
            return true;
        if (strcmp(e->key, "activation") == 0 && in_list(alexeyab_activations, e->value))
            return true;
    }
    return false;
}

static gr_status parse_net_section(const section_ctx *cx, gr_net *net)
{
    GR_TRY(check_keys(cx));
    GR_TRY(get_int(cx, "width", true, 1, GR_MAX_DIM, &net->w));
    GR_TRY(get_int(cx, "height", true, 1, GR_MAX_DIM, &net->h));
    GR_TRY(get_int(cx, "channels", true, 1, GR_MAX_DIM, &net->c));
    gr_shape in = {net->c, net->h, net->w};
    if (gr_shape_elems(in) > GR_MAX_TENSOR_ELEMS)
        return gr_fail(GR_ERR_LIMIT, "%s:%d: [%s] input %dx%dx%d is too large", cx->doc->source,
                       cx->sec->line, cx->sec->name, net->c, net->h, net->w);
    return GR_OK;
}

static void set_name_from_source(gr_net *net, const char *source)
{
    const char *base = strrchr(source, '/');
    base = base ? base + 1 : source;
    snprintf(net->name, sizeof net->name, "%s", base);
}

static gr_status parse_doc(cfg_doc *doc, gr_net *net)
{
    if (doc->n_sections == 0)
        return gr_fail(GR_ERR_PARSE, "%s:1: empty cfg: no sections (the first must be [net])",
                       doc->source);
    for (int i = 0; i < doc->n_sections; i++) {
        cfg_section *sec = &doc->sections[i];
        sec->spec = find_section_spec(sec->name);
        if (!sec->spec) {
            if (in_list(unsupported_sections, sec->name))
                return gr_fail(GR_ERR_UNSUPPORTED,
                               "%s:%d: section [%s] is valid Darknet but graphrun does not run it",
                               doc->source, sec->line, sec->name);
            return gr_fail(GR_ERR_PARSE, "%s:%d: unknown section [%s]", doc->source, sec->line,
                           sec->name);
        }
        bool is_net = sec->spec->op_section == NULL;
        if (i == 0 && !is_net)
            return gr_fail(GR_ERR_PARSE, "%s:%d: first section is [%s]; a cfg must start with "
                           "[net] or [network]", doc->source, sec->line, sec->name);
        if (i > 0 && is_net)
            return gr_fail(GR_ERR_PARSE, "%s:%d: a second [%s] section (only the first may be "
                           "[net])", doc->source, sec->line, sec->name);
    }
    if (doc->n_sections == 1)
        return gr_fail(GR_ERR_PARSE, "%s:%d: cfg has no layers after [%s]", doc->source,
                       doc->sections[0].line, doc->sections[0].name);

    section_ctx cx = {doc, &doc->sections[0]};
    GR_TRY(parse_net_section(&cx, net));
    net->n_layers = doc->n_sections - 1;
    net->layers = gr_calloc((size_t)net->n_layers, sizeof *net->layers, "cfg layers");
    if (!net->layers)
        return GR_ERR_OUT_OF_MEMORY;
    /* The whole weight block is one allocation (loaded or synthesized): it is held to the same
     * element limit as any one tensor, checked at the layer that crosses it. */
    size_t total_floats = 0;
    bool alexeyab = is_alexeyab_cfg(doc);
    /* AlexeyAB's test_detector stretches (resize_image) unless [net] letter_box is non-zero
     * (detector.c:1633, 1674; parser.c:1208 reads it with atoi); pjreddie's letterboxes always. */
    int letter_box = 0;
    cx.sec = &doc->sections[0];
    GR_TRY(get_int(&cx, "letter_box", false, INT_MIN, INT_MAX, &letter_box));
    net->preprocess = alexeyab && letter_box == 0 ? GR_PREPROCESS_STRETCH : GR_PREPROCESS_LETTERBOX;
    for (int i = 0; i < net->n_layers; i++) {
        cx.sec = &doc->sections[i + 1];
        GR_TRY(build_layer(&cx, net, i));
        net->layers[i].p.alexeyab = alexeyab;
        total_floats += gr_layer_param_floats(net, i, NULL, NULL); /* each <= 2^31 + 4 * 2^16 */
        if (total_floats > GR_MAX_TENSOR_ELEMS)
            return gr_fail(GR_ERR_LIMIT,
                           "%s:%d: [%s] layer %d brings the network to %zu weights (limit %zu)",
                           doc->source, cx.sec->line, cx.sec->name, i, total_floats,
                           GR_MAX_TENSOR_ELEMS);
    }
    size_t n_floats;
    return gr_net_param_floats(net, &n_floats);
}

gr_status gr_net_parse(const char *text, size_t len, const char *source, gr_net **out)
{
    if (!out)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_net_parse: NULL output pointer");
    *out = NULL;
    if (!text && len > 0)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_net_parse: NULL text");
    if (!source)
        source = "<cfg>";
    GR_TRY(check_text(text, len, source));

    cfg_doc doc = {source, NULL, NULL, 0, NULL, 0};
    gr_net *net = gr_calloc(1, sizeof *net, "network");
    gr_status st = net ? tokenize(&doc, text ? text : "", len) : GR_ERR_OUT_OF_MEMORY;
    if (st == GR_OK)
        st = parse_doc(&doc, net);
    doc_free(&doc);
    if (st != GR_OK) {
        gr_net_free(net);
        return st;
    }
    set_name_from_source(net, source);
    *out = net;
    return GR_OK;
}

gr_status gr_net_parse_file(const char *path, gr_net **out)
{
    if (!out || !path)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_net_parse_file: NULL argument");
    *out = NULL;
    char *text;
    size_t len;
    GR_TRY(gr_read_file(path, MAX_CFG_BYTES, "cfg", &text, &len));
    gr_status st = gr_net_parse(text, len, path, out);
    free(text);
    return st;
}
