/* tests/fuzz/fuzz_main.c: the fuzz targets without libFuzzer (a compiler
 * other than clang): each argument, a file or a folder of files, is read
 * and given to LLVMFuzzerTestOneInput once, so every corpus input replays
 * through the same code in CI. Prints how many inputs ran. */
#include "tests/fuzz/fuzz.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

static long run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t cap = 1 << 16, n = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap)
            buf = realloc(buf, cap *= 2);
    fclose(f);
    if (buf)
        LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return buf ? 1 : 0;
}

int main(int argc, char **argv)
{
    long n = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
                char p[4096];
                snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
                if (e->d_name[0] != '.' && !strstr(e->d_name, ".expect") && stat(p, &st) == 0 && S_ISREG(st.st_mode))
                    n += run_file(p);
            }
            if (d)
                closedir(d);
        } else {
            n += run_file(argv[i]);
        }
    }
    printf("%s: %ld inputs replayed, none crashed\n", argv[0], n);
    return n > 0 ? 0 : 1;
}
