/* libFuzzer harness: the JPEG structure walk that picks the decoder (runtime/image/jpeg_scan.c).
 * Any bytes: no crash, no read past the input. A file it calls GPU-decodable must be one
 * libjpeg-turbo reads the header of, with the same size and a 3-component YCbCr colour space
 * (the GPU decoder would otherwise get something the CPU decoder sees differently). */
#include <stddef.h>
#include <stdint.h>
#include <turbojpeg.h>

#include "runtime/image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gr_jpeg_info info;
    gr_jpeg_scan(data, size, &info);
    if (!gr_jpeg_gpu_decodable(&info))
        return 0;
    tjhandle tj = tjInitDecompress();
    if (!tj)
        return 0;
    int w, h, samp, cs;
    if (tjDecompressHeader3(tj, data, (unsigned long)size, &w, &h, &samp, &cs) != 0 ||
        w != info.width || h != info.height || cs != TJCS_YCbCr)
        __builtin_trap();
    tjDestroy(tj);
    return 0;
}
