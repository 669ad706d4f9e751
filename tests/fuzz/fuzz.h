/* tests/fuzz/fuzz.h: what the fuzz targets share. Each target is one
 * LLVMFuzzerTestOneInput over one way bytes reach megasim; with clang
 * (-DMEGASIM_FUZZ=ON) libFuzzer drives it (scripts/fuzz.sh), without it
 * fuzz_main.c replays files through the same function (ctest fuzz_targets).
 * A target must never crash, hang or leak on any input: megasim's rule for
 * bad input is one message and exit 2, which in-process is a -1 and a
 * message in err. */
#ifndef TESTS_FUZZ_H
#define TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a file (the readers take paths): a fixed name per process
 * under $TMPDIR, rewritten for each input; its path. NULL if it cannot be
 * written (the input is then skipped). */
static inline const char *fuzz_file(const uint8_t *data, size_t size, const char *ext)
{
    static char path[512];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/megasim-fuzz-%ld%s", tmp && *tmp ? tmp : "/tmp", (long)getpid(), ext);
    FILE *f = fopen(path, "wb");
    if (!f)
        return NULL;
    int ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok ? path : NULL;
}

#endif
