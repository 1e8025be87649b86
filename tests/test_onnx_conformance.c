/* ONNX's own per-operator test cases (Debian's libonnx-testdata: onnx/backend/test/data/node/
 * test_* with model.onnx and test_data_set_0/{input,output}_*.pb) through graphrun's importer and
 * the CPU reference (fp32), for every case whose nodes are all ops docs/onnx.md lists. Each case
 * is passed (every output within ONNX's backend-test tolerance, |x - ref| <= 1e-7 + 1e-3 |ref|,
 * the NRMSE printed), refused (the one-line reason, which must name the file) or wrong. The test
 * fails on any wrong case (a mapping that computes something else must be fixed or refused) and
 * would crash on a crash. Prints a line per case and a markdown table per op (docs/onnx.md
 * "Conformance" holds it).
 *
 * The directory: $GR_ONNX_TESTDATA, else /usr/share/libonnx-testdata/data/node (apt-get install
 * libonnx-testdata); absent: skipped (77), as in a build without ONNX import. The .pb files and
 * the models' op types are read here with a few lines of protobuf wire format (TensorProto:
 * dims 1, data_type 2, float_data 4, raw_data 9; ModelProto.graph 7, GraphProto.node 1,
 * NodeProto.op_type 4), so the test needs nothing but the library. */
#define _DEFAULT_SOURCE /* scandir, alphasort */
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graphrun/runtime.h"
#include "tests/support/classify_nets.h"

#define DEFAULT_DIR "/usr/share/libonnx-testdata/data"
#define MAX_OPS 64
#define MAX_NODES 64

/* docs/onnx.md's table: the ops the importer maps or folds. */
static const char *const supported[] = {
    "Conv", "BatchNormalization", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Elu", "Clip", "Mul",
    "MaxPool", "Add", "Sub", "Div", "Concat", "Split", "Slice", "Resize", "GlobalAveragePool",
    "Flatten", "Reshape", "Gemm", "Softmax", "Identity", "Constant", "Shape", "Gather",
    "Unsqueeze", "Squeeze", "Cast", "ConstantOfShape", "Range", "QuantizeLinear",
    "DequantizeLinear", NULL};

static bool is_supported(const char *op)
{
    for (const char *const *s = supported; *s; s++)
        if (strcmp(*s, op) == 0)
            return true;
    return false;
}

/* ---- protobuf wire format ------------------------------------------------------------------ */

typedef struct pb {
    const uint8_t *p, *end;
} pb;

static bool varint(pb *b, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && b->p < b->end; shift += 7) {
        uint8_t c = *b->p++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return true;
    }
    return false;
}

/* The next field: its number, wire type, and a varint value or a length-delimited span. */
static bool field(pb *b, int *num, int *wt, uint64_t *v, pb *span)
{
    uint64_t key;
    if (b->p >= b->end || !varint(b, &key))
        return false;
    *num = (int)(key >> 3);
    *wt = (int)(key & 7);
    switch (*wt) {
    case 0: return varint(b, v);
    case 1: if (b->end - b->p < 8) return false; span->p = b->p; b->p += 8; span->end = b->p; return true;
    case 5: if (b->end - b->p < 4) return false; span->p = b->p; b->p += 4; span->end = b->p; return true;
    case 2:
        if (!varint(b, v) || *v > (uint64_t)(b->end - b->p))
            return false;
        span->p = b->p;
        span->end = b->p + *v;
        b->p += *v;
        return true;
    default: return false;
    }
}

typedef struct tensor {
    int ndim;
    int64_t dims[8];
    int dtype;
    float *f;
    size_t n;
} tensor;

static float le_float(const uint8_t *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static bool read_file(const char *path, uint8_t **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc(n > 0 ? (size_t)n : 1);
    bool ok = *data && n >= 0 && fread(*data, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    *len = ok ? (size_t)n : 0;
    if (!ok) {
        free(*data);
        *data = NULL;
    }
    return ok;
}

/* A float32 TensorProto (inline floats or raw data); false for anything else. */
static bool read_tensor(const char *path, tensor *t)
{
    memset(t, 0, sizeof *t);
    uint8_t *data;
    size_t len;
    if (!read_file(path, &data, &len))
        return false;
    pb b = {data, data + len}, span, floats = {NULL, NULL}, raw = {NULL, NULL};
    int num, wt;
    uint64_t v;
    bool ok = true;
    while (ok && b.p < b.end) {
        if (!field(&b, &num, &wt, &v, &span)) {
            ok = false;
        } else if (num == 1 && wt == 0 && t->ndim < 8) {
            t->dims[t->ndim++] = (int64_t)v;
        } else if (num == 1 && wt == 2) {
            pb d = span;
            while (d.p < d.end && t->ndim < 8 && varint(&d, &v))
                t->dims[t->ndim++] = (int64_t)v;
        } else if (num == 2 && wt == 0) {
            t->dtype = (int)v;
        } else if (num == 4 && wt == 2) {
            floats = span;
        } else if (num == 9 && wt == 2) {
            raw = span;
        }
    }
    t->n = 1;
    for (int d = 0; d < t->ndim; d++)
        t->n *= (size_t)t->dims[d];
    const pb *src = raw.p ? &raw : &floats;
    ok = ok && t->dtype == 1 && src->p && (size_t)(src->end - src->p) == 4 * t->n;
    if (ok) {
        t->f = malloc(t->n ? 4 * t->n : 4);
        ok = t->f != NULL;
        for (size_t i = 0; ok && i < t->n; i++)
            t->f[i] = le_float(src->p + 4 * i);
    }
    free(data);
    return ok;
}

/* The op types of a model's nodes (up to MAX_NODES), each a malloc'd string. */
static int model_ops(const uint8_t *data, size_t len, char **ops)
{
    pb b = {data, data + len}, span;
    int num, wt, n = 0;
    uint64_t v;
    while (b.p < b.end && field(&b, &num, &wt, &v, &span)) {
        if (num != 7 || wt != 2)
            continue;
        pb g = span, node;
        while (g.p < g.end && field(&g, &num, &wt, &v, &node)) {
            if (num != 1 || wt != 2)
                continue;
            pb nd = node, s;
            while (nd.p < nd.end && field(&nd, &num, &wt, &v, &s)) {
                if (num == 4 && wt == 2 && n < MAX_NODES) {
                    size_t l = (size_t)(s.end - s.p);
                    ops[n] = malloc(l + 1);
                    memcpy(ops[n], s.p, l);
                    ops[n][l] = 0;
                    n++;
                }
            }
        }
    }
    return n;
}

/* ---- the case's other inputs as initializers -------------------------------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
} buf;

static void put(buf *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *grown = realloc(b->p, cap);
        if (!grown) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void put_varint(buf *b, uint64_t v)
{
    uint8_t c[10];
    int n = 0;
    do {
        c[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    put(b, c, (size_t)n);
}

static void put_bytes(buf *b, int num, const void *data, size_t n)
{
    put_varint(b, (uint64_t)num << 3 | 2);
    put_varint(b, n);
    put(b, data, n);
}

/* The model with graph inputs 1.. made initializers holding the recorded input_k.pb (named as
 * the input: TensorProto.name, field 8, appended), the way an exported model holds its weights:
 * graphrun runs networks of one input. Returns how many were made (0: the model unchanged). */
static int promote_inputs(const uint8_t *data, size_t len, const char *case_dir, buf *out)
{
    pb m = {data, data + len}, span;
    int num, wt, promoted = 0;
    uint64_t v;
    const uint8_t *start = m.p;
    while (m.p < m.end) {
        const uint8_t *field_start = m.p;
        if (!field(&m, &num, &wt, &v, &span))
            return 0;
        if (num != 7 || wt != 2) {
            put(out, field_start, (size_t)(m.p - field_start));
            continue;
        }
        buf g = {NULL, 0, 0};
        pb gr = span, f;
        int input = 0;
        while (gr.p < gr.end) {
            const uint8_t *fs = gr.p;
            if (!field(&gr, &num, &wt, &v, &f))
                break;
            if (num != 11 || wt != 2 || input++ == 0) {
                put(&g, fs, (size_t)(gr.p - fs));
                continue;
            }
            pb vi = f, name = {NULL, NULL}, x;
            while (vi.p < vi.end && field(&vi, &num, &wt, &v, &x))
                if (num == 1 && wt == 2)
                    name = x;
            char path[1200];
            snprintf(path, sizeof path, "%s/test_data_set_0/input_%d.pb", case_dir, input - 1);
            uint8_t *t;
            size_t t_len;
            if (!name.p || !read_file(path, &t, &t_len)) {
                put(&g, fs, (size_t)(gr.p - fs)); /* left an input: the importer refuses it */
                continue;
            }
            buf init = {NULL, 0, 0};
            put(&init, t, t_len);
            put_bytes(&init, 8, name.p, (size_t)(name.end - name.p));
            put_bytes(&g, 5, init.p, init.len);
            free(init.p);
            free(t);
            promoted++;
        }
        put_bytes(out, 7, g.p, g.len);
        free(g.p);
    }
    (void)start;
    return promoted;
}

/* ---- one case ------------------------------------------------------------------------------- */

enum { PASSED, REFUSED, WRONG };

typedef struct op_row {
    char op[64];
    int count[3];
    int why[4];       /* refusals by kind: the input's shape or type, the opset, the node */
    char reason[200]; /* the first node refusal's reason */
} op_row;

enum { WHY_INPUT, WHY_OPSET, WHY_NODE, WHY_OTHER };

static int why_kind(const char *msg)
{
    if (strncmp(msg, "input '", 7) == 0 || strncmp(msg, "graph inputs", 12) == 0)
        return WHY_INPUT;
    if (strncmp(msg, "opset ", 6) == 0)
        return WHY_OPSET;
    if (strncmp(msg, "node ", 5) == 0)
        return WHY_NODE;
    return WHY_OTHER;
}

static int by_op(const void *a, const void *b)
{
    return strcmp(((const op_row *)a)->op, ((const op_row *)b)->op);
}

static op_row rows[MAX_OPS];
static int n_rows;

static op_row *row_of(const char *op)
{
    for (int i = 0; i < n_rows; i++)
        if (strcmp(rows[i].op, op) == 0)
            return &rows[i];
    if (n_rows == MAX_OPS)
        return &rows[MAX_OPS - 1];
    op_row *r = &rows[n_rows++];
    snprintf(r->op, sizeof r->op, "%s", op);
    return r;
}

/* The reason of a refusal without the file's path in front. */
static const char *short_reason(const char *msg, const char *path)
{
    const char *at = strstr(msg, path);
    if (at)
        msg = at + strlen(path);
    while (*msg == ':' || *msg == ' ')
        msg++;
    return msg;
}

static int run_case(const char *dir, const char *name, const char *model_path, int promoted,
                    char *what, size_t what_len)
{
    char path[1100];
    gr_model_options mo;
    gr_model_options_default(&mo);
    mo.builtin = model_path;
    gr_model *m = NULL;
    gr_status st = gr_model_load(&mo, &m);
    if (st != GR_OK) {
        bool named = strstr(gr_last_error(), model_path) != NULL && !strchr(gr_last_error(), '\n');
        snprintf(what, what_len, "%s", short_reason(gr_last_error(), model_path));
        return named ? REFUSED : WRONG; /* a refusal must be one line naming the file */
    }
    gr_engine_options eo;
    gr_engine_options_default(&eo);
    eo.device = GR_DEVICE_CPU;
    eo.precision = GR_PREC_FP32;
    gr_engine *e = NULL;
    st = gr_engine_build(m, &eo, &e);
    if (st != GR_OK) {
        snprintf(what, what_len, "engine: %s", gr_last_error());
        gr_model_destroy(m);
        return REFUSED;
    }
    gr_model_info info;
    gr_model_get_info(m, &info);
    int result = PASSED;
    tensor in;
    snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_0.pb", dir, name);
    size_t want = (size_t)info.channels * info.height * info.width;
    struct stat sb;
    (void)promoted;
    if (!read_tensor(path, &in) || in.n != want) {
        snprintf(what, what_len, "the recorded input is not the one float32 tensor of %zu "
                 "values graphrun's import reads", want);
        gr_engine_destroy(e);
        gr_model_destroy(m);
        return WRONG;
    }
    st = gr_engine_run_f32(e, in.f);
    free(in.f);
    double worst = 0.0;
    for (int k = 0; st == GR_OK && result == PASSED; k++) {
        tensor ref;
        snprintf(path, sizeof path, "%s/%s/test_data_set_0/output_%d.pb", dir, name, k);
        if (stat(path, &sb) != 0) {
            if (k != gr_engine_output_count(e)) {
                snprintf(what, what_len, "%d outputs where ONNX records %d",
                         gr_engine_output_count(e), k);
                result = WRONG;
            }
            break;
        }
        gr_tensor_desc d;
        const float *got = NULL;
        if (k >= gr_engine_output_count(e) || !read_tensor(path, &ref)) {
            snprintf(what, what_len, "output %d: missing or not float32", k);
            result = WRONG;
            break;
        }
        gr_engine_output_desc(e, k, &d);
        gr_engine_output(e, k, &got);
        size_t n = (size_t)d.c * d.h * d.w;
        if (n != ref.n || (ref.ndim > 0 && ref.dims[0] != 1)) {
            snprintf(what, what_len, "output %d: %zu values where ONNX records %zu", k, n, ref.n);
            result = WRONG;
        } else {
            for (size_t i = 0; i < n; i++)
                if (!(fabsf(got[i] - ref.f[i]) <= 1e-7f + 1e-3f * fabsf(ref.f[i]))) {
                    snprintf(what, what_len, "output %d value %zu: %g where ONNX records %g "
                             "(NRMSE %.2e)", k, i, (double)got[i], (double)ref.f[i],
                             gr_test_nrmse(got, ref.f, n));
                    result = WRONG;
                    break;
                }
            double e_k = gr_test_nrmse(got, ref.f, n);
            worst = e_k > worst ? e_k : worst;
        }
        free(ref.f);
    }
    if (st != GR_OK) {
        snprintf(what, what_len, "run: %s", gr_last_error());
        result = WRONG;
    } else if (result == PASSED) {
        snprintf(what, what_len, "NRMSE %.1e", worst);
    }
    gr_engine_destroy(e);
    gr_model_destroy(m);
    return result;
}

static int skip_dots(const struct dirent *d) { return strncmp(d->d_name, "test_", 5) == 0; }

static int total[3], selected, seen;
static bool markdown, no_import;
static char tmp_model[64];

/* Every selected case of one suite directory (ROOT/node, ...). */
static void run_suite(const char *root, const char *suite)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", root, suite);
    struct dirent **list = NULL;
    int n = scandir(dir, &list, skip_dots, alphasort);
    for (int c = 0; c < n; c++) {
        const char *name = list[c]->d_name;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name);
        uint8_t *data = NULL;
        size_t len = 0;
        char *ops[MAX_NODES];
        int n_ops = 0;
        bool have = !no_import && read_file(path, &data, &len);
        if (have)
            n_ops = model_ops(data, len, ops);
        seen += have;
        bool all = n_ops > 0;
        const char *main_op = NULL;
        for (int i = 0; i < n_ops; i++) {
            all &= is_supported(ops[i]);
            if (!main_op && strcmp(ops[i], "Constant") != 0)
                main_op = ops[i];
        }
        if (all && main_op) {
            char what[512] = "", case_dir[1100];
            snprintf(case_dir, sizeof case_dir, "%s/%s", dir, name);
            buf model = {NULL, 0, 0};
            int promoted = promote_inputs(data, len, case_dir, &model);
            const char *model_path = path;
            if (promoted) {
                FILE *f = fopen(tmp_model, "wb");
                bool ok = f && fwrite(model.p, 1, model.len, f) == model.len;
                if ((f && fclose(f) != 0) || !ok) {
                    perror(tmp_model);
                    exit(1);
                }
                model_path = tmp_model;
            }
            free(model.p);
            int r = run_case(dir, name, model_path, promoted, what, sizeof what);
            if (r == REFUSED && strstr(what, "built without ONNX import")) {
                printf("SKIP onnx_conformance: %s\n", what);
                no_import = true;
            } else {
                op_row *row = row_of(main_op);
                row->count[r]++;
                total[r]++;
                selected++;
                int kind = why_kind(what);
                if (r == REFUSED)
                    row->why[kind]++;
                if (r == REFUSED && kind >= WHY_NODE && !row->reason[0])
                    snprintf(row->reason, sizeof row->reason, "%s", what);
                if (!markdown || r == WRONG)
                    printf("%s/%-50s %-7s %s%s\n", suite, name, r == PASSED ? "passed" :
                           r == REFUSED ? "refused" : "WRONG",
                           promoted ? "(other inputs as initializers) " : "", what);
            }
        }
        for (int i = 0; i < n_ops; i++)
            free(ops[i]);
        free(data);
        free(list[c]);
    }
    free(list);
}

int main(int argc, char **argv)
{
    const char *root = getenv("GR_ONNX_TESTDATA");
    if (!root || !root[0])
        root = DEFAULT_DIR;
    markdown = argc > 1 && strcmp(argv[1], "--markdown") == 0;
    snprintf(tmp_model, sizeof tmp_model, "/tmp/graphrun_conformance_%d.onnx", (int)getpid());
    static const char *const suites[] = {"node", "pytorch-converted", "pytorch-operator",
                                         "simple"};
    for (size_t k = 0; k < sizeof suites / sizeof suites[0]; k++)
        run_suite(root, suites[k]);
    remove(tmp_model);
    if (no_import)
        return 77;
    if (seen == 0) {
        printf("SKIP onnx_conformance: no ONNX test cases in %s/{node,pytorch-converted,...} "
               "(apt-get install libonnx-testdata, or set GR_ONNX_TESTDATA)\n", root);
        return 77;
    }
    qsort(rows, (size_t)n_rows, sizeof rows[0], by_op);
    printf("\n| op | passed | refused | wrong | refused for: the input (not one 1xCxHxW float32), "
           "the opset (< 11), the node (the first such reason) |\n|---|---|---|---|---|\n");
    for (int i = 0; i < n_rows; i++) {
        const op_row *r = &rows[i];
        printf("| `%s` | %d | %d | %d | %d, %d, %d%s%s |\n", r->op, r->count[PASSED],
               r->count[REFUSED], r->count[WRONG], r->why[WHY_INPUT], r->why[WHY_OPSET],
               r->why[WHY_NODE] + r->why[WHY_OTHER], r->reason[0] ? ": " : "", r->reason);
    }
    printf("| all: %d of %d cases | %d | %d | %d | |\n", selected, seen, total[PASSED],
           total[REFUSED], total[WRONG]);
    return total[WRONG] ? 1 : 0;
}
