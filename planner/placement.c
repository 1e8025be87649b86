/* Placement (the memory pass): live intervals, in-place reuse, buffers, their placement in one
 * arena by the best of five heuristics, the live-bytes lower bound and the naive sum. With the
 * no_reuse option every buffer gets bytes of its own (the dataflow executor's plans).
 *
 * Safety rule: two buffers may share bytes only when their live intervals (schedule steps) do
 * not overlap AND every access of the earlier one happens before every write of the later one
 * through stream order and events. On a single stream the second condition is the schedule
 * order itself. The lower bound is the largest total of live buffer bytes at any step; pinned
 * buffers (network input, plan outputs) are live over the whole schedule and never shared. */
#include <stdlib.h>
#include <string.h>

#include "planner/passes.h"

/* ---- liveness ---------------------------------------------------------------------------- */

static int same_storage_shape(const gr_plan_tensor *a, const gr_plan_tensor *b)
{
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->dtype == b->dtype &&
           a->layout == b->layout && a->c_pad == b->c_pad && a->bytes == b->bytes;
}

static int hosts_views(const gr_plan *plan, int t)
{
    for (int u = 0; u < plan->n_tensors; u++)
        if (plan->tensors[u].view_of == t)
            return 1;
    return 0;
}

static void compute_tensor_intervals(gr_plan *plan)
{
    int last = plan->n_nodes - 1;
    for (int t = 0; t < plan->n_tensors; t++) {
        gr_plan_tensor *x = &plan->tensors[t];
        x->live_begin = x->producer;
        x->live_end = x->producer;
        x->pinned = t == plan->input_tensor;
    }
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        for (int k = 0; k < nd->n_inputs; k++) {
            gr_plan_tensor *x = &plan->tensors[nd->inputs[k]];
            if (i > x->live_end)
                x->live_end = i;
            if (nd->kind == GR_NODE_OUTPUT)
                x->pinned = 1;
        }
    }
    for (int t = 0; t < plan->n_tensors; t++) {
        gr_plan_tensor *x = &plan->tensors[t];
        if (x->pinned) {
            x->live_begin = 0;
            x->live_end = last;
        }
    }
}

static void choose_in_place(gr_plan *plan)
{
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        if (!gr_op_has(nd->kind, GR_OPF_IN_PLACE) || nd->n_inputs < 1)
            continue;
        int src = nd->inputs[0];
        int dst = nd->output;
        const gr_plan_tensor *x = &plan->tensors[src];
        const gr_plan_tensor *y = &plan->tensors[dst];
        if (x->pinned || y->pinned || x->view_of >= 0 || y->view_of >= 0 ||
            !same_storage_shape(x, y) || hosts_views(plan, src) || hosts_views(plan, dst))
            continue;
        /* Every other read of the input must be ordered before this node. */
        int ok = 1;
        for (int j = 0; j < plan->n_nodes && ok; j++) {
            if (j == i)
                continue;
            for (int k = 0; k < plan->nodes[j].n_inputs; k++)
                if (plan->nodes[j].inputs[k] == src && !gr_plan_order_bit(plan, j, i))
                    ok = 0;
        }
        if (ok)
            plan->tensors[dst].inplace_of = src;
    }
}

/* ---- placement --------------------------------------------------------------------------- */

static size_t align_up(size_t x) { return (x + GR_PLAN_ALIGN - 1) / GR_PLAN_ALIGN * GR_PLAN_ALIGN; }

typedef struct placer {
    int n; /* buffers */
    const gr_plan_buffer *buf;
    const char *conflict; /* n x n */
    size_t *offset;       /* result */
    char *placed;
    size_t *gap_lo, *gap_hi; /* scratch: occupied ranges of conflicting placed buffers */
    int *order;
} placer;

/* Occupied ranges of the placed buffers conflicting with b, sorted by start. */
static int occupied(placer *pl, int b)
{
    int m = 0;
    for (int j = 0; j < pl->n; j++) {
        if (!pl->placed[j] || !pl->conflict[(size_t)b * (size_t)pl->n + (size_t)j])
            continue;
        size_t lo = pl->offset[j], hi = pl->offset[j] + pl->buf[j].bytes;
        int k = m++;
        while (k > 0 && pl->gap_lo[k - 1] > lo) {
            pl->gap_lo[k] = pl->gap_lo[k - 1];
            pl->gap_hi[k] = pl->gap_hi[k - 1];
            k--;
        }
        pl->gap_lo[k] = lo;
        pl->gap_hi[k] = hi;
    }
    return m;
}

/* Lowest offset (best_fit = 0) or the offset of the tightest finite gap (best_fit = 1). */
static size_t fit_low(placer *pl, int b, int best_fit)
{
    int m = occupied(pl, b);
    size_t size = pl->buf[b].bytes;
    size_t cursor = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
    for (int k = 0; k < m; k++) {
        if (pl->gap_lo[k] > cursor && pl->gap_lo[k] - cursor >= size) {
            size_t gap = pl->gap_lo[k] - cursor;
            if (!best_fit)
                return cursor;
            if (gap < best_gap) {
                best_gap = gap;
                best = cursor;
            }
        }
        if (pl->gap_hi[k] > cursor)
            cursor = pl->gap_hi[k];
    }
    return best != SIZE_MAX ? best : cursor;
}

/* Highest offset whose end stays within capacity, or SIZE_MAX. Candidate ends are the capacity
 * and the starts of occupied ranges, tried from the top down. */
static size_t fit_high(placer *pl, int b, size_t capacity)
{
    int m = occupied(pl, b);
    size_t size = pl->buf[b].bytes;
    for (int k = m; k >= 0; k--) {
        size_t end = k == m ? capacity : pl->gap_lo[k];
        if (end > capacity || end < size)
            continue;
        size_t start = end - size;
        int clear = 1;
        for (int j = 0; j < m && clear; j++)
            clear = !(pl->gap_lo[j] < end && pl->gap_hi[j] > start);
        if (clear)
            return start;
    }
    return SIZE_MAX;
}

static size_t place_all(placer *pl, int strategy, size_t capacity)
{
    memset(pl->placed, 0, (size_t)pl->n);
    size_t arena = 0;
    int toggle = 0;
    /* Pinned buffers first, at the bottom. */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < pl->n; i++) {
            int b = pl->order[i];
            if (pl->buf[b].pinned != (pass == 0))
                continue;
            size_t off;
            if (strategy == 2 && !pl->buf[b].pinned) {
                off = SIZE_MAX;
                if (toggle)
                    off = fit_high(pl, b, capacity);
                if (off == SIZE_MAX) {
                    off = fit_low(pl, b, 0);
                    if (off + pl->buf[b].bytes > capacity && !toggle) {
                        size_t high = fit_high(pl, b, capacity);
                        if (high != SIZE_MAX)
                            off = high;
                    }
                }
                toggle = !toggle;
            } else {
                off = fit_low(pl, b, strategy == 1);
            }
            pl->offset[b] = off;
            pl->placed[b] = 1;
            if (off + pl->buf[b].bytes > arena)
                arena = off + pl->buf[b].bytes;
        }
    }
    return arena;
}

/* Buffers by size, largest first (ties: earlier first step, then index). */
static void order_by_size(const gr_plan_buffer *buf, int n, int *order)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++) {
        int v = order[i], k = i;
        while (k > 0) {
            const gr_plan_buffer *x = &buf[order[k - 1]], *y = &buf[v];
            int after =
                x->bytes < y->bytes || (x->bytes == y->bytes && x->live_begin > y->live_begin);
            if (!after)
                break;
            order[k] = order[k - 1];
            k--;
        }
        order[k] = v;
    }
}

/* Buffers in order of their first step (stable by index). */
static void order_by_begin(const gr_plan_buffer *buf, int n, int *order)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++) {
        int v = order[i], k = i;
        while (k > 0 && buf[order[k - 1]].live_begin > buf[v].live_begin) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = v;
    }
}

static int buffers_conflict(const gr_plan *plan, const gr_plan_buffer *a, int ia,
                            const gr_plan_buffer *b, int ib, const int *access_start,
                            const int *access, const int *write_start, const int *writes)
{
    if (a->pinned || b->pinned)
        return 1;
    if (a->live_begin <= b->live_end && b->live_begin <= a->live_end)
        return 1;
    if (plan->n_streams <= 1)
        return 0;
    /* Disjoint in the schedule: the earlier one's accesses must all precede the later's writes. */
    int first = a->live_end < b->live_begin ? ia : ib;
    int second = first == ia ? ib : ia;
    for (int x = access_start[first]; x < access_start[first + 1]; x++)
        for (int y = write_start[second]; y < write_start[second + 1]; y++)
            if (!gr_plan_order_bit(plan, access[x], writes[y]))
                return 1;
    return 0;
}

/* Per-buffer lists of accessing nodes and writing nodes (CSR). */
static gr_status buffer_accesses(const gr_plan *plan, int **access_start, int **access,
                                 int **write_start, int **writes)
{
    int nb = plan->n_buffers;
    int *as = gr_calloc((size_t)nb + 1, sizeof *as, "buffer accesses");
    int *ws = gr_calloc((size_t)nb + 1, sizeof *ws, "buffer writes");
    int n_acc = 0, n_wr = 0;
    for (int i = 0; i < plan->n_nodes; i++) {
        n_acc += plan->nodes[i].n_inputs + 1;
        n_wr += 1;
    }
    int *acc = gr_malloc((size_t)n_acc * sizeof *acc + 1, "buffer accesses");
    int *wr = gr_malloc((size_t)n_wr * sizeof *wr + 1, "buffer writes");
    if (!as || !ws || !acc || !wr) {
        free(as);
        free(ws);
        free(acc);
        free(wr);
        return GR_ERR_OUT_OF_MEMORY;
    }
    /* Two sweeps: count, then fill. */
    for (int sweep = 0; sweep < 2; sweep++) {
        int *afill = NULL, *wfill = NULL;
        if (sweep == 1) {
            for (int b = 0; b < nb; b++) {
                as[b + 1] += as[b];
                ws[b + 1] += ws[b];
            }
            afill = gr_calloc((size_t)nb + 1, sizeof *afill, "fill");
            wfill = gr_calloc((size_t)nb + 1, sizeof *wfill, "fill");
            if (!afill || !wfill) {
                free(afill);
                free(wfill);
                free(as);
                free(ws);
                free(acc);
                free(wr);
                return GR_ERR_OUT_OF_MEMORY;
            }
        }
        for (int i = 0; i < plan->n_nodes; i++) {
            const gr_plan_node *nd = &plan->nodes[i];
            if (nd->output >= 0) {
                int b = plan->tensors[nd->output].buffer;
                if (sweep == 0) {
                    as[b + 1]++;
                    ws[b + 1]++;
                } else {
                    acc[as[b] + afill[b]++] = i;
                    wr[ws[b] + wfill[b]++] = i;
                }
            }
            for (int k = 0; k < nd->n_inputs; k++) {
                int b = plan->tensors[nd->inputs[k]].buffer;
                if (sweep == 0)
                    as[b + 1]++;
                else
                    acc[as[b] + afill[b]++] = i;
            }
        }
        free(afill);
        free(wfill);
    }
    *access_start = as;
    *access = acc;
    *write_start = ws;
    *writes = wr;
    return GR_OK;
}

static gr_status make_buffers(gr_plan *plan)
{
    int nb = 0;
    for (int t = 0; t < plan->n_tensors; t++)
        nb += plan->tensors[t].view_of < 0 && plan->tensors[t].inplace_of < 0;
    free(plan->buffers);
    plan->buffers = gr_calloc((size_t)nb, sizeof *plan->buffers, "buffers");
    if (!plan->buffers)
        return GR_ERR_OUT_OF_MEMORY;
    plan->n_buffers = nb;
    int b = 0;
    for (int t = 0; t < plan->n_tensors; t++) {
        gr_plan_tensor *x = &plan->tensors[t];
        if (x->view_of >= 0 || x->inplace_of >= 0)
            continue;
        gr_plan_buffer *buf = &plan->buffers[b];
        buf->root = t;
        buf->bytes = align_up(x->bytes);
        buf->live_begin = x->live_begin;
        buf->live_end = x->live_end;
        x->buffer = b++;
    }
    for (int t = 0; t < plan->n_tensors; t++) {
        gr_plan_tensor *x = &plan->tensors[t];
        x->buffer = plan->tensors[gr_plan_root(plan, t)].buffer;
        gr_plan_buffer *buf = &plan->buffers[x->buffer];
        if (x->live_begin < buf->live_begin)
            buf->live_begin = x->live_begin;
        if (x->live_end > buf->live_end)
            buf->live_end = x->live_end;
        buf->pinned |= x->pinned;
    }
    for (b = 0; b < nb; b++) {
        if (plan->buffers[b].pinned) {
            plan->buffers[b].live_begin = 0;
            plan->buffers[b].live_end = plan->n_nodes - 1;
        }
    }
    return GR_OK;
}

gr_status gr_plan_conflict_matrix(const gr_plan *plan, char **out)
{
    int nb = plan->n_buffers;
    size_t cells;
    if (!gr_mul_size((size_t)nb, (size_t)nb, &cells))
        return gr_fail(GR_ERR_LIMIT, "planner: too many buffers (%d)", nb);
    char *conflict = gr_calloc(cells ? cells : 1, 1, "conflict matrix");
    if (!conflict)
        return GR_ERR_OUT_OF_MEMORY;
    int *as, *acc, *ws, *wr;
    gr_status st = buffer_accesses(plan, &as, &acc, &ws, &wr);
    if (st != GR_OK) {
        free(conflict);
        return st;
    }
    for (int a = 0; a < nb; a++)
        for (int b = a + 1; b < nb; b++) {
            char c = (char)buffers_conflict(plan, &plan->buffers[a], a, &plan->buffers[b], b, as,
                                            acc, ws, wr);
            conflict[(size_t)a * (size_t)nb + (size_t)b] = c;
            conflict[(size_t)b * (size_t)nb + (size_t)a] = c;
        }
    free(as);
    free(acc);
    free(ws);
    free(wr);
    *out = conflict;
    return GR_OK;
}

gr_status gr_pass_memory(gr_plan *plan)
{
    for (int t = 0; t < plan->n_tensors; t++)
        plan->tensors[t].inplace_of = -1;
    compute_tensor_intervals(plan);
    if (plan->options.in_place && !plan->options.no_reuse)
        choose_in_place(plan);
    GR_TRY(make_buffers(plan));

    int nb = plan->n_buffers;
    plan->naive_bytes = 0;
    for (int t = 0; t < plan->n_tensors; t++)
        plan->naive_bytes += align_up(plan->tensors[t].bytes);
    plan->lower_bound_bytes = 0;
    for (int s = 0; s < plan->n_nodes; s++) {
        size_t live = 0;
        for (int b = 0; b < nb; b++)
            if (plan->buffers[b].live_begin <= s && s <= plan->buffers[b].live_end)
                live += plan->buffers[b].bytes;
        if (live > plan->lower_bound_bytes)
            plan->lower_bound_bytes = live;
    }

    if (plan->options.no_reuse) {
        /* Every buffer its own bytes, in buffer order: nothing for a writer to wait on but the
         * data it reads (the dataflow executor's placement). */
        size_t at = 0;
        for (int b = 0; b < nb; b++) {
            plan->buffers[b].offset = at;
            at += plan->buffers[b].bytes;
        }
        plan->arena_bytes = at;
        plan->placement = "no reuse";
        return GR_OK;
    }
    char *conflict = NULL;
    GR_TRY(gr_plan_conflict_matrix(plan, &conflict));
    placer pl = {0};
    pl.n = nb;
    pl.buf = plan->buffers;
    pl.conflict = conflict;
    pl.offset = gr_malloc((size_t)nb * sizeof *pl.offset + 1, "placement");
    size_t *best = gr_malloc((size_t)nb * sizeof *best + 1, "placement");
    pl.placed = gr_malloc((size_t)nb + 1, "placement");
    pl.gap_lo = gr_malloc((size_t)nb * sizeof *pl.gap_lo + 1, "placement");
    pl.gap_hi = gr_malloc((size_t)nb * sizeof *pl.gap_hi + 1, "placement");
    pl.order = gr_malloc((size_t)nb * sizeof *pl.order + 1, "placement");
    gr_status st = GR_OK;
    if (!pl.offset || !best || !pl.placed || !pl.gap_lo || !pl.gap_hi || !pl.order) {
        st = GR_ERR_OUT_OF_MEMORY;
        goto done;
    }
    static const char *const names[] = {"size-desc first-fit", "size-desc best-fit",
                                        "schedule first-fit", "schedule best-fit",
                                        "schedule ping-pong"};
    size_t best_arena = SIZE_MAX;
    for (int h = 0; h < 5; h++) {
        if (h < 2) {
            order_by_size(plan->buffers, nb, pl.order);
        } else {
            order_by_begin(plan->buffers, nb, pl.order);
        }
        int strategy = h == 4 ? 2 : (h == 1 || h == 3);
        size_t arena = place_all(&pl, strategy, plan->lower_bound_bytes);
        if (arena < best_arena) {
            best_arena = arena;
            memcpy(best, pl.offset, (size_t)nb * sizeof *best);
            plan->placement = names[h];
        }
    }
    for (int b = 0; b < nb; b++)
        plan->buffers[b].offset = best[b];
    plan->arena_bytes = nb ? best_arena : 0;

done:
    free(conflict);
    free(pl.offset);
    free(best);
    free(pl.placed);
    free(pl.gap_lo);
    free(pl.gap_hi);
    free(pl.order);
    return st;
}
