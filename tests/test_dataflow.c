/* The dataflow program (experimental/dataflow/plan.h) and its protocol
 * (experimental/dataflow/format.h), on the CPU.
 *
 * The protocol is emulated the way the persistent kernel (docs/dataflow.md) runs it: threads
 * stand for the kernel's blocks (SMs); each claims the next task of the static order with an
 * atomic add, waits for each dependency's flag to equal the run's epoch with acquire loads (a
 * bounded spin: past the program's timeout it records the error and abandons the run), "runs" the
 * task and publishes its flag with a release store; the last thread to finish writes the run's
 * status and readies the state for the next run (epoch, claim counter, error) - no reset from the
 * "host" between runs. The same C11 acquire/release pairs as the kernel's PTX.
 *
 * Running a task touches a shadow memory (one 32-bit tag per byte of the arena and the io block:
 * the tensor and the epoch that last wrote it) at exactly the bytes the kernel addresses from the
 * program's views: its reads must find the tensor they expect, written in this run; its writes
 * tag its output tile. The tags are plain ints, so under ThreadSanitizer (-DGR_SANITIZE=thread)
 * every read of another task's output must be ordered after that write by the flags' release /
 * acquire pairs, or TSan reports the race. The injected bugs (a dependency dropped, a flag never
 * published) use atomic tags instead (the race there is the point): the shadow check, or the
 * timeout turned into the run's error, must catch them. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "experimental/dataflow/plan.h"
#include "planner/plan.h"
#include "planner/tasks.h"
#include "tests/support/plan_nets.h"

/* ---- plans ------------------------------------------------------------------------------- */

/* A plan as the GPU engine's dataflow variant builds it: its fusions, no storage reuse (or with
 * reuse, to run the protocol on WAR edges too), int8 scales set. */
static gr_plan *plan_for(const gr_net *net, gr_precision prec, int no_reuse, int concat_in_place)
{
    gr_plan_options opt;
    gr_plan_options_default(&opt);
    opt.precision = prec;
    opt.fuse_maxpool = opt.fuse_input_quantize = opt.fuse_output_dequantize = 1;
    opt.no_reuse = no_reuse;
    opt.concat_in_place = concat_in_place;
    gr_plan *plan = NULL;
    ck_assert_msg(gr_plan_build(net, &opt, &plan) == GR_OK, "plan: %s", gr_last_error());
    if (!plan->scales_ready) {
        float *ranges = malloc((size_t)net->n_layers * sizeof *ranges);
        for (int l = 0; l < net->n_layers; l++)
            ranges[l] = 1.0f + 0.25f * (float)(l % 5);
        ck_assert_int_eq(gr_plan_set_ranges(plan, ranges, 1.0f), GR_OK);
        free(ranges);
    }
    return plan;
}

static gr_df_program *program_for(const gr_plan *plan, int target, uint64_t timeout_ns)
{
    gr_task_options to;
    gr_task_options_default(&to);
    to.target_tasks = target;
    gr_task_graph *g = NULL;
    ck_assert_msg(gr_task_graph_build(plan, &to, &g) == GR_OK, "%s", gr_last_error());
    gr_df_options o;
    gr_df_options_default(&o);
    /* threads standing for blocks share 2 cores here (and run 5-15x slower under TSan): a clean
     * run's waits get 20 s, the timeout test its own */
    o.timeout_ns = timeout_ns ? timeout_ns : 20ull * 1000 * 1000 * 1000;
    gr_df_program *p = NULL;
    ck_assert_msg(gr_df_program_build(plan, g, &o, &p) == GR_OK, "%s", gr_last_error());
    gr_task_graph_free(g);
    return p;
}

/* ---- the emulation ----------------------------------------------------------------------- */

typedef struct emu {
    const gr_plan *plan;
    const gr_df_program *p;
    int n_threads;
    /* the device state (gr_df_state) */
    _Atomic uint32_t epoch, next_task, blocks_done;
    _Atomic int32_t error_task, error_dep;
    _Atomic uint32_t *flags;
    gr_df_status status; /* the last thread's, read after the join */
    /* shadow memory: every space back to back */
    size_t base[GR_DF_MAX_SPACES], total;
    uint32_t *tag;          /* plain (TSan checks the ordering) */
    _Atomic uint32_t *atag; /* atomic (injected bugs) */
    int atomic_tags;
    /* knobs */
    int max_delay_us;       /* random delay before a task's work: 0 .. max (1 task in 4) */
    int drop_task, drop_dep; /* task drop_task does not wait for task drop_dep */
    int stall_task;         /* this task waits (bounded) for drop_task to finish before working */
    int unpublished;        /* this task never publishes its flag */
    uint64_t seed;
    /* findings */
    _Atomic int bad;        /* reads that found the wrong tensor or epoch */
    atomic_flag why_taken;
    char why[256];
} emu;

typedef struct block_arg {
    emu *e;
    int index;
} block_arg;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t make_tag(int tensor, uint32_t epoch)
{
    return (epoch & 0xffffu) << 16 | (uint32_t)(tensor + 1);
}

static uint32_t tag_get(emu *e, size_t at)
{
    return e->atomic_tags ? atomic_load_explicit(&e->atag[at], memory_order_relaxed) : e->tag[at];
}

static void tag_set(emu *e, size_t at, uint32_t v)
{
    if (e->atomic_tags)
        atomic_store_explicit(&e->atag[at], v, memory_order_relaxed);
    else
        e->tag[at] = v;
}

/* Does a read of tensor t accept what tensor `got` wrote (t itself, a slice of t written by its
 * producer, or the tensor t is a view of)? */
static int accepts(const gr_plan *plan, int t, int got)
{
    return got == t || (got >= 0 && plan->tensors[got].view_of == t) ||
           (got >= 0 && plan->tensors[t].view_of == got);
}

/* Byte address in the shadow of element (n, c, y, x) of view v: the kernel's addressing. */
static size_t addr(const emu *e, const gr_df_view *v, int n, int c, int y, int x)
{
    const size_t elem = gr_dtype_size((gr_dtype)v->dtype);
    size_t i = v->layout ? (((size_t)n * v->h + y) * v->w + x) * v->c_stride + v->c_offset + c
                         : (((size_t)n * v->c_stride + v->c_offset + c) * v->h + y) * v->w + x;
    return e->base[v->space] + v->offset + i * elem;
}

/* Read (check) or write rows [r0, r1) x channels [c0, c1) of image n of view v, every column. */
static int touch(emu *e, const gr_df_view *v, int n, int r0, int r1, int c0, int c1, int write,
                 uint32_t epoch, int task)
{
    const size_t elem = gr_dtype_size((gr_dtype)v->dtype);
    const uint32_t want = make_tag(v->tensor, epoch);
    for (int y = r0 < 0 ? 0 : r0; y < r1 && y < v->h; y++)
        for (int x = 0; x < v->w; x++)
            for (int c = c0; c < c1; c++) {
                const size_t at = addr(e, v, n, c, y, x);
                for (size_t b = 0; b < elem; b++) {
                    if (write) {
                        tag_set(e, at + b, want);
                        continue;
                    }
                    const uint32_t got = tag_get(e, at + b);
                    const int got_tensor = (int)(got & 0xffffu) - 1;
                    if ((got >> 16) == (epoch & 0xffffu) && accepts(e->plan, v->tensor, got_tensor))
                        continue;
                    atomic_fetch_add(&e->bad, 1);
                    if (!atomic_flag_test_and_set(&e->why_taken))
                        snprintf(e->why, sizeof e->why, "task %d reads tensor %d (row %d, col %d, "
                                 "ch %d): finds tensor %d of epoch %u, run epoch %u", task,
                                 v->tensor, y, x, c, got_tensor, got >> 16, epoch & 0xffffu);
                    return 0;
                }
            }
    return 1;
}

/* The rows of its input a task of node dn reads, from the program's parameters alone (the kernel's
 * loops), clipped to the input. */
static void input_rows(const gr_df_node *dn, int k, int r0, int r1, int *lo, int *hi)
{
    const int h = dn->in[k].h;
    switch (dn->op) {
    case GR_DF_OP_CONV:
        if (dn->flags & GR_DF_CONV_POOL) { /* pooled rows -> conv rows */
            const int c0 = r0 * dn->pool_stride + dn->pool_offset;
            const int c1 = (r1 - 1) * dn->pool_stride + dn->pool_offset + dn->pool_size;
            r0 = c0 < 0 ? 0 : c0;
            r1 = c1 > dn->conv_h ? dn->conv_h : c1;
        }
        *lo = r0 * dn->stride - dn->pad;
        *hi = (r1 - 1) * dn->stride - dn->pad + dn->ksize;
        break;
    case GR_DF_OP_MAXPOOL:
        *lo = r0 * dn->pool_stride + dn->pool_offset;
        *hi = (r1 - 1) * dn->pool_stride + dn->pool_offset + dn->pool_size;
        break;
    case GR_DF_OP_UPSAMPLE:
        *lo = r0 / dn->pool_stride;
        *hi = (r1 - 1) / dn->pool_stride + 1;
        break;
    default: *lo = r0, *hi = r1; break;
    }
    *lo = *lo < 0 ? 0 : *lo;
    *hi = *hi > h ? h : *hi;
}

/* A task's shadow work: every read, then its output tile (and the padding channels when it is the
 * last slice of an NHWC output). */
static void run_task(emu *e, int t, uint32_t epoch)
{
    const gr_df_task *dt = &e->p->tasks[t];
    const gr_df_node *dn = &e->p->nodes[dt->node];
    for (int k = 0; k < dn->n_inputs; k++) {
        const gr_df_view *in = &dn->in[k];
        int lo, hi;
        input_rows(dn, k, dt->row0, dt->row0 + dt->rows, &lo, &hi);
        /* a conv reads the whole K of its input pixels: cin_pad channels (u8: the real ones) */
        int c1 = in->c;
        if (dn->op == GR_DF_OP_CONV && !(dn->flags & GR_DF_CONV_QUANTIZE_IN))
            c1 = dn->cin_pad;
        if (!touch(e, in, dt->image, lo, hi, 0, c1, 0, epoch, t))
            return;
    }
    const gr_df_view *out = &dn->out;
    int c0 = dt->ch0, c1 = dt->ch0 + dt->chs;
    if (dn->op != GR_DF_OP_CONV)
        c0 = 0, c1 = out->c;
    if (out->layout && c1 == out->c)
        c1 = out->c_pad;
    touch(e, out, dt->image, dt->row0, dt->row0 + dt->rows, c0, c1, 1, epoch, t);
}

static void delay_us(int us)
{
    struct timespec ts = {0, (long)us * 1000};
    nanosleep(&ts, NULL);
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The wait of the kernel: each dependency's flag == epoch (acquire), bounded; 0 on an error. */
static int wait_deps(emu *e, int t, uint32_t epoch)
{
    const gr_df_task *dt = &e->p->tasks[t];
    for (int d = 0; d < dt->n_deps; d++) {
        const int dep = e->p->deps[dt->dep_begin + d];
        if (t == e->drop_task && dep == e->drop_dep)
            continue;
        const uint64_t start = now_ns();
        for (unsigned spins = 0;; spins++) {
            if (atomic_load_explicit(&e->flags[dep], memory_order_acquire) == epoch)
                break;
            if (atomic_load_explicit(&e->error_task, memory_order_relaxed) != 0)
                return 0;
            if (now_ns() - start > e->p->header->timeout_ns) {
                int32_t none = 0;
                if (atomic_compare_exchange_strong_explicit(&e->error_task, &none, t + 1,
                                                            memory_order_relaxed,
                                                            memory_order_relaxed))
                    atomic_store_explicit(&e->error_dep, dep, memory_order_relaxed);
                return 0;
            }
            if (spins % 64 == 63)
                sched_yield();
        }
    }
    return 1;
}

static void *block_main(void *arg)
{
    block_arg *a = arg;
    emu *e = a->e;
    const int n_tasks = e->p->header->n_tasks;
    const uint32_t epoch = atomic_load_explicit(&e->epoch, memory_order_relaxed) + 1;
    uint64_t rng = e->seed * 0x9E3779B97F4A7C15ull + (uint64_t)a->index * 7919u + epoch + 1;
    for (;;) {
        const uint32_t t = atomic_fetch_add_explicit(&e->next_task, 1, memory_order_relaxed);
        if (t >= (uint32_t)n_tasks || atomic_load_explicit(&e->error_task, memory_order_relaxed))
            break;
        if (!wait_deps(e, (int)t, epoch))
            break;
        if (e->max_delay_us && xorshift(&rng) % 4 == 0)
            delay_us((int)(xorshift(&rng) % (uint64_t)(e->max_delay_us + 1)));
        if ((int)t == e->stall_task) { /* the adversarial schedule: work after drop_task */
            const uint64_t start = now_ns();
            while (atomic_load_explicit(&e->flags[e->drop_task], memory_order_acquire) != epoch &&
                   now_ns() - start < 2000000000ull)
                delay_us(50);
        }
        run_task(e, (int)t, epoch);
        if ((int)t != e->unpublished)
            atomic_store_explicit(&e->flags[t], epoch, memory_order_release);
    }
    /* the end of the run: the last block reports and readies the state */
    const uint32_t done = atomic_fetch_add_explicit(&e->blocks_done, 1, memory_order_acq_rel);
    if (done == (uint32_t)e->n_threads - 1) {
        const int32_t err = atomic_load_explicit(&e->error_task, memory_order_relaxed);
        e->status.magic = GR_DF_MAGIC;
        e->status.epoch = epoch;
        e->status.failed_task = err ? err - 1 : -1;
        e->status.waited_on = err ? atomic_load_explicit(&e->error_dep, memory_order_relaxed) : -1;
        atomic_store_explicit(&e->next_task, 0, memory_order_relaxed);
        atomic_store_explicit(&e->blocks_done, 0, memory_order_relaxed);
        atomic_store_explicit(&e->error_task, 0, memory_order_relaxed);
        atomic_store_explicit(&e->error_dep, 0, memory_order_relaxed);
        atomic_store_explicit(&e->epoch, epoch, memory_order_release);
    }
    return NULL;
}

static void emu_init(emu *e, const gr_plan *plan, const gr_df_program *p, int threads,
                     int atomic_tags)
{
    memset(e, 0, sizeof *e);
    e->plan = plan;
    e->p = p;
    e->n_threads = threads;
    e->drop_task = e->drop_dep = e->stall_task = e->unpublished = -1;
    atomic_flag_clear(&e->why_taken);
    e->flags = calloc((size_t)p->header->n_flags + 1, sizeof *e->flags);
    for (int s = 0; s < p->header->n_spaces; s++) {
        e->base[s] = e->total;
        e->total += p->header->space_bytes[s];
    }
    e->atomic_tags = atomic_tags;
    if (atomic_tags)
        e->atag = calloc(e->total + 1, sizeof *e->atag);
    else
        e->tag = calloc(e->total + 1, sizeof *e->tag);
    ck_assert(e->flags && (e->atag || e->tag));
}

static void emu_free(emu *e)
{
    free(e->flags);
    free(e->tag);
    free((void *)e->atag);
}

/* One run: the input copy (tags of this run's epoch), the blocks, then the output copy's check:
 * every output byte written in this run by its tensor. Returns the status; e->bad counts reads
 * that failed. */
static gr_df_status emu_run(emu *e)
{
    const uint32_t epoch = atomic_load(&e->epoch) + 1;
    const gr_plan *plan = e->plan;
    for (int t = 0; t < plan->n_tensors; t++)
        if (t == plan->input_tensor)
            for (size_t b = 0; b < e->p->header->space_bytes[GR_DF_SPACE_INPUT]; b++)
                tag_set(e, e->base[GR_DF_SPACE_INPUT] + b, make_tag(t, epoch));
    atomic_store(&e->bad, 0);
    atomic_flag_clear(&e->why_taken);
    e->why[0] = '\0';
    memset(&e->status, 0, sizeof e->status);
    pthread_t th[64];
    block_arg args[64];
    ck_assert_int_le(e->n_threads, 64);
    for (int i = 0; i < e->n_threads; i++) {
        args[i] = (block_arg){e, i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, block_main, &args[i]), 0);
    }
    for (int i = 0; i < e->n_threads; i++)
        pthread_join(th[i], NULL);
    return e->status;
}

/* Every byte of every output holds its tensor, written in epoch `epoch`. */
static int outputs_complete(emu *e, uint32_t epoch)
{
    for (int k = 0; k < e->plan->n_outputs; k++) {
        const int t = e->plan->output_tensors[k];
        const gr_plan_tensor *x = &e->plan->tensors[t];
        const size_t start = e->base[GR_DF_SPACE_OUTPUT + k];
        for (size_t b = 0; b < x->bytes; b++) {
            const uint32_t got = tag_get(e, start + b);
            if (got != make_tag(t, epoch)) {
                snprintf(e->why, sizeof e->why, "output %d byte %zu: tag %08x, want %08x", k, b,
                         got, make_tag(t, epoch));
                return 0;
            }
        }
    }
    return 1;
}

/* Runs of `p` on `threads` blocks, each checked; the epoch advances by one per run and every flag
 * ends equal to it. */
static void check_runs(const gr_plan *plan, const gr_df_program *p, int threads, int runs,
                       int max_delay_us, uint64_t seed)
{
    emu e;
    emu_init(&e, plan, p, threads, 0);
    e.max_delay_us = max_delay_us;
    for (int r = 0; r < runs; r++) {
        e.seed = seed + (uint64_t)r;
        gr_df_status st = emu_run(&e);
        ck_assert_msg(atomic_load(&e.bad) == 0, "%d threads, run %d: %s", threads, r, e.why);
        ck_assert_uint_eq(st.magic, GR_DF_MAGIC);
        ck_assert_uint_eq(st.epoch, (uint32_t)r + 1);
        ck_assert_int_eq(st.failed_task, -1);
        ck_assert_uint_eq(atomic_load(&e.epoch), (uint32_t)r + 1);
        ck_assert_uint_eq(atomic_load(&e.next_task), 0);
        ck_assert_msg(outputs_complete(&e, (uint32_t)r + 1), "%s", e.why);
        for (int t = 0; t < p->header->n_tasks; t++)
            ck_assert_uint_eq(atomic_load(&e.flags[t]), (uint32_t)r + 1);
    }
    emu_free(&e);
}

/* ---- tests -------------------------------------------------------------------------------- */

static gr_net *builtin(const char *cfg, int side)
{
    gr_net *net = NULL;
    ck_assert_int_eq(gr_test_builtin_at(cfg, side, &net), GR_OK);
    return net;
}

static gr_net *dag_net(void)
{
    gr_net *net = NULL;
    ck_assert_int_eq(gr_net_parse_file("tests/data/dataflow_dag.cfg", &net), GR_OK);
    ck_assert_int_eq(gr_net_synthesize_weights(net, 1), GR_OK);
    return net;
}

START_TEST(programs_are_flat_checked_and_deterministic)
{
    static const char *const cfgs[] = {"yolov2-tiny.cfg", "yolov3-tiny.cfg"};
    for (int i = 0; i < 2; i++)
        for (int prec = GR_PREC_FP16; prec <= GR_PREC_INT8; prec++) {
            gr_net *net = builtin(cfgs[i], 416);
            gr_plan *plan = plan_for(net, (gr_precision)prec, 1, 1);
            gr_df_program *a = program_for(plan, 132, 0), *b = program_for(plan, 132, 0);
            ck_assert_uint_eq(a->bytes, b->bytes);
            ck_assert(!memcmp(a->blob, b->blob, a->bytes));
            const gr_df_header *h = a->header;
            ck_assert_int_eq(a->n_war, 0); /* no reuse: RAW edges only */
            ck_assert_int_eq(h->n_deps, a->n_raw);
            ck_assert_int_eq(gr_df_program_check(a), GR_OK);
            /* every computing node of the plan is a program node, and each conv is one */
            int convs = 0, program_convs = 0;
            for (int n = 0; n < plan->n_nodes; n++)
                convs += plan->nodes[n].kind == GR_OP_CONV;
            for (int n = 0; n < h->n_nodes; n++)
                program_convs += a->nodes[n].op == GR_DF_OP_CONV;
            ck_assert_int_eq(program_convs, convs);
            /* the I/O fusions: the first conv reads the u8 input, the heads write f32 NCHW */
            ck_assert(a->nodes[0].flags & GR_DF_CONV_QUANTIZE_IN);
            ck_assert_int_eq(a->nodes[0].in[0].space, GR_DF_SPACE_INPUT);
            int heads = 0;
            for (int n = 0; n < h->n_nodes; n++)
                if (a->nodes[n].flags & GR_DF_CONV_DEQUANT_OUT) {
                    ck_assert_int_ge(a->nodes[n].out.space, GR_DF_SPACE_OUTPUT);
                    heads++;
                }
            ck_assert_int_eq(heads, plan->n_outputs);
            /* weights unbound until the runtime binds them; binding finds the node */
            ck_assert(a->nodes[0].w_offset == GR_DF_UNBOUND);
            ck_assert_int_eq(gr_df_program_bind_weights(a, a->nodes[0].plan_node, 0, 256, 512),
                             GR_OK);
            ck_assert(a->nodes[0].mul_offset == 256);
            ck_assert_int_eq(gr_df_program_bind_weights(a, 0, 0, 0, 0), GR_ERR_INVALID_ARGUMENT);
            gr_df_program_free(a);
            gr_df_program_free(b);
            gr_plan_free(plan);
            gr_net_free(net);
        }
}
END_TEST

START_TEST(no_reuse_leaves_only_raw_edges)
{
    gr_net *net = builtin("yolov2-tiny.cfg", 416);
    gr_plan *reuse = plan_for(net, GR_PREC_INT8, 0, 1), *own = plan_for(net, GR_PREC_INT8, 1, 1);
    ck_assert_int_eq(gr_plan_check(own), GR_OK);
    ck_assert_uint_eq(own->arena_bytes, own->naive_bytes); /* every buffer its own bytes */
    ck_assert_uint_lt(reuse->arena_bytes, own->arena_bytes);
    ck_assert_str_eq(own->placement, "no reuse");
    gr_task_graph *g_reuse = NULL, *g_own = NULL;
    ck_assert_int_eq(gr_task_graph_build(reuse, NULL, &g_reuse), GR_OK);
    ck_assert_int_eq(gr_task_graph_build(own, NULL, &g_own), GR_OK);
    ck_assert_int_gt(g_reuse->n_war, 0);
    ck_assert_int_eq(g_own->n_war, 0);
    ck_assert_int_eq(g_own->n_raw, g_reuse->n_raw); /* the data edges do not change */
    ck_assert_int_eq(g_own->n_tasks, g_reuse->n_tasks);
    ck_assert_int_le(g_own->max_fan_in, g_reuse->max_fan_in);
    gr_task_graph_free(g_reuse);
    gr_task_graph_free(g_own);
    gr_plan_free(reuse);
    gr_plan_free(own);
    gr_net_free(net);
}
END_TEST

START_TEST(unsupported_nodes_are_named)
{
    gr_net *net = builtin("yolov2-tiny.cfg", 96);
    gr_plan *plan = plan_for(net, GR_PREC_FP32, 1, 1); /* fp32 convs: the kernel has none */
    ck_assert_int_eq(gr_df_plan_supported(plan), GR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(gr_last_error(), "unsupported: conv (node 1, computes in fp32)") != NULL,
                  "%s", gr_last_error());
    gr_task_graph *g = NULL;
    ck_assert_int_eq(gr_task_graph_build(plan, NULL, &g), GR_OK);
    gr_df_program *p = NULL;
    ck_assert_int_eq(gr_df_program_build(plan, g, NULL, &p), GR_ERR_UNSUPPORTED);
    ck_assert_ptr_null(p);
    gr_task_graph_free(g);
    gr_plan_free(plan);
    gr_net_free(net);
    /* the route/reorg net: a reorg (reads every row) is not in the first version */
    ck_assert_int_eq(gr_test_route_reorg_net(&net), GR_OK);
    plan = plan_for(net, GR_PREC_INT8, 1, 1);
    ck_assert_int_eq(gr_df_plan_supported(plan), GR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(gr_last_error(), "unsupported: reorg (node") != NULL, "%s",
                  gr_last_error());
    gr_plan_free(plan);
    gr_net_free(net);
    /* [local_avgpool] (f32 only, between a dequantize and a quantize) has no dataflow kernel */
    static const char cfg[] = "[net]\nwidth=32\nheight=32\nchannels=3\n"
                              "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=leaky\n"
                              "[local_avgpool]\nsize=2\nstride=2\n"
                              "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=leaky\n";
    ck_assert_int_eq(gr_net_parse(cfg, strlen(cfg), "local_avgpool.cfg", &net), GR_OK);
    ck_assert_int_eq(gr_net_synthesize_weights(net, 1), GR_OK);
    plan = plan_for(net, GR_PREC_INT8, 1, 1);
    ck_assert_int_eq(gr_df_plan_supported(plan), GR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(gr_last_error(), "unsupported: local_avgpool (node") != NULL, "%s",
                  gr_last_error());
    gr_plan_free(plan);
    gr_net_free(net);
}
END_TEST

/* YOLOv2-tiny, yolov3-tiny and the DAG net, int8 and fp16, batch 1: 1, 2, 8 and 32 blocks, several
 * runs on one state (the epoch advancing, nothing reset), random delays. */
START_TEST(protocol_runs_every_model_on_any_number_of_blocks)
{
    static const char *const cfgs[] = {"yolov2-tiny.cfg", "yolov3-tiny.cfg", NULL};
    static const int threads[] = {1, 2, 8, 32};
    for (int i = 0; i < 3; i++)
        for (int prec = GR_PREC_FP16; prec <= GR_PREC_INT8; prec++) {
            gr_net *net = cfgs[i] ? builtin(cfgs[i], 128) : dag_net();
            gr_plan *plan = plan_for(net, (gr_precision)prec, 1, 1);
            gr_df_program *p = program_for(plan, 132, 0);
            for (int k = 0; k < 4; k++)
                check_runs(plan, p, threads[k], threads[k] == 1 ? 2 : 3, threads[k] >= 8 ? 20 : 0,
                           (uint64_t)(i * 16 + prec * 4 + k));
            gr_df_program_free(p);
            gr_plan_free(plan);
            gr_net_free(net);
        }
}
END_TEST

/* The protocol on other graphs: storage reused (WAR edges), routes copied rather than aliased, a
 * small task target (few, large tasks), and YOLOv2-tiny at its full 416x416. */
START_TEST(protocol_runs_reuse_copies_and_full_size)
{
    gr_net *net = dag_net();
    gr_plan *plan = plan_for(net, GR_PREC_INT8, 0, 1);
    gr_df_program *p = program_for(plan, 16, 0);
    ck_assert_int_gt(p->n_war, 0);
    check_runs(plan, p, 8, 3, 30, 1);
    gr_df_program_free(p);
    gr_plan_free(plan);
    plan = plan_for(net, GR_PREC_FP16, 1, 0);
    p = program_for(plan, 40, 0);
    int copies = 0;
    for (int n = 0; n < p->header->n_nodes; n++)
        copies += p->nodes[n].op == GR_DF_OP_COPY;
    ck_assert_int_gt(copies, 0);
    check_runs(plan, p, 8, 3, 30, 2);
    gr_df_program_free(p);
    gr_plan_free(plan);
    gr_net_free(net);
    net = builtin("yolov2-tiny.cfg", 416);
    plan = plan_for(net, GR_PREC_INT8, 1, 1);
    p = program_for(plan, 132, 0);
    check_runs(plan, p, 8, 1, 0, 3);
    gr_df_program_free(p);
    gr_plan_free(plan);
    gr_net_free(net);
}
END_TEST

/* Whether task `to` is reachable backwards from `from` through dependencies other than the edge
 * (from_task, skip_dep). */
static int reaches(const gr_df_program *p, int from, int to, int skip_task, int skip_dep,
                   unsigned char *seen)
{
    if (from == to)
        return 1;
    if (seen[from]++)
        return 0;
    const gr_df_task *t = &p->tasks[from];
    for (int d = 0; d < t->n_deps; d++) {
        const int dep = p->deps[t->dep_begin + d];
        if (!(from == skip_task && dep == skip_dep) && reaches(p, dep, to, skip_task, skip_dep, seen))
            return 1;
    }
    return 0;
}

/* A dependency dropped from the program (one no other path implies), with the producer working
 * only after the consumer is done: the consumer reads bytes not written in this run. */
START_TEST(a_dropped_dependency_is_caught)
{
    gr_net *net = dag_net();
    gr_plan *plan = plan_for(net, GR_PREC_INT8, 1, 1);
    gr_df_program *p = program_for(plan, 132, 0);
    const int n = p->header->n_tasks;
    unsigned char *seen = malloc((size_t)n);
    int tried = 0, last = -n;
    for (int t = 1; t < n && tried < 6; t++) {
        const gr_df_task *dt = &p->tasks[t];
        if (!dt->n_deps || t - last < n / 8)
            continue;
        /* its latest dependency (the fewest tasks between the two in the static order: those
         * that wait for it hold a block each while it stalls), if nothing else implies it */
        const int dep = p->deps[dt->dep_begin + dt->n_deps - 1];
        memset(seen, 0, (size_t)n);
        if (t - dep > 24 || reaches(p, t, dep, t, dep, seen))
            continue;
        last = t;
        emu e;
        emu_init(&e, plan, p, 32, 1);
        gr_df_status st = emu_run(&e); /* one clean run first: the bytes hold epoch 1 */
        ck_assert_int_eq(atomic_load(&e.bad), 0);
        e.drop_task = t;
        e.drop_dep = dep;
        e.stall_task = dep;
        st = emu_run(&e);
        ck_assert_msg(atomic_load(&e.bad) > 0, "task %d without its dependency %d: not caught",
                      t, dep);
        ck_assert_int_eq(st.failed_task, -1);
        emu_free(&e);
        tried++;
    }
    ck_assert_int_ge(tried, 3);
    free(seen);
    gr_df_program_free(p);
    gr_plan_free(plan);
    gr_net_free(net);
}
END_TEST

/* A flag never published: the wait times out, the run ends with the error naming the waiting task
 * and the flag, every block leaves (no hang), and the next run on the same state is clean. The
 * timeout is 1 s: shorter, a busy machine's scheduler makes a wait unrelated to the victim time
 * out first (50 ms failed 2 of 3 runs on the 2-core VM beside a build); the clean run after it
 * gets the clean runs' 20 s. */
START_TEST(an_unpublished_flag_becomes_a_timeout_error)
{
    gr_net *net = builtin("yolov3-tiny.cfg", 160);
    gr_plan *plan = plan_for(net, GR_PREC_INT8, 1, 1);
    const uint64_t timeout = 1000ull * 1000 * 1000;
    gr_df_program *p = program_for(plan, 132, timeout);
    const int victim = p->header->n_tasks / 3;
    int consumers = 0;
    for (int t = victim + 1; t < p->header->n_tasks; t++)
        for (int d = 0; d < p->tasks[t].n_deps; d++)
            consumers += p->deps[p->tasks[t].dep_begin + d] == victim;
    ck_assert_int_gt(consumers, 0);
    emu e;
    emu_init(&e, plan, p, 8, 1);
    e.unpublished = victim;
    const uint64_t start = now_ns();
    gr_df_status st = emu_run(&e);
    const uint64_t took = now_ns() - start;
    ck_assert_uint_eq(st.magic, GR_DF_MAGIC);
    /* the first wait to time out: on the victim, or on a task that (through others) waits for
     * it and so never finished either */
    ck_assert_int_ge(st.failed_task, 0);
    ck_assert_int_ge(st.waited_on, victim);
    int waits = 0;
    for (int d = 0; d < p->tasks[st.failed_task].n_deps; d++)
        waits += p->deps[p->tasks[st.failed_task].dep_begin + d] == st.waited_on;
    ck_assert_int_eq(waits, 1);
    unsigned char *seen = calloc((size_t)p->header->n_tasks, 1);
    ck_assert(reaches(p, st.waited_on, victim, -1, -1, seen));
    free(seen);
    ck_assert_msg(took < 20 * timeout, "the failed run took %.0f ms", (double)took / 1e6);
    e.unpublished = -1;
    p->header->timeout_ns = 20ull * 1000 * 1000 * 1000;
    st = emu_run(&e);
    ck_assert_int_eq(st.failed_task, -1);
    ck_assert_uint_eq(st.epoch, 2);
    ck_assert_int_eq(atomic_load(&e.bad), 0);
    ck_assert_msg(outputs_complete(&e, 2), "%s", e.why);
    emu_free(&e);
    gr_df_program_free(p);
    gr_plan_free(plan);
    gr_net_free(net);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dataflow");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, programs_are_flat_checked_and_deterministic);
    tcase_add_test(tc, no_reuse_leaves_only_raw_edges);
    tcase_add_test(tc, unsupported_nodes_are_named);
    tcase_add_test(tc, protocol_runs_every_model_on_any_number_of_blocks);
    tcase_add_test(tc, protocol_runs_reuse_copies_and_full_size);
    tcase_add_test(tc, a_dropped_dependency_is_caught);
    tcase_add_test(tc, an_unpublished_flag_becomes_a_timeout_error);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
