/* The plan checker (tests, debugging): every tensor's use lies inside its buffer's interval and
 * bytes, buffers are aligned and inside the arena, and no two buffers that may be live at once
 * (placement.c's conflict relation) share bytes. */
#include <stdlib.h>

#include "planner/passes.h"

gr_status gr_plan_check(const gr_plan *plan)
{
    if (!plan)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_check: NULL plan");
    /* Recompute every tensor's interval from the schedule and check its buffer covers it. */
    for (int t = 0; t < plan->n_tensors; t++) {
        const gr_plan_tensor *x = &plan->tensors[t];
        int begin = x->producer, end = x->producer;
        for (int i = 0; i < plan->n_nodes; i++)
            for (int k = 0; k < plan->nodes[i].n_inputs; k++)
                if (plan->nodes[i].inputs[k] == t && i > end)
                    end = i;
        if (x->buffer < 0 || x->buffer >= plan->n_buffers)
            return gr_fail(GR_ERR_INTERNAL, "plan check: tensor %d has no buffer", t);
        const gr_plan_buffer *b = &plan->buffers[x->buffer];
        if (begin < b->live_begin || end > b->live_end)
            return gr_fail(GR_ERR_INTERNAL,
                           "plan check: tensor %d used over [%d, %d] outside buffer %d [%d, %d]", t,
                           begin, end, x->buffer, b->live_begin, b->live_end);
        /* Its last byte must lie inside the buffer. */
        size_t esize = gr_dtype_size(x->dtype);
        size_t last;
        if (x->layout == GR_LAYOUT_NCHW)
            last = ((((size_t)x->n - 1) * (size_t)x->c_stride + (size_t)x->c_offset + (size_t)x->c -
                     1) *
                        (size_t)x->h +
                    (size_t)x->h - 1) *
                       (size_t)x->w +
                   (size_t)x->w - 1;
        else
            last = ((((size_t)x->n - 1) * (size_t)x->h + (size_t)x->h - 1) * (size_t)x->w +
                    (size_t)x->w - 1) *
                       (size_t)x->c_stride +
                   (size_t)x->c_offset + (size_t)x->c_pad - 1;
        if ((last + 1) * esize > b->bytes)
            return gr_fail(GR_ERR_INTERNAL, "plan check: tensor %d ends past buffer %d", t,
                           x->buffer);
    }
    char *conflict = NULL;
    GR_TRY(gr_plan_conflict_matrix(plan, &conflict));
    gr_status st = GR_OK;
    for (int a = 0; a < plan->n_buffers && st == GR_OK; a++) {
        const gr_plan_buffer *x = &plan->buffers[a];
        if (x->offset % GR_PLAN_ALIGN || x->offset + x->bytes > plan->arena_bytes)
            st = gr_fail(GR_ERR_INTERNAL, "plan check: buffer %d at %zu+%zu outside arena %zu", a,
                         x->offset, x->bytes, plan->arena_bytes);
        for (int b = a + 1; b < plan->n_buffers && st == GR_OK; b++) {
            const gr_plan_buffer *y = &plan->buffers[b];
            int overlap_bytes =
                x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes;
            if (overlap_bytes && conflict[(size_t)a * (size_t)plan->n_buffers + (size_t)b])
                st = gr_fail(GR_ERR_INTERNAL,
                             "plan check: buffers %d [%d,%d] and %d [%d,%d] may be live together "
                             "but share bytes",
                             a, x->live_begin, x->live_end, b, y->live_begin, y->live_end);
        }
    }
    free(conflict);
    return st;
}
