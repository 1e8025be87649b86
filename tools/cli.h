/* graphrun CLI: argument parsing (kept separate from main so it can be tested and fuzzed) and the
 * subcommands. The CLI is a thin client of include/graphrun/runtime.h. */
#ifndef GR_TOOLS_CLI_H
#define GR_TOOLS_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "graphrun/runtime.h"

/* Exit codes (documented in the README). */
enum {
    GR_EXIT_OK = 0,
    GR_EXIT_FAILURE = 1,   /* CUDA / cuBLAS / internal failure while running */
    GR_EXIT_USAGE = 2,     /* bad command line */
    GR_EXIT_INPUT = 3,     /* unreadable or malformed cfg, weights, image or .npy; limits */
    GR_EXIT_NO_DEVICE = 4, /* --device gpu and no usable GPU */
    GR_EXIT_OOM = 5        /* out of memory */
};

int gr_cli_exit_code(gr_status st);

#define GR_CLI_MAX_INPUTS 64
#define GR_MAX_BATCH_CLI 4096

typedef struct gr_cli_options {
    const char *model;    /* built-in name, default "yolo" */
    const char *cfg;
    const char *weights;
    const char *names;
    unsigned long long seed;
    const char *inputs[GR_CLI_MAX_INPUTS];
    int n_inputs;
    const char *output;   /* image with boxes; NULL = default, "" = none */
    const char *save_output; /* .npy of the raw head outputs */
    const char *calib_cache; /* int8 calibration cache file */
    int json;
    gr_device device;
    gr_precision precision;
    int batch;
    float thresh, nms;
    int runs;             /* timed runs (median reported), default 1 */
    int tf32, fp16_accumulate; /* --tf32, --fp16-accumulate */
    int help, version, list_models;
    const char *input_list; /* --input-list FILE: one image path per line (streamed) */
    int threads;          /* decoding threads when streaming; 0 = one per core */
    int eager;            /* --eager: run the plan without the CUDA graph (use_cuda_graph = 0) */
} gr_cli_options;

/* Parse the detection command's arguments (argv[0] is the program). Returns 0, or GR_EXIT_USAGE
 * with a one-line message in err. Never exits, never allocates. */
int gr_cli_parse(int argc, char **argv, gr_cli_options *o, char *err, size_t errlen);

/* Shared by the detect paths: load the model and build the engine that `o` asks for, printing
 * the notices (model, synthetic weights, CPU fallback, device) on stderr. Returns an exit code;
 * on failure the error line is printed and nothing is left to free. */
int gr_cli_open(const gr_cli_options *o, gr_model **model, gr_engine **engine, gr_model_info *info);

/* Print an error line "graphrun: [what: ]<last error>" and return the exit code of st. */
int gr_cli_fail(gr_status st, const char *what);

/* JSON string literal of s on f, escaped. */
void gr_cli_json_string(FILE *f, const char *s);
/* `"detections": [...]` for n detections (class names from the model), each object after
 * `indent` ("" keeps it on one line). */
void gr_cli_json_detections(FILE *f, const gr_model *model, const gr_detection *dets, int n,
                            const char *indent);

/* 1 if path names a directory. */
int gr_cli_is_directory(const char *path);

/* Folders and lists of images (--input DIR, --input-list FILE): decode on worker threads,
 * double-buffered batches, JSON Lines on stdout. */
int gr_cli_detect_stream(const gr_cli_options *o);

/* Subcommands: argv[0] is the subcommand's name. */
int gr_cli_detect(int argc, char **argv);
int gr_cli_plan(int argc, char **argv);
int gr_cli_eval(int argc, char **argv);

#endif
