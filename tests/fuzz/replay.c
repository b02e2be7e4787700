/* Replays fuzz inputs through a libFuzzer harness without libFuzzer, so
 * every build (plain, ASan + UBSan, Windows) runs the seed corpora:
 *   fuzz_<target>_replay FILE...
 * Each file is read into a buffer of exactly its size (as libFuzzer does,
 * so a sanitizer sees any read past the input) and given to
 * LLVMFuzzerTestOneInput once. A harness reports a broken property by
 * aborting, which fails the run; so does a file that cannot be read, or
 * no file at all (an empty corpus would otherwise pass unseen). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The whole file in a malloc'd buffer of its exact size (one byte
 * allocated for an empty file, so the pointer is never NULL); NULL if it
 * cannot be read. */
static uint8_t *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0)
        buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE...\n(no input given: is the corpus empty?)\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        size_t size = 0;
        uint8_t *data = read_all(argv[i], &size);
        if (!data) {
            fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[i]);
            return 1;
        }
        /* named before the call: a crash then says which input it was */
        printf("replay %s (%zu bytes)\n", argv[i], size);
        fflush(stdout);
        LLVMFuzzerTestOneInput(data, size);
        free(data);
    }
    printf("%d input(s) replayed\n", argc - 1);
    return 0;
}
