/* The table of tests/test_gpu_ops.c (every op x precision x odd shapes x batch through the GPU
 * engine against the CPU), and what reads it: the runs it expands to, each run's cfg, model and
 * input images. tests/test_ops_table.c checks every row on the CPU engine alone, in every build:
 * a new row (tests/support/ops_table.c) is checked there before any GPU runs it. */
#ifndef GR_TESTS_SUPPORT_OPS_TABLE_H
#define GR_TESTS_SUPPORT_OPS_TABLE_H

#include <stdint.h>

#include "graphrun/runtime.h"
#include "ops/ops.h"

enum { P32 = 1u << GR_PREC_FP32, P16 = 1u << GR_PREC_FP16, P8 = 1u << GR_PREC_INT8 };
#define PALL (P32 | P16 | P8)
#define ACT(a) (1u << (a))
#define EVERY_ACT ((1u << GR_ACT_COUNT) - 1u)
enum { EAGER = 1u << 0, DATAFLOW = 1u << 1 };
#define F32(algo) ((unsigned)(algo) << 4)
#define F32_ALGO(opts) ((gr_f32_algo)((opts) >> 4))

typedef struct gr_test_op_case {
    const char *name;     /* unique; names the row in every message; GR_TEST_OPS_FILTER matches
                             it */
    const char *layers;   /* the cfg after a generated [net] (width, height, channels=3): "$ACT"
                             stands for the activation under test */
    const char *cfg_file; /* or a whole cfg file (layers NULL): its width= / height= lines are set
                             to w / h, and its "activation=logistic" lines are the activation
                             under test where acts is not 0; or an ONNX model (a name ending in
                             .onnx: loaded as it is, its own weights; w, h must be its input's,
                             acts 0) */
    int w, h;             /* the network input, w x h x 3 (uint8: the engines' 3-channel input) */
    int batch;
    unsigned precs;       /* P32 | P16 | P8 */
    unsigned acts;        /* 0: the layers name their own; else one run per ACT(a) set */
    int out_c, out_h, out_w; /* output 0 per image, asserted */
    unsigned opts;        /* engine options forced: 0, or F32(algo) (fp32 runs: the conv
                             algorithm), EAGER (use_cuda_graph = 0: the same launches on a
                             stream), DATAFLOW (executor DATAFLOW, fp16 / int8: the notice must
                             say the engine kept it; no node-by-node trace) */
} gr_test_op_case;

extern const gr_test_op_case gr_test_op_cases[];
extern const int gr_test_op_n_cases;

/* One run: a row, its activation under test (-1: the row names its own), a precision. */
typedef struct gr_test_op_run {
    int row;
    int act;
    gr_precision prec;
} gr_test_op_run;

/* The runs of the rows whose name contains `filter` (NULL: every row; ONNX rows only in builds
 * with ONNX import), row by row, activation by activation, fp32 / fp16 / int8, into
 * runs[0..max); their count, or -1 when more than max. */
int gr_test_op_runs(const char *filter, gr_test_op_run *runs, int max);

/* The int8 calibration images of every run (NULL-terminated). */
extern const char *const gr_test_op_calib[];

/* The row's cfg text with activation `act` (NULL for a row without acts); malloc'ed. */
char *gr_test_op_cfg(const gr_test_op_case *c, const char *act);

/* That cfg written to cfg_path and loaded with synthetic weights (seed 7). */
gr_model *gr_test_op_model(const gr_test_op_case *c, const char *act, const char *cfg_path);

/* The row's batch: data/shapes-val/000.png, 001.png, ... letterboxed to w x h, uint8 NHWC back
 * to back (batch x h x w x 3); malloc'ed. */
uint8_t *gr_test_op_images(const gr_test_op_case *c);

#endif
