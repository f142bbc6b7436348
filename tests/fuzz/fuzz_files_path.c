/* The path validator of the file operations (files_path_normalize, src/files/files.h): the input
 * bytes are the path, as they would come over HTTP (NULs included). Checked: it succeeds exactly
 * when the input is absolute, shorter than PATH_MAX, NUL-free and has no component longer than
 * NAME_MAX, and fails with EINVAL or ENAMETOOLONG (the right one) and a message otherwise; the
 * output equals a reference normalization (a stack of components), is absolute, has no empty,
 * "." or ".." component and no trailing slash, is no longer than the input, and normalizes to
 * itself; a NUL-terminated copy through the operations' own entry (files_stat on a closed fd)
 * is refused the same way before any file system call. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "files/files.h"
#include "fuzz.h"

/* Components of data[0..size) kept after "." and ".." are applied. */
static size_t reference(const uint8_t *data, size_t size, char *out)
{
    size_t starts[PATH_MAX], lens[PATH_MAX], depth = 0;
    for (size_t i = 0; i < size;) {
        while (i < size && data[i] == '/')
            i++;
        size_t j = i;
        while (j < size && data[j] != '/')
            j++;
        size_t n = j - i;
        if (n == 1 && data[i] == '.') {
        } else if (n == 2 && data[i] == '.' && data[i + 1] == '.') {
            if (depth > 0)
                depth--;
        } else if (n > 0) {
            starts[depth] = i;
            lens[depth] = n;
            depth++;
        }
        i = j;
    }
    size_t o = 0;
    for (size_t k = 0; k < depth; k++) {
        out[o++] = '/';
        memcpy(out + o, data + starts[k], lens[k]);
        o += lens[k];
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    return o;
}

static bool long_component(const uint8_t *data, size_t size)
{
    size_t run = 0;
    for (size_t i = 0; i < size; i++) {
        run = data[i] == '/' ? 0 : run + 1;
        if (run > NAME_MAX)
            return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char out[PATH_MAX], again[PATH_MAX], want[PATH_MAX + 1];
    err_t err = {.errnum = -1};
    memset(out, 0x55, sizeof out);
    int rc = files_path_normalize((const char *)data, size, out, &err);

    bool has_nul = memchr(data, '\0', size) != NULL;
    bool too_long = size >= PATH_MAX;
    bool relative = size == 0 || data[0] != '/';
    bool long_name = long_component(data, size);
    bool valid = !has_nul && !too_long && !relative && !long_name;
    fuzz_assert((rc == 0) == valid);
    if (rc < 0) {
        fuzz_assert(err.msg[0] != '\0');
        if (has_nul)
            fuzz_assert(err.errnum == EINVAL);
        else if (too_long)
            fuzz_assert(err.errnum == ENAMETOOLONG);
        else if (relative)
            fuzz_assert(err.errnum == EINVAL);
        else
            fuzz_assert(err.errnum == ENAMETOOLONG);
    } else {
        size_t len = strlen(out);
        fuzz_assert(len <= size && len < PATH_MAX);
        fuzz_assert(out[0] == '/');
        fuzz_assert(len == 1 || out[len - 1] != '/');
        fuzz_assert(strstr(out, "//") == NULL);
        for (const char *c = out + 1; len > 1 && c <= out + len;) {
            const char *end = strchr(c, '/');
            size_t n = end ? (size_t)(end - c) : strlen(c);
            fuzz_assert(n > 0 && n <= NAME_MAX);
            fuzz_assert(!(n == 1 && c[0] == '.') && !(n == 2 && c[0] == '.' && c[1] == '.'));
            if (!end)
                break;
            c = end + 1;
        }
        size_t want_len = reference(data, size, want);
        fuzz_assert(want_len == len && memcmp(want, out, len + 1) == 0);
        fuzz_assert(files_path_normalize(out, len, again, &err) == 0);
        fuzz_assert(strcmp(again, out) == 0);
    }

    /* Through an operation: the NUL-terminated prefix, on a closed fd. A valid path reaches the
     * file system (EBADF); an invalid one never does. */
    if (size < PATH_MAX + 16) {
        static char c_path[PATH_MAX + 16];
        memcpy(c_path, data, size);
        c_path[size] = '\0';
        size_t c_len = strlen(c_path);
        bool c_valid = c_len < PATH_MAX && c_len > 0 && c_path[0] == '/' &&
                       !long_component((const uint8_t *)c_path, c_len);
        static struct files_entry entry;
        int s = files_stat(-1, c_path, false, &entry, &err);
        fuzz_assert(s == -1);
        if (c_valid)
            fuzz_assert(err.errnum == EBADF);
        else
            fuzz_assert(err.errnum == EINVAL || err.errnum == ENAMETOOLONG);
    }
    return 0;
}
