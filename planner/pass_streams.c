/* Streams: schedule order; a node continues the stream of the first input whose producer is still
 * that stream's last node, otherwise it forks a new stream; waits on an event recorded after each
 * producer on another stream; the end joins every stream into stream 0. Also the happens-before
 * matrix those imply (stream order plus events), which placement.c uses to share bytes safely. */
#include <stdlib.h>

#include "planner/passes.h"

int gr_plan_happens_before(const gr_plan *plan, int a, int b)
{
    if (!plan || !plan->order || a < 0 || b < 0 || a >= plan->n_nodes || b >= plan->n_nodes)
        return 0;
    return gr_plan_order_bit(plan, a, b);
}

static gr_status push_wait(gr_plan *plan, int *cap, int event)
{
    if (plan->n_waits == *cap) {
        int grown_cap = *cap ? *cap * 2 : 32;
        int *grown = realloc(plan->waits, (size_t)grown_cap * sizeof *grown);
        if (!grown)
            return gr_fail(GR_ERR_OUT_OF_MEMORY, "planner: out of memory recording events");
        plan->waits = grown;
        *cap = grown_cap;
    }
    plan->waits[plan->n_waits++] = event;
    return GR_OK;
}

static int event_of(gr_plan *plan, int node)
{
    if (plan->nodes[node].record_event < 0)
        plan->nodes[node].record_event = plan->n_events++;
    return plan->nodes[node].record_event;
}

gr_status gr_pass_streams(gr_plan *plan)
{
    int single_stream = plan->options.single_stream;
    int n = plan->n_nodes;
    int *tail = gr_malloc((size_t)(n + 1) * sizeof *tail, "stream tails"); /* stream -> node */
    if (!tail)
        return GR_ERR_OUT_OF_MEMORY;
    free(plan->waits);
    plan->waits = NULL;
    plan->n_waits = 0;
    plan->n_events = 0;
    plan->n_streams = 1;
    int cap = 0;
    gr_status st = GR_OK;
    tail[0] = -1;
    for (int i = 0; i < n && st == GR_OK; i++) {
        gr_plan_node *nd = &plan->nodes[i];
        nd->record_event = -1;
        nd->n_waits = 0;
        nd->wait_begin = plan->n_waits;
        if (single_stream || nd->n_inputs == 0) {
            nd->stream = 0;
        } else {
            /* Continue the stream of the first input whose producer is still its stream's tail;
             * otherwise fork a new stream. */
            int chosen = -1;
            for (int k = 0; k < nd->n_inputs && chosen < 0; k++) {
                int prod = plan->tensors[nd->inputs[k]].producer;
                int s = plan->nodes[prod].stream;
                if (tail[s] == prod)
                    chosen = s;
            }
            const int cap_streams = plan->options.max_streams;
            if (chosen < 0 && cap_streams > 0 && plan->n_streams >= cap_streams)
                chosen = plan->nodes[plan->tensors[nd->inputs[0]].producer].stream;
            if (chosen < 0)
                chosen = plan->n_streams++;
            nd->stream = chosen;
        }
        /* Wait on producers that ran on other streams (once per event). */
        for (int k = 0; k < nd->n_inputs && !single_stream; k++) {
            int prod = plan->tensors[nd->inputs[k]].producer;
            if (plan->nodes[prod].stream == nd->stream)
                continue;
            int ev = event_of(plan, prod);
            int dup = 0;
            for (int w = nd->wait_begin; w < plan->n_waits; w++)
                dup |= plan->waits[w] == ev;
            if (dup)
                continue;
            st = push_wait(plan, &cap, ev);
            nd->n_waits++;
        }
        tail[nd->stream] = i;
    }
    /* Join: stream 0 waits for the tail of every other stream after the last node. */
    plan->join_wait_begin = plan->n_waits;
    plan->n_join_waits = 0;
    for (int s = 1; s < plan->n_streams && st == GR_OK; s++) {
        st = push_wait(plan, &cap, event_of(plan, tail[s]));
        plan->n_join_waits++;
    }
    free(tail);
    if (st != GR_OK)
        return st;

    /* Happens-before: row b holds every a ordered before b (previous node on b's stream, and
     * the producers b reads, transitively). */
    free(plan->order);
    plan->order_words = (n + 63) / 64;
    plan->order = gr_calloc((size_t)n * (size_t)plan->order_words, sizeof *plan->order,
                            "happens-before matrix");
    if (!plan->order)
        return GR_ERR_OUT_OF_MEMORY;
    int words = plan->order_words;
    for (int b = 0; b < n; b++) {
        uint64_t *row = plan->order + (size_t)b * (size_t)words;
        int prev = -1;
        for (int a = b - 1; a >= 0 && prev < 0; a--)
            if (plan->nodes[a].stream == plan->nodes[b].stream)
                prev = a;
        int preds[GR_MAX_INPUTS + 1];
        int n_preds = 0;
        if (prev >= 0)
            preds[n_preds++] = prev;
        for (int k = 0; k < plan->nodes[b].n_inputs; k++)
            preds[n_preds++] = plan->tensors[plan->nodes[b].inputs[k]].producer;
        for (int p = 0; p < n_preds; p++) {
            const uint64_t *prow = plan->order + (size_t)preds[p] * (size_t)words;
            for (int w = 0; w < words; w++)
                row[w] |= prow[w];
            row[preds[p] / 64] |= (uint64_t)1 << (preds[p] % 64);
        }
    }
    return GR_OK;
}
