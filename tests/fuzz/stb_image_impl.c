/* The fuzz build compiles stb_image's decoders itself (instead of using the prebuilt libstb) so
 * that they carry coverage and AddressSanitizer instrumentation: the image harness then explores
 * and checks the decoders behind gr_image_decode_mem, not only graphrun's code around them.
 * The executables' definitions take precedence over the shared library's. Third-party code: built
 * without graphrun's warning set. */
#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>
