/* graphrun CLI: the declarations shared by its files. The CLI is a thin client of
 * include/graphrun/runtime.h: each command (cmd_*.c) depends on runtime.h and the shared files
 * (cli_args.c: flag parsing; cli_common.c: opening the model and engine, failing with the
 * documented exit code; cli_trace.c; json.c; results.c: the result formats), never on another
 * command.
 *
 * Internal headers: a tools file includes at most one, for what runtime.h does not (and should
 * not) offer a client:
 *   cli_trace.c, cmd_plan.c   planner/plan.h - the plan itself is what `graphrun plan` shows, and
 *                             the layer-by-layer CPU trace (--find-overflow, --per-layer) walks it
 *   cmd_compare.c             runtime/precision/calib_cache.h - the int8 ranges an engine was
 *                             built with, for --per-layer (it brings models/net.h: layers, heads)
 *   cmd_stream.c              runtime/files.h - the library's folder pipeline fed by a video's
 *                             frames (gr_pool_detect_source), for video input
 *   image_list.c              base/base.h - gr_read_file for --input-list's file, whose messages
 *                             read as the library's
 *   cmd_eval.c, coco.c        base/base.h - gr_fail, so its file errors read as library errors
 *                             (and gr_read_file for the COCO files)
 *   json.c, results.c         runtime/jsonl.h - the library's JSON text (strings, detections, an
 *                             image's record), so the CLI's JSON Lines and the folder pipeline's
 *                             gr_file_result.jsonl are one function's bytes
 */
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
    int json;             /* --json: --format json */
    int format;           /* --format (gr_result_format, tools/results.h); 0 = the mode's own */
    int save_conf;        /* --save-conf: yolo-txt's 6th column */
    gr_device device;
    int n_devices;        /* --device gpu:N[,M...]: the CUDA ordinals listed (0: none listed) */
    int devices[GR_MAX_DEVICES];
    int all_devices;      /* --device gpu:all: every visible GPU */
    gr_precision precision;
    int batch;
    float thresh, nms;
    int runs;             /* timed runs (median reported), default 1 */
    int runs_given;       /* --runs was on the command line (refused in folder mode) */
    int help, version, list_models;
    const char *calib_images;     /* --calib-images DIR */
    int find_overflow;            /* --find-overflow */
    const char *input_list; /* --input-list FILE: one image path per line (streamed) */
    int threads;          /* decoding threads when streaming; 0 = one per core */
    int eager;            /* --eager: run the plan without the CUDA graph (use_cuda_graph = 0) */
    int inflight;         /* engine slots (runs in flight); set by the streaming path, 0 = 1 */
    int fast_decode;      /* --fast-decode: streaming only, JPEGs >= 2x the input DCT-scaled */
    int strict_weights;   /* --strict-weights: NaN/Inf among the weights fail the load */
    const char *engine_file; /* --engine FILE: a saved engine instead of building one */
    unsigned long long given; /* bit id: flag id given on the command line (tools/cli_args.c) */
    int input_type;       /* --input-type: GR_CLI_INPUT_AUTO (default), _IMAGE, _VIDEO */
    int decode;           /* --decode: GR_CLI_DECODE_AUTO (default), _CPU, _GPU (folder mode) */
    float io_timeout;     /* --io-timeout S: a network stream's wait for data (0: for ever) */
    gr_preprocess preprocess; /* --letterbox / --stretch (default auto: the model's) */
    /* The engine options of graphrun/options.def's flags (--tf32, --calib, --split-k, ...), the
     * library's defaults where not given; engine_given: bit r, row r's flag was given. */
    gr_engine_options engine;
    unsigned long long engine_given;
} gr_cli_options;

#define GR_CLI_IO_TIMEOUT_DEFAULT 10.0f

/* --decode: where a folder's JPEGs are decoded; auto is the GPU where the engine can (a GPU
 * engine of a build with nvJPEG), else the CPU. */
enum { GR_CLI_DECODE_AUTO = 0, GR_CLI_DECODE_CPU = 1, GR_CLI_DECODE_GPU = 2 };

/* --input-type: what --input is; auto decides from the name and, for a file with no known
 * extension, FFmpeg's probe (tools/video.h, gr_video_is_input). */
enum { GR_CLI_INPUT_AUTO = 0, GR_CLI_INPUT_IMAGE = 1, GR_CLI_INPUT_VIDEO = 2 };

/* ---- flag parsing (tools/cli_args.c): one parser for every subcommand ---------------------- */

/* A flag of a command: --name, or --name VALUE / --name=VALUE when takes_value;
 * GR_CLI_SEVERAL_VALUES: also the arguments after its value up to the next flag, each applied as
 * one more value (--input a.jpg b.jpg c.jpg, what a shell glob gives). */
#define GR_CLI_SEVERAL_VALUES 2
typedef struct gr_cli_flag {
    const char *name;
    int id;
    int takes_value;
} gr_cli_flag;

/* Apply flag `id` (value NULL for a flag without one). Returns 0, or GR_EXIT_USAGE with a
 * one-line message in err (gr_cli_usage_error). */
typedef int (*gr_cli_apply_fn)(void *ctx, int id, const char *name, const char *value, char *err,
                               size_t errlen);

/* The subcommands, as graphrun/options.def's rows name them: which command lines offer a row's
 * flag. DETECT is also build's and compare's (they parse detect's flags). */
#define GR_CMD_DETECT 0x01u
#define GR_CMD_COMPARE 0x02u
#define GR_CMD_PLAN 0x04u
#define GR_CMD_EVAL 0x08u
#define GR_CMD_BENCH 0x10u
#define GR_CMD_BUILD 0x20u
#define GR_CMD_ENGINES (GR_CMD_DETECT | GR_CMD_PLAN | GR_CMD_EVAL | GR_CMD_BENCH)
#define GR_CMD_FIXED 0x100u /* a saved engine (--engine FILE) fixes it: refused with one */

typedef struct gr_cli_parser {
    const char *command;       /* "graphrun", "graphrun plan": messages and the --help hint */
    const gr_cli_flag *own;    /* the command's flags (name NULL ends the table), or NULL */
    const gr_cli_flag *shared; /* a table shared with another command (compare: detect's) */
    gr_cli_apply_fn apply;
    void *ctx;
    int help, version;         /* out: --help / -h, --version seen */
    const gr_cli_flag *several; /* the last flag, when it takes several values (parser state) */
    /* The engine option flags of graphrun/options.def (after own and shared: a command's own flag
     * of the same name wins): those whose row names one of `commands`' bits, written into
     * *engine (NULL: none offered); bit r of *engine_given (may be NULL) set for row r. On/off
     * flags read --flag, --no-flag, --flag on|off (|auto for a gr_toggle), --flag=VALUE. */
    gr_engine_options *engine;
    unsigned commands;
    unsigned long long *engine_given;
} gr_cli_parser;

/* argv[1..]: --help, -h and --version in every command; "unknown option '--x' (see COMMAND
 * --help)", "missing value for '--x'", "unexpected argument 'x'". Returns 0 or GR_EXIT_USAGE
 * with a one-line message in err. Pure: no I/O, no allocation. */
int gr_cli_parse_flags(gr_cli_parser *p, int argc, char **argv, char *err, size_t errlen);
/* The same, then what every command does with the outcome: a usage error on stderr (exit 2),
 * usage(stdout) for --help, "graphrun VERSION" for --version (exit 0). Returns -1 to go on, else
 * the exit status. */
int gr_cli_run_parser(gr_cli_parser *p, int argc, char **argv, void (*usage)(FILE *));
/* The help lines of the engine option flags `commands` offer (graphrun/options.def), wrapped as
 * the rest of the help. */
void gr_cli_engine_usage(FILE *f, unsigned commands);
/* The flag of the first row with all of `bits` whose bit is set in `given`, else NULL. */
const char *gr_cli_engine_given_flag(unsigned long long given, unsigned bits);
/* The one fill of engine options for a build: the command line's (`flags`: a parser's *engine,
 * the library's defaults where no flag was given) with the device, precision and batch of this
 * build. Whatever else a command sets (calibration images, inflight) it sets on *eo after. */
void gr_cli_engine_options(const gr_engine_options *flags, gr_device device, gr_precision precision,
                           int batch, gr_engine_options *eo);
/* printf into err, control characters shown as '?'; returns GR_EXIT_USAGE. */
int gr_cli_usage_error(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Whole-string numbers in [lo, hi] and device names: 1 when valid. */
int gr_cli_parse_int(const char *s, long lo, long hi, int *out);
int gr_cli_parse_float(const char *s, float lo, float hi, float *out);
int gr_cli_parse_device(const char *s, gr_device *out);
/* --device VALUE: auto, cpu, gpu (= gpu:0), gpu:all, gpu:N[,M...] (distinct ordinals, at most
 * GR_MAX_DEVICES; checked against the visible count when the pool is built). Returns 0, or
 * GR_EXIT_USAGE with a one-line message in err. Pure. */
int gr_cli_parse_device_list(const char *s, gr_cli_options *o, char *err, size_t errlen);
/* The device list as given: "gpu:0,1", "gpu:all", "gpu", "cpu", "auto" into buf. */
const char *gr_cli_device_text(const gr_cli_options *o, char *buf, size_t size);

/* The detect command's flags and their handler (ctx: gr_cli_options), which compare extends. */
extern const gr_cli_flag gr_cli_detect_flags[];
int gr_cli_detect_apply(void *ctx, int id, const char *name, const char *value, char *err,
                        size_t errlen);
const char *gr_cli_flag_name(int id);
void gr_cli_options_default(gr_cli_options *o);

/* After the flags: --json is --format json (both asking for two formats is an error), --save-conf
 * needs yolo-txt. Returns 0 or GR_EXIT_USAGE with a one-line message in err. */
int gr_cli_check_format(gr_cli_options *o, char *err, size_t errlen);

/* Parse the detection command's arguments (argv[0] is the program). Returns 0, or GR_EXIT_USAGE
 * with a one-line message in err. Never exits, never allocates. */
int gr_cli_parse(int argc, char **argv, gr_cli_options *o, char *err, size_t errlen);

/* Shared by the commands: load the model and build the engine that `o` asks for, printing the
 * notices (model, synthetic weights, CPU fallback, device, the GPU's memory) on stderr. With
 * --engine, load that file instead (*model stays NULL: gr_cli_model gives the engine's) and set
 * o->batch and o->precision to the file's. Returns an exit code; on failure the error line is
 * printed and nothing is left to free. */
int gr_cli_open(gr_cli_options *o, gr_model **model, gr_engine **engine, gr_model_info *info);
/* The same with a pool of one engine per device of --device (gpu:all, gpu:N,M; otherwise one
 * device), for the modes that spread batches over them. gr_cli_open refuses a list of several. */
int gr_cli_open_pool(gr_cli_options *o, gr_model **model, gr_pool **pool, gr_model_info *info);
/* The model of an open engine: `model`, or with --engine the engine's own. */
const gr_model *gr_cli_model(const gr_model *model, const gr_engine *engine);
/* --engine: every flag that would shape the plan must agree with the file (--model, --cfg,
 * --prec, --batch, --device) or is refused as having no effect (--weights, --calib*, ...).
 * Returns 0, or prints one line and returns GR_EXIT_USAGE. */
int gr_cli_check_engine_flags(const gr_cli_options *o, const gr_engine *engine);
/* The engine's precision as --prec names it: the widest of its layers (auto for a mixed map). */
gr_precision gr_cli_engine_precision(const gr_engine *engine);

/* Print an error line "graphrun: [what: ]<last error>" and return the exit code of st
 * (gr_cli_exit_code: docs/errors.md's table). */
int gr_cli_fail(gr_status st, const char *what);

/* JSON string literal of s on f (tools/json.c: runtime/jsonl.h's): escaped, and valid UTF-8
 * whatever the bytes of s (a byte that starts no well-formed UTF-8 sequence is written as
 * \ufffd). */
void gr_cli_json_string(FILE *f, const char *s);
/* `"detections": [...]` for n detections (class names from the model), each object after
 * `indent` ("" keeps it on one line). */
void gr_cli_json_detections(FILE *f, const gr_model *model, const gr_detection *dets, int n,
                            const char *indent);

/* 1 if path names a directory. */
int gr_cli_is_directory(const char *path);
/* Make the folder `path` and its missing parents (mkdir -p): 0, or GR_EXIT_INPUT after one line
 * on stderr naming the part that could not be made. */
int gr_cli_make_dir(const char *path);
/* DIR/<name of path> in the image's own format where the encoder writes it (.png, .jpg, .jpeg;
 * any other, .bmp .webp .tiff, as .png): where --output DIR draws it. */
void gr_cli_drawn_name(const char *dir, const char *path, char *out, size_t size);
/* An output must not destroy an input: refused (one line naming both, GR_EXIT_USAGE) when
 * `output` is one of inputs[0..n-1] (the same file by device and inode: links and other
 * spellings included) or, with is_dir (a folder the run writes into), when it holds one of them.
 * `flag` names the output in the message (--output, --save-output, -o). Every command that writes
 * files checks its outputs here before writing any. An output not there yet passes. */
int gr_cli_check_output(const char *flag, const char *output, int is_dir,
                        const char *const *inputs, int n);

/* Folders and lists of images (--input DIR, --input-list FILE) through the library's folder
 * pipeline (gr_pool_detect_files): JSON Lines (or --format) on stdout in input order. */
int gr_cli_detect_stream(const gr_cli_options *o);

/* The images of --input DIR and --input-list FILE (tools/image_list.c). gr_cli_read_image_dir:
 * the folder's .jpg, .jpeg, .png and .bmp files, and those named as other image types (.webp,
 * .tif, .gif, .heic ...: each fails with its format named), any case, no hidden file, sorted;
 * gr_cli_read_image_list: one path per line, as given (blank lines skipped, a trailing '\r'
 * dropped). Both append to *l (zeroed first) and return an exit code after one line on stderr;
 * free with gr_cli_image_list_free. */
typedef struct gr_cli_image_list {
    char **paths;
    int n, cap;
} gr_cli_image_list;
int gr_cli_read_image_dir(const char *dir, gr_cli_image_list *l);
int gr_cli_read_image_list(const char *file, gr_cli_image_list *l);
void gr_cli_image_list_free(gr_cli_image_list *l);

/* A video file, camera or stream (--input clip.mp4, /dev/video0, rtsp://...; --input-type):
 * its frames through the same pipeline (gr_pool_detect_source), JSON Lines with the frame index and
 * time, --output an annotated video. gr_cli_wants_video: 1 when the command line's input is
 * one. */
int gr_cli_wants_video(const gr_cli_options *o);
int gr_cli_detect_video(const gr_cli_options *o);

/* `graphrun [detect]` on files given one by one (--input FILE, repeated): tools/cmd_detect.c. */
int gr_cli_detect_images(const gr_cli_options *o);
void gr_cli_detect_usage(FILE *f);

/* Subcommands: argv[0] is the subcommand's name. */
int gr_cli_plan(int argc, char **argv);
int gr_cli_compare(int argc, char **argv);
int gr_cli_eval(int argc, char **argv);
int gr_cli_build(int argc, char **argv);

/* ---- shared by the commands (tools/cli_common.c) ----------------------------------------- */

/* The JPEG and PNG files of a folder, sorted by name, NULL-terminated; free with
 * gr_cli_free_list. Returns 0, or an exit code after printing one line. */
int gr_cli_list_images(const char *dir, char ***paths);
void gr_cli_free_list(char **paths);

/* The engine's build notices on stderr, "graphrun: " before each line. */
void gr_cli_print_notices(const gr_engine *engine);
/* Calibration options from the command line into engine options (images: the list above or
 * NULL for the bundled photos); a progress bar on stderr when it is a terminal. */
void gr_cli_calib_options(const gr_cli_options *o, const char *const *images,
                          gr_engine_options *eo);

/* One stderr line per engine output holding NaN/Inf after a run; returns how many such outputs.
 * `what` names the run (precision and method). */
int gr_cli_report_nonfinite(const gr_engine *engine, const char *what);

/* stdout's buffered results reached their file (fflush, ferror): 0, or a line on stderr
 * ("writing the results to stdout: No space left on device", once) and GR_EXIT_INPUT, the I/O
 * status. gr_cli_close_stdout also closes it (main, at exit). SIGPIPE is ignored (main), so a
 * closed pipe is EPIPE here rather than a silent death. */
int gr_cli_check_stdout(void);
int gr_cli_close_stdout(void);

/* Images are decoded to 3 channels (RGB): 0 when the engine's input has 3, else a line naming
 * the network's channels and GR_EXIT_INPUT (a .npy of its shape is the way in). */
int gr_cli_check_image_input(const gr_engine *engine, const char *model_name);
/* The same before an engine exists: the model's input (gr_model_info). */
int gr_cli_check_image_channels(int channels, int height, int width, const char *model_name);

/* Sort ascending; the q-th percentile (q in [0, 100]) of n sorted values, interpolated between
 * the closest ranks: p99 >= p50 for any n, 0 for n = 0. */
void gr_cli_sort(double *values, int n);
double gr_cli_percentile(const double *sorted, int n, double q);

/* The model of the command line (--model or --cfg, --weights or synthetic from --seed). */
gr_status gr_cli_load_model(const gr_cli_options *o, gr_model **model);

/* ---- inside the network (tools/cli_trace.c, the planner's CPU trace) ----------------------- */

/* The network of the command line's model (cfg/builtin, weights or synthetic), as the planner
 * sees it. */
struct gr_net;
gr_status gr_cli_load_net(const gr_cli_options *o, struct gr_net **net);

/* Run `net` as a CPU plan of precision prec on one float CHW input and call fn after each node
 * that computes a layer's value, with that value as float NCHW (n values). int8 needs the ranges
 * (layer_range[n_layers], input_range). fn returns nonzero to stop. */
typedef int (*gr_cli_layer_fn)(int layer, int node_kind, const float *values, size_t n,
                               void *user);
gr_status gr_cli_trace_layers(const struct gr_net *net, gr_precision prec,
                              const float *layer_range, float input_range, const float *input,
                              gr_cli_layer_fn fn, void *user);

/* --find-overflow: rerun `input` layer by layer in the CPU emulation of the command line's
 * precision and name the first layer whose output is not finite (stderr). */
gr_status gr_cli_find_overflow(const gr_cli_options *o, const float *input);

#endif
