/* A JPEG file's structure, walked marker by marker without decoding a pixel: which decoder may
 * take it. The GPU decoder (gr_engine_decode_jpegs) gets only files whose structure is intact
 * from SOI to EOI - a truncated file, bytes between markers, an unknown marker, a second frame
 * go to libjpeg-turbo, which reports them as CPU mode always did; so do tables that libjpeg would
 * call bogus (a Huffman table of more than 256 codes, a scan naming a component or table the
 * file never defined) - and of the one kind every
 * nvJPEG backend decodes in a batch: one interleaved baseline (or extended Huffman) scan of
 * 8-bit YCbCr at 4:4:4, 4:2:2, 4:2:0 or 4:4:0. Damage inside an intact scan's entropy-coded data
 * cannot be seen without decoding it: docs/performance.md says what each decoder does with it.
 * Markers as ITU T.81, B.1.1.3 and table B.1; Adobe's APP14 transform flag as libjpeg reads it
 * (jdmarker.c: 0 = RGB or CMYK, 1 = YCbCr, 2 = YCCK), and its colour-space guess from JFIF,
 * Adobe and the component ids (jdapimin.c default_decompress_parms). */
#include <string.h>

#include "runtime/image/image.h"

static unsigned be16(const uint8_t *p) { return (unsigned)p[0] << 8 | p[1]; }

static int is_sof(unsigned m)
{
    return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

/* From a frame's sampling factors: GR_JPEG_444 ... or -1. */
static int subsampling_of(const gr_jpeg_info *info)
{
    if (info->components != 3 || info->h[1] != 1 || info->v[1] != 1 || info->h[2] != 1 ||
        info->v[2] != 1)
        return -1;
    if (info->h[0] == 1 && info->v[0] == 1)
        return GR_JPEG_444;
    if (info->h[0] == 2 && info->v[0] == 1)
        return GR_JPEG_422;
    if (info->h[0] == 2 && info->v[0] == 2)
        return GR_JPEG_420;
    if (info->h[0] == 1 && info->v[0] == 2)
        return GR_JPEG_440;
    return -1;
}

/* A DHT segment's tables as libjpeg reads them (jdmarker.c get_dht): class 0/1, id 0..3, at
 * most 256 codes each, the lengths adding up to the segment. Marks the tables defined. */
static int dht_ok(const uint8_t *seg, size_t n, unsigned *defined)
{
    size_t at = 0;
    while (at < n) {
        if (n - at < 17)
            return 0;
        unsigned tc = seg[at] >> 4, th = seg[at] & 15, count = 0;
        for (int i = 1; i <= 16; i++)
            count += seg[at + (size_t)i];
        if (tc > 1 || th > 3 || count > 256 || n - at - 17 < count)
            return 0;
        *defined |= 1u << (tc * 4 + th);
        at += 17 + count;
    }
    return 1;
}

/* A DQT segment's tables (get_dqt): 8- or 16-bit, id 0..3, the sizes adding up. */
static int dqt_ok(const uint8_t *seg, size_t n, unsigned *defined)
{
    size_t at = 0;
    while (at < n) {
        unsigned pq = seg[at] >> 4, tq = seg[at] & 15;
        size_t size = 1 + (pq ? 128 : 64);
        if (pq > 1 || tq > 3 || n - at < size)
            return 0;
        *defined |= 1u << tq;
        at += size;
    }
    return 1;
}

/* Whether libjpeg takes a 3-component frame for YCbCr: a JFIF marker says so, else an Adobe
 * marker's transform, else the component ids ('R' 'G' 'B' is RGB, anything else YCbCr). */
static int libjpeg_ycbcr(const gr_jpeg_info *info, const int ids[4])
{
    if (info->components != 3)
        return 0;
    if (info->jfif)
        return 1;
    if (info->adobe_transform >= 0)
        return info->adobe_transform != 0;
    return !(ids[0] == 'R' && ids[1] == 'G' && ids[2] == 'B');
}

/* Past a scan's entropy-coded data from `pos`: to the 0xFF of the marker that ends it (stuffed
 * 0xFF 0x00 and restart markers belong to the data). len when it runs to the end of the file. */
static size_t skip_entropy(const uint8_t *data, size_t len, size_t pos)
{
    while (pos < len) {
        const uint8_t *ff = memchr(data + pos, 0xFF, len - pos);
        if (!ff)
            return len;
        size_t at = (size_t)(ff - data);
        if (at + 1 >= len)
            return len;
        uint8_t next = data[at + 1];
        if (next == 0x00 || (next >= 0xD0 && next <= 0xD7)) {
            pos = at + 2;
            continue;
        }
        return at; /* a marker (or fill bytes before one) */
    }
    return len;
}

void gr_jpeg_scan(const uint8_t *data, size_t len, gr_jpeg_info *info)
{
    memset(info, 0, sizeof *info);
    info->subsampling = -1;
    info->adobe_transform = -1;
    if (!data || len < 4 || data[0] != 0xFF || data[1] != 0xD8)
        return;
    info->is_jpeg = 1;
    size_t pos = 2;
    int ids[4] = {0};
    unsigned huff_defined = 0, quant_defined = 0, quant_used = 0; /* bit per table */
    for (;;) {
        if (pos >= len || data[pos] != 0xFF)
            return; /* truncated, or bytes where a marker belongs */
        while (pos < len && data[pos] == 0xFF)
            pos++;
        if (pos >= len)
            return;
        unsigned m = data[pos++];
        if (m == 0xD9) { /* EOI */
            info->complete = info->frames == 1 && info->scans >= 1;
            info->subsampling = subsampling_of(info);
            info->ycbcr = libjpeg_ycbcr(info, ids);
            return;
        }
        /* the markers libjpeg reads (jdmarker.c read_markers): frames, tables, restart
         * interval, APPn, COM, scans; anything else it refuses ("Unsupported marker"), and a
         * stuffed byte, TEM, RSTn or a second SOI is no marker segment here */
        if (!is_sof(m) && m != 0xC4 && m != 0xCC && m != 0xDA && m != 0xDB && m != 0xDD &&
            !(m >= 0xE0 && m <= 0xEF) && m != 0xFE)
            return;
        if (pos + 2 > len)
            return;
        unsigned seg_len = be16(data + pos);
        if (seg_len < 2 || pos + seg_len > len)
            return;
        const uint8_t *seg = data + pos + 2;
        size_t n = seg_len - 2;
        if (is_sof(m)) {
            if (n < 6 || ++info->frames > 1)
                return;
            info->sof = (int)m;
            info->precision = seg[0];
            info->height = (int)be16(seg + 1);
            info->width = (int)be16(seg + 3);
            info->components = seg[5];
            if (info->components < 1 || info->components > 4 ||
                n != 6 + 3 * (size_t)info->components)
                return;
            for (int c = 0; c < info->components; c++) {
                const uint8_t *comp = seg + 6 + 3 * c;
                info->h[c] = comp[1] >> 4;
                info->v[c] = comp[1] & 15;
                ids[c] = comp[0];
                if (info->h[c] < 1 || info->h[c] > 4 || info->v[c] < 1 || info->v[c] > 4 ||
                    comp[2] > 3)
                    return;
                quant_used |= 1u << comp[2];
                for (int d = 0; d < c; d++)
                    if (ids[d] == comp[0])
                        return; /* two components of one id */
            }
        } else if (m == 0xC4) {
            if (!dht_ok(seg, n, &huff_defined))
                return;
            info->huffman_tables = 1;
        } else if (m == 0xDB) {
            if (!dqt_ok(seg, n, &quant_defined))
                return;
        } else if (m == 0xEE && n >= 12 && memcmp(seg, "Adobe", 5) == 0) {
            info->adobe_transform = seg[11];
        } else if (m == 0xE0 && n >= 14 && memcmp(seg, "JFIF", 5) == 0) {
            if (seg[5] != 1)
                return; /* libjpeg warns of a JFIF major version other than 1 (examine_app0) */
            info->jfif = 1;
        } else if (m == 0xDD) {
            if (n != 2)
                return; /* get_dri: "Bogus marker length" */
        } else if (m == 0xCC) {
            return; /* arithmetic-coding conditioning (get_dac checks its values): never the GPU's */
        } else if (m == 0xDA) { /* SOS, then its entropy-coded data */
            if (info->frames != 1 || n < 1 || n != 4 + 2 * (size_t)seg[0] || seg[0] < 1 ||
                seg[0] > info->components || (quant_used & ~quant_defined))
                return;
            /* each a frame component, in the frame's order (so once each), its tables
             * defined; libjpeg-turbo refuses others ("Invalid component ID") */
            int last = -1;
            for (int k = 0; k < seg[0]; k++) {
                int at = -1;
                for (int c = 0; c < info->components; c++)
                    if (ids[c] == seg[1 + 2 * k])
                        at = c;
                int found = at > last;
                last = at;
                unsigned td = seg[2 + 2 * k] >> 4, ta = seg[2 + 2 * k] & 15;
                if (!found || td > 3 || ta > 3)
                    return;
                /* (a progressive scan uses one of the two, or none: not checked) */
                if (info->sof != 0xC2 &&
                    (!(huff_defined >> td & 1) || !(huff_defined >> (4 + ta) & 1)))
                    return;
            }
            const uint8_t *tail = seg + 1 + 2 * (size_t)seg[0]; /* Ss, Se, Ah/Al */
            if (info->sof != 0xC2 && (tail[0] != 0 || tail[1] != 63 || tail[2] != 0))
                return; /* a sequential scan covers the whole block */
            info->scans++;
            if (seg[0] != info->components)
                info->partial_scans = 1;
            pos = skip_entropy(data, len, pos + seg_len);
            continue;
        }
        pos += seg_len;
    }
}

int gr_jpeg_gpu_decodable(const gr_jpeg_info *info)
{
    return info->complete && (info->sof == 0xC0 || info->sof == 0xC1) && info->precision == 8 &&
           info->components == 3 && info->scans == 1 && !info->partial_scans &&
           info->huffman_tables && info->ycbcr &&
           (info->adobe_transform == -1 || info->adobe_transform == 1) &&
           info->subsampling >= 0 &&
           /* libjpeg's JPEG_MAX_DIMENSION: larger is refused there, so here */
           info->width > 0 && info->height > 0 && info->width <= 65500 && info->height <= 65500;
}
