/* Plan views: a text table (one row per node plus the arena summary), JSON with the same facts,
 * Graphviz DOT of the DAG with quantize/dequantize/convert nodes marked, and an SVG memory
 * timeline (x = schedule step, y = arena offset, one rectangle per buffer); the task graph
 * (planner/tasks.h) as a table or JSON. */
#include <string.h>

#include "planner/plan.h"
#include "planner/tasks.h"

static const char *layout_name(gr_layout l) { return l == GR_LAYOUT_NCHW ? "NCHW" : "NHWC"; }

/* The tensor a node's row describes: its output, or what an output node reads. */
static int row_tensor(const gr_plan_node *nd)
{
    return nd->output >= 0 ? nd->output : nd->inputs[0];
}

static void tensor_label(const gr_plan *plan, int t, char *buf, size_t len)
{
    const gr_plan_tensor *x = &plan->tensors[t];
    const gr_plan_node *p = &plan->nodes[x->producer];
    if (x->layer >= 0)
        snprintf(buf, len, "t%d %s L%d", t, gr_plan_kind_name(p->kind), x->layer);
    else
        snprintf(buf, len, "t%d %s", t, gr_plan_kind_name(p->kind));
}

/* Nodes carrying a fused part (each stands for one node fused away). */
static int count_fused(const gr_plan *plan, unsigned part)
{
    int count = 0;
    for (int i = 0; i < plan->n_nodes; i++)
        count += (plan->nodes[i].fused & part) != 0;
    return count;
}

static gr_status finish(FILE *f, const char *what)
{
    if (ferror(f))
        return gr_fail(GR_ERR_IO, "plan %s: write error", what);
    return GR_OK;
}

gr_status gr_plan_dump_text(const gr_plan *plan, FILE *f)
{
    if (!plan || !f)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_dump_text: NULL argument");
    fprintf(f,
            "plan: %dx%dx%d input, batch %d, %s, %d nodes, %d tensors, %d buffers, %d streams, "
            "%d events\n",
            plan->net_w, plan->net_h, plan->net_c, plan->batch, gr_precision_name(plan->precision),
            plan->n_nodes, plan->n_tensors, plan->n_buffers, plan->n_streams, plan->n_events);
    /* The fused column as wide as its longest entry ("quant-in+bn+bias+leaky+maxpool+requant"). */
    int fused_w = 5;
    for (int i = 0; i < plan->n_nodes; i++) {
        char fused[64];
        gr_plan_fused_str(&plan->nodes[i], fused, sizeof fused);
        int len = plan->nodes[i].noop ? (int)strlen("(view, no-op)") : (int)strlen(fused);
        fused_w = len > fused_w ? len : fused_w;
    }
    fprintf(f, "%4s %-14s %5s %-*s %-9s %-6s %-20s %3s %-10s %12s %12s %-9s %s\n", "step", "op",
            "layer", fused_w, "fused", "dtype", "layout", "shape n,c(pad),h,w", "str", "wait>rec", "offset",
            "bytes", "live", "storage");
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        int t = row_tensor(nd);
        const gr_plan_tensor *x = &plan->tensors[t];
        const gr_plan_buffer *b = &plan->buffers[x->buffer];
        char fused[64], dtype[16], shape[40], events[32], storage[48], live[24];
        gr_plan_fused_str(nd, fused, sizeof fused);
        if (nd->noop)
            snprintf(fused, sizeof fused, "(view, no-op)");
        const char *in_dtype =
            nd->n_inputs ? gr_dtype_name(plan->tensors[nd->inputs[0]].dtype) : "-";
        snprintf(dtype, sizeof dtype, "%s>%s", in_dtype,
                 nd->output >= 0 ? gr_dtype_name(x->dtype) : "-");
        snprintf(shape, sizeof shape, "%d,%d(%d),%d,%d", x->n, x->c, x->c_pad, x->h, x->w);
        int n_ev = 0;
        char waits[24] = "";
        for (int w = 0; w < nd->n_waits && n_ev < 3; w++, n_ev++) {
            size_t used = strlen(waits);
            snprintf(waits + used, sizeof waits - used, "%se%d", w ? "," : "",
                     plan->waits[nd->wait_begin + w]);
        }
        if (nd->record_event >= 0)
            snprintf(events, sizeof events, "%s>e%d", waits[0] ? waits : "", nd->record_event);
        else
            snprintf(events, sizeof events, "%s", waits[0] ? waits : "-");
        if (x->view_of >= 0)
            snprintf(storage, sizeof storage, "view of t%d @c%d", x->view_of, x->c_offset);
        else if (x->inplace_of >= 0)
            snprintf(storage, sizeof storage, "in place of t%d", x->inplace_of);
        else
            snprintf(storage, sizeof storage, "buffer %d%s", x->buffer,
                     x->pinned ? " (pinned)" : "");
        snprintf(live, sizeof live, "[%d,%d]", x->live_begin, x->live_end);
        fprintf(f, "%4d %-14s %5d %-*s %-9s %-6s %-20s %3d %-10s %12zu %12zu %-9s %s\n", i,
                gr_plan_kind_name(nd->kind), nd->layer, fused_w, fused, dtype, layout_name(x->layout), shape,
                nd->stream, events, b->offset, x->bytes, live, storage);
    }
    fprintf(f,
            "arena bytes: %zu  lower bound: %zu (arena/lb %.4f)  naive sum: %zu (arena/naive "
            "%.3f)  placement: %s\n",
            plan->arena_bytes, plan->lower_bound_bytes,
            plan->lower_bound_bytes ? (double)plan->arena_bytes / (double)plan->lower_bound_bytes
                                    : 1.0,
            plan->naive_bytes,
            plan->naive_bytes ? (double)plan->arena_bytes / (double)plan->naive_bytes : 1.0,
            plan->placement ? plan->placement : "-");
    fprintf(f, "quantize: %d  dequantize: %d  convert: %d  fused maxpools: %d  dead nodes: %d",
            gr_plan_count_kind(plan, GR_OP_QUANTIZE), gr_plan_count_kind(plan, GR_OP_DEQUANTIZE),
            gr_plan_count_kind(plan, GR_NODE_CONVERT), count_fused(plan, GR_FUSED_MAXPOOL),
            plan->dead_nodes_removed);
    /* Shown only when the fusions are on, so default plans print as before. */
    int quant_in = count_fused(plan, GR_FUSED_QUANTIZE_IN);
    int dequant_out = count_fused(plan, GR_FUSED_DEQUANT_OUT);
    if (quant_in || dequant_out)
        fprintf(f, "  fused quant-in: %d  fused dequant-out: %d", quant_in, dequant_out);
    fputc('\n', f);
    return finish(f, "text");
}

gr_status gr_plan_dump_json(const gr_plan *plan, FILE *f)
{
    if (!plan || !f)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_dump_json: NULL argument");
    fprintf(f, "{\n  \"input\": [%d, %d, %d],\n  \"batch\": %d,\n  \"precision\": \"%s\",\n",
            plan->net_c, plan->net_h, plan->net_w, plan->batch, gr_precision_name(plan->precision));
    fprintf(f, "  \"arena_bytes\": %zu,\n  \"lower_bound_bytes\": %zu,\n  \"naive_bytes\": %zu,\n",
            plan->arena_bytes, plan->lower_bound_bytes, plan->naive_bytes);
    fprintf(f, "  \"placement\": \"%s\",\n  \"streams\": %d,\n  \"events\": %d,\n",
            plan->placement ? plan->placement : "", plan->n_streams, plan->n_events);
    fprintf(f, "  \"join_waits\": [");
    for (int w = 0; w < plan->n_join_waits; w++)
        fprintf(f, "%s%d", w ? ", " : "", plan->waits[plan->join_wait_begin + w]);
    fprintf(f, "],\n  \"outputs\": [");
    for (int k = 0; k < plan->n_outputs; k++)
        fprintf(f, "%s%d", k ? ", " : "", plan->output_tensors[k]);
    fprintf(f, "],\n  \"nodes\": [\n");
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        int t = row_tensor(nd);
        const gr_plan_tensor *x = &plan->tensors[t];
        char fused[64];
        gr_plan_fused_str(nd, fused, sizeof fused);
        fprintf(f,
                "    {\"step\": %d, \"op\": \"%s\", \"layer\": %d, \"fused\": \"%s\", "
                "\"noop\": %d, \"inputs\": [",
                i, gr_plan_kind_name(nd->kind), nd->layer, nd->fused ? fused : "", nd->noop);
        for (int k = 0; k < nd->n_inputs; k++)
            fprintf(f, "%s%d", k ? ", " : "", nd->inputs[k]);
        fprintf(f, "], \"output\": %d, \"dtype_in\": \"%s\", \"dtype_out\": \"%s\", ", nd->output,
                nd->n_inputs ? gr_dtype_name(plan->tensors[nd->inputs[0]].dtype) : "",
                nd->output >= 0 ? gr_dtype_name(x->dtype) : "");
        fprintf(f,
                "\"layout\": \"%s\", \"shape\": [%d, %d, %d, %d], \"c_pad\": %d, "
                "\"c_stride\": %d, \"c_offset\": %d, ",
                layout_name(x->layout), x->n, x->c, x->h, x->w, x->c_pad, x->c_stride, x->c_offset);
        fprintf(f, "\"stream\": %d, \"waits\": [", nd->stream);
        for (int w = 0; w < nd->n_waits; w++)
            fprintf(f, "%s%d", w ? ", " : "", plan->waits[nd->wait_begin + w]);
        fprintf(f,
                "], \"record_event\": %d, \"buffer\": %d, \"offset\": %zu, \"bytes\": %zu, "
                "\"live\": [%d, %d], \"view_of\": %d, \"inplace_of\": %d, \"pinned\": %d, "
                "\"scale\": %.9g}%s\n",
                nd->record_event, x->buffer, plan->buffers[x->buffer].offset, x->bytes,
                x->live_begin, x->live_end, x->view_of, x->inplace_of, x->pinned, (double)x->scale,
                i + 1 < plan->n_nodes ? "," : "");
    }
    fprintf(f, "  ],\n  \"buffers\": [\n");
    for (int b = 0; b < plan->n_buffers; b++) {
        const gr_plan_buffer *x = &plan->buffers[b];
        fprintf(f,
                "    {\"offset\": %zu, \"bytes\": %zu, \"live\": [%d, %d], \"root\": %d, "
                "\"pinned\": %d}%s\n",
                x->offset, x->bytes, x->live_begin, x->live_end, x->root, x->pinned,
                b + 1 < plan->n_buffers ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    return finish(f, "json");
}

static const char *stream_colour(int s)
{
    static const char *const colours[] = {"black", "blue", "darkgreen", "purple", "brown", "red"};
    return colours[s % 6];
}

gr_status gr_plan_dump_dot(const gr_plan *plan, FILE *f)
{
    if (!plan || !f)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_dump_dot: NULL argument");
    fprintf(f, "digraph plan {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
    fprintf(f, "  label=\"%s batch %d: arena %zu B, lower bound %zu B, naive %zu B\";\n",
            gr_precision_name(plan->precision), plan->batch, plan->arena_bytes,
            plan->lower_bound_bytes, plan->naive_bytes);
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        char fused[64];
        gr_plan_fused_str(nd, fused, sizeof fused);
        const char *shape = "box", *style = "solid", *fill = "white";
        if (nd->kind == GR_OP_QUANTIZE) {
            shape = "diamond";
            style = "filled";
            fill = "orange";
        } else if (nd->kind == GR_OP_DEQUANTIZE) {
            shape = "diamond";
            style = "filled";
            fill = "lightblue";
        } else if (nd->kind == GR_NODE_CONVERT) {
            shape = "diamond";
            style = "filled";
            fill = "khaki";
        } else if (nd->kind == GR_NODE_INPUT || nd->kind == GR_NODE_OUTPUT) {
            shape = "ellipse";
            style = "filled";
            fill = "lightgrey";
        } else if (nd->noop) {
            style = "dashed";
        }
        fprintf(f,
                "  n%d [label=\"%d: %s%s%s%s\\nstream %d\", shape=%s, style=%s, fillcolor=%s, "
                "color=%s];\n",
                i, i, gr_plan_kind_name(nd->kind), nd->fused ? "\\n" : "", nd->fused ? fused : "",
                nd->noop ? "\\n(view)" : "", nd->stream, shape, style, fill,
                stream_colour(nd->stream));
    }
    for (int i = 0; i < plan->n_nodes; i++) {
        const gr_plan_node *nd = &plan->nodes[i];
        for (int k = 0; k < nd->n_inputs; k++) {
            const gr_plan_tensor *x = &plan->tensors[nd->inputs[k]];
            fprintf(f, "  n%d -> n%d [label=\"%s %dx%dx%d\"%s];\n", x->producer, i,
                    gr_dtype_name(x->dtype), x->c, x->h, x->w,
                    plan->nodes[x->producer].stream != nd->stream ? ", style=bold" : "");
        }
    }
    fprintf(f, "}\n");
    return finish(f, "dot");
}

static const char *dtype_colour(gr_dtype d)
{
    switch (d) {
    case GR_DTYPE_F32: return "#8fb8de";
    case GR_DTYPE_F16: return "#9ed49e";
    case GR_DTYPE_I8: return "#f2b66d";
    default: return "#cccccc";
    }
}

gr_status gr_plan_dump_svg(const gr_plan *plan, FILE *f)
{
    if (!plan || !f)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_plan_dump_svg: NULL argument");
    const double left = 70, top = 40, width = 900, height = 560;
    int steps = plan->n_nodes > 0 ? plan->n_nodes : 1;
    double arena = plan->arena_bytes ? (double)plan->arena_bytes : 1.0;
    double step_w = width / steps;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"Helvetica\" font-size=\"10\">\n",
            left + width + 20, top + height + 50);
    fprintf(f,
            "<text x=\"%.0f\" y=\"20\" font-size=\"13\">%s batch %d: arena %zu B, lower bound "
            "%zu B, naive %zu B (%s)</text>\n",
            left, gr_precision_name(plan->precision), plan->batch, plan->arena_bytes,
            plan->lower_bound_bytes, plan->naive_bytes, plan->placement ? plan->placement : "");
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"black\"/>\n",
            left, top, width, height);
    for (int b = 0; b < plan->n_buffers; b++) {
        const gr_plan_buffer *x = &plan->buffers[b];
        const gr_plan_tensor *root = &plan->tensors[x->root];
        double rx = left + x->live_begin * step_w;
        double rw = (x->live_end - x->live_begin + 1) * step_w;
        /* Offsets grow upwards, like an address plot. */
        double ry = top + height - ((double)(x->offset + x->bytes) / arena) * height;
        double rh = (double)x->bytes / arena * height;
        char label[64];
        tensor_label(plan, x->root, label, sizeof label);
        fprintf(f,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                "stroke=\"#333\" stroke-width=\"0.5\"><title>%s: offset %zu, %zu bytes, steps "
                "%d-%d</title></rect>\n",
                rx, ry, rw, rh > 0.5 ? rh : 0.5, dtype_colour(root->dtype), label, x->offset,
                x->bytes, x->live_begin, x->live_end);
        if (rh >= 10)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", rx + 2, ry + 10, label);
    }
    double lb_y = top + height - (double)plan->lower_bound_bytes / arena * height;
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"red\" "
            "stroke-dasharray=\"4,3\"/>\n",
            left, lb_y, left + width, lb_y);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"red\">lower bound</text>\n", left + width - 70,
            lb_y - 3);
    for (int s = 0; s < steps; s += (steps + 19) / 20)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%d</text>\n", left + s * step_w, top + height + 14,
                s);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">schedule step</text>\n", left + width / 2,
            top + height + 32);
    fprintf(f, "<text x=\"5\" y=\"%.1f\">0</text>\n<text x=\"5\" y=\"%.1f\">%zu</text>\n",
            top + height, top + 10, plan->arena_bytes);
    fprintf(f, "</svg>\n");
    return finish(f, "svg");
}

gr_status gr_task_graph_dump_text(const gr_task_graph *g, const gr_plan *plan, FILE *f)
{
    if (!g || !plan || !f)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_task_graph_dump_text: NULL argument");
    fprintf(f,
            "task graph: batch %d, %d tasks, %d dependencies (%d RAW, %d WAR/WAW), max fan-in %d, "
            "depth %d (at most %d tasks per node and image, channel slices of multiples of %d)\n",
            plan->batch, g->n_tasks, g->n_deps, g->n_raw, g->n_war, g->max_fan_in, g->max_depth,
            g->options.target_tasks, g->options.channel_align);
    fprintf(f, "%4s %5s %-14s %-5s %16s %13s %12s %6s %7s\n", "node", "layer", "op", "prec",
            "output CxHxW", "bands x rows", "slices x ch", "tasks", "fan-in");
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_task_node *tn = &g->nodes[i];
        const gr_plan_node *nd = &plan->nodes[i];
        if (!tn->count)
            continue;
        const gr_plan_tensor *x = &plan->tensors[nd->output];
        char shape[32], bands[24], slices[24];
        snprintf(shape, sizeof shape, "%dx%dx%d", x->c, x->h, x->w);
        snprintf(bands, sizeof bands, "%d x %d", tn->bands, tn->rows_per_band);
        snprintf(slices, sizeof slices, "%d x %d", tn->slices, tn->channels_per_slice);
        fprintf(f, "%4d %5d %-14s %-5s %16s %13s %12s %6d %7d\n", i, nd->layer,
                gr_plan_kind_name(nd->kind), gr_precision_name(nd->prec), shape, bands, slices,
                tn->count, tn->max_fan_in);
    }
    return finish(f, "task graph");
}

static void dump_json_task(const gr_task_graph *g, int id, FILE *f)
{
    const gr_task *t = &g->tasks[id];
    fprintf(f, "    {\"id\": %d, \"node\": %d, \"image\": %d, \"rows\": [%d, %d], "
               "\"channels\": [%d, %d], \"depth\": %d, \"deps\": [", id, t->node, t->image,
            t->row0, t->row0 + t->rows, t->ch0, t->ch0 + t->chs, t->depth);
    for (int d = 0; d < t->n_deps; d++)
        fprintf(f, "%s%d", d ? ", " : "", g->deps[t->dep_begin + d]);
    fprintf(f, "]}%s\n", id + 1 < g->n_tasks ? "," : "");
}

gr_status gr_task_graph_dump_json(const gr_task_graph *g, const gr_plan *plan, FILE *f)
{
    if (!g || !plan || !f)
        return gr_fail(GR_ERR_INVALID_ARGUMENT, "gr_task_graph_dump_json: NULL argument");
    fprintf(f, "{\n  \"batch\": %d, \"target_tasks\": %d, \"channel_align\": %d,\n"
               "  \"tasks\": %d, \"dependencies\": %d, \"raw\": %d, \"war\": %d, "
               "\"max_fan_in\": %d, \"depth\": %d,\n  \"nodes\": [\n",
            plan->batch, g->options.target_tasks, g->options.channel_align, g->n_tasks, g->n_deps,
            g->n_raw, g->n_war, g->max_fan_in, g->max_depth);
    int first = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_task_node *tn = &g->nodes[i];
        if (!tn->count)
            continue;
        const gr_plan_node *nd = &plan->nodes[i];
        fprintf(f, "%s    {\"node\": %d, \"layer\": %d, \"op\": \"%s\", \"prec\": \"%s\", "
                   "\"bands\": %d, \"rows_per_band\": %d, \"slices\": %d, "
                   "\"channels_per_slice\": %d, \"first\": %d, \"tasks\": %d, \"max_fan_in\": %d}",
                first ? "" : ",\n", i, nd->layer, gr_plan_kind_name(nd->kind),
                gr_precision_name(nd->prec), tn->bands, tn->rows_per_band, tn->slices,
                tn->channels_per_slice, tn->first, tn->count, tn->max_fan_in);
        first = 0;
    }
    fprintf(f, "\n  ],\n  \"order\": [");
    for (int i = 0; i < g->n_tasks; i++)
        fprintf(f, "%s%d", i ? ", " : "", g->order[i]);
    fprintf(f, "],\n  \"task_list\": [\n");
    for (int i = 0; i < g->n_tasks; i++)
        dump_json_task(g, i, f);
    fprintf(f, "  ]\n}\n");
    return finish(f, "task graph");
}
