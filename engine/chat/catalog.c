/* The menus' questions answered from simd/ and the GGUF header (see
 * catalog.h). */
#include "catalog.h"

#include <stdio.h>
#include <sys/stat.h>

#include "err.h"
#include "gguf.h"
#include "simd.h"
#include "sys.h"

int eng_kernel_count(void) { return SIMD_K_COUNT; }

int eng_kernel_describe(int i, eng_kernel_desc *out)
{
    if (i < 0 || i >= SIMD_K_COUNT)
        return ENG_EINVAL;
    const char *why = NULL;
    out->usable = simd_kernel_supported((enum simd_kernel)i, &why);
    out->name = simd_kernel_name((enum simd_kernel)i);
    out->why = out->usable ? NULL : why ? why : "not on this CPU";
    return 0;
}

void eng_model_file_describe(const char *path, char *note, size_t n)
{
    struct stat sb;
    char size[32] = "?";
    if (!stat(path, &sb))
        eng_format_bytes((double)sb.st_size, size, sizeof size);
    eng_gguf *g;
    eng_err e = {{0}};
    if (eng_gguf_open(path, &g, &e)) {
        snprintf(note, n, "%s  unreadable: %.150s", size, e.msg);
        return;
    }
    eng_str arch = {0};
    eng_err ig;
    eng_gguf_get_str(g, "general.architecture", &arch, &ig);
    snprintf(note, n, "%s  %.*s  %s", size, (int)(arch.len < 32 ? arch.len : 32), arch.ptr ? arch.ptr : "?",
             simd_type_name(eng_gguf_main_type(g, NULL)));
    eng_gguf_close(g);
}
