/* Runs a fuzz target without libFuzzer, as a unit test (gcc, ASan+UBSan): first every file of the
 * target's seed corpus, then FUZZ_RUNS (default 20000) inputs made from a fixed seed (FUZZ_SEED):
 * random bytes, and stacked byte-level mutations of the seeds and of earlier inputs. The same
 * seed gives the same inputs, so a failure here reproduces. Prints TAP.
 *
 *     build/tests/test_fuzz_NAME            corpus tests/fuzz/corpus/NAME/, then the random phase
 *     build/tests/test_fuzz_NAME FILE...    just these inputs (e.g. a crash libFuzzer saved)
 *
 * A failing input (a violated property's abort(), or a sanitizer report) is written to
 * build/fuzz/failure-NAME before the process dies, and a "not ok" line names it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

#ifndef FUZZ_NAME
#error "build with -DFUZZ_NAME=\"name\""
#endif

#if defined(__SANITIZE_ADDRESS__)
#define DRIVER_SANITIZERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DRIVER_SANITIZERS 1
#endif
#endif
#ifdef DRIVER_SANITIZERS
#include <sanitizer/common_interface_defs.h>
#endif

#define INPUT_MAX  8192
#define MAX_SEEDS  256
#define CORPUS_DIR "tests/fuzz/corpus/" FUZZ_NAME
#define FAIL_DIR   "build/fuzz"
#define FAIL_FILE  FAIL_DIR "/failure-" FUZZ_NAME

static int test_number;
/* What is running now, for the failure report (which may come from a signal handler). */
static const uint8_t *current_data;
static size_t current_size;
static char current_what[256];

static void write_str(const char *s)
{
    for (size_t len = strlen(s); len > 0;) {
        ssize_t n = write(STDOUT_FILENO, s, len);
        if (n <= 0)
            return;
        s += n;
        len -= (size_t)n;
    }
}

/* Async-signal-safe: write(2) only. */
static void report_failure(void)
{
    static volatile sig_atomic_t reported;
    if (reported)
        return;
    reported = 1;
    char num[16];
    int n = test_number + 1, i = sizeof num - 1;
    num[i] = '\0';
    do
        num[--i] = (char)('0' + n % 10);
    while ((n /= 10) > 0);
    write_str("not ok ");
    write_str(num + i);
    write_str(" - " FUZZ_NAME ": failed on ");
    write_str(current_what);
    write_str("\n");
    int fd = open(FAIL_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        for (size_t off = 0; off < current_size;) {
            ssize_t w = write(fd, current_data + off, current_size - off);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
        close(fd);
        write_str("#   input saved to " FAIL_FILE "; rerun: build/tests/test_fuzz_" FUZZ_NAME
                  " " FAIL_FILE "\n");
    }
}

/* UBSan ends the process with _exit(), past the death callback (gcc links it as its own
 * library); make it abort() instead, so on_abort() reports the input. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
    return "abort_on_error=1:print_stacktrace=1";
}

static void on_abort(int sig)
{
    report_failure();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void run_input(const uint8_t *data, size_t size)
{
    /* An exactly-sized heap copy, so the sanitizers see a read past the end. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        abort();
    memcpy(copy, data, size);
    current_data = copy;
    current_size = size;
    LLVMFuzzerTestOneInput(copy, size);
    current_data = NULL;
    current_size = 0;
    free(copy);
}

__attribute__((format(printf, 2, 3))) static void ok_line(int passed, const char *fmt, ...)
{
    printf("%sok %d - " FUZZ_NAME ": ", passed ? "" : "not ", ++test_number);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

struct input {
    uint8_t *data;
    size_t size;
};

static int read_file(const char *path, struct input *in)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    in->data = malloc(INPUT_MAX);
    in->size = 0;
    ssize_t n = 0;
    while (in->data && in->size < INPUT_MAX &&
           (n = read(fd, in->data + in->size, INPUT_MAX - in->size)) > 0)
        in->size += (size_t)n;
    close(fd);
    if (!in->data || n < 0) {
        free(in->data);
        return -1;
    }
    return 0;
}

static int is_regular(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Runs the named files; returns how many ran, or -1 if one could not be read. */
static int run_files(char **paths, int n, struct input *seeds, size_t *n_seeds)
{
    for (int i = 0; i < n; i++) {
        struct input in;
        if (read_file(paths[i], &in) < 0) {
            printf("# cannot read %s: %s\n", paths[i], strerror(errno));
            return -1;
        }
        snprintf(current_what, sizeof current_what, "%s", paths[i]);
        run_input(in.data, in.size);
        if (*n_seeds < MAX_SEEDS)
            seeds[(*n_seeds)++] = in;
        else
            free(in.data);
    }
    return n;
}

static int load_corpus_dir(const char *dir, struct input *seeds, size_t *n_seeds)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort); /* sorted: the same order every run */
    if (n < 0) {
        printf("# cannot read %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char *paths[MAX_SEEDS];
    int count = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        if (names[i]->d_name[0] != '.' && is_regular(path) && count < MAX_SEEDS)
            paths[count++] = strdup(path);
        free(names[i]);
    }
    free(names);
    int rc = run_files(paths, count, seeds, n_seeds);
    for (int i = 0; i < count; i++)
        free(paths[i]);
    return rc;
}

/* splitmix64: small, and the same sequence everywhere. */
static unsigned long long rng_seed;
static uint64_t rng_state;
static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static size_t below(size_t n)
{
    return n ? (size_t)(rng() % n) : 0;
}

/* Mostly short lengths, sometimes long ones. */
static size_t random_length(void)
{
    switch (below(4)) {
    case 0:
        return below(8);
    case 1:
    case 2:
        return below(64);
    default:
        return below(INPUT_MAX);
    }
}

static const uint8_t interesting_bytes[] = {
    0x00, 0x01, 0x02, 0x05, 0x06, 0x20, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x39, 0x3a,
    0x3d, 0x41, 0x61, 0x7e, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1,
    0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xf8, 0xfe, 0xff,
};
static const uint16_t interesting_16[] = {0,     1,     0x7f,  0x80,  0xff,   0x100,  0x1ff,
                                          0x200, 0x201, 0x1f3, 0x1f4, 0x7fff, 0x8000, 0xffff};
static const uint32_t interesting_32[] = {0, 1,          2,          3,          4,    5,    6,
                                          7, 0x7fffffff, 0x80000000, 0xffffffff, 1000, 4096, 65536};

/* One mutation of buf[0..*size) in place (capacity INPUT_MAX). */
static void mutate_once(uint8_t *buf, size_t *size, const struct input *seeds, size_t n_seeds)
{
    size_t n = *size;
    const struct input *other = n_seeds ? &seeds[below(n_seeds)] : NULL;
    switch (below(13)) {
    case 0: /* flip a bit */
        if (n)
            buf[below(n)] ^= (uint8_t)(1u << below(8));
        break;
    case 1: /* random byte */
        if (n)
            buf[below(n)] = (uint8_t)rng();
        break;
    case 2: /* interesting byte */
        if (n)
            buf[below(n)] = interesting_bytes[below(sizeof interesting_bytes)];
        break;
    case 3: /* insert a byte */
        if (n < INPUT_MAX) {
            size_t at = below(n + 1);
            memmove(buf + at + 1, buf + at, n - at);
            buf[at] =
                below(2) ? (uint8_t)rng() : interesting_bytes[below(sizeof interesting_bytes)];
            n++;
        }
        break;
    case 4: /* delete a range */
        if (n) {
            size_t at = below(n), len = 1 + below(below(2) ? 4 : n - at);
            if (len > n - at)
                len = n - at;
            memmove(buf + at, buf + at + len, n - at - len);
            n -= len;
        }
        break;
    case 5: /* copy a range of itself elsewhere, inserting */
        if (n) {
            size_t from = below(n), len = 1 + below(n - from), at = below(n + 1);
            if (len > INPUT_MAX - n)
                len = INPUT_MAX - n;
            uint8_t tmp[INPUT_MAX];
            memcpy(tmp, buf + from, len);
            memmove(buf + at + len, buf + at, n - at);
            memcpy(buf + at, tmp, len);
            n += len;
        }
        break;
    case 6: /* insert a piece of another seed (works like a dictionary) */
    case 7: /* overwrite with a piece of another seed */
        if (other && other->size) {
            size_t from = below(other->size), len = 1 + below(other->size - from);
            size_t at = below(n + 1);
            if (len > INPUT_MAX - n)
                len = INPUT_MAX - n;
            if (n - at >= len && below(2)) {
                memcpy(buf + at, other->data + from, len);
            } else {
                memmove(buf + at + len, buf + at, n - at);
                memcpy(buf + at, other->data + from, len);
                n += len;
            }
        }
        break;
    case 8: /* truncate */
        n = below(n + 1);
        break;
    case 9: /* repeat a short range many times: long inputs, length limits */
        if (n) {
            size_t from = below(n), len = 1 + below(n - from < 8 ? n - from : 8);
            size_t times = 1 + below(below(4) ? 16 : 1024);
            size_t at = from + len;
            while (times-- && n + len <= INPUT_MAX) {
                memmove(buf + at + len, buf + at, n - at);
                memmove(buf + at, buf + from, len);
                n += len;
            }
        }
        break;
    case 10: /* interesting 16-bit value */
        if (n >= 2) {
            uint16_t v = interesting_16[below(sizeof interesting_16 / sizeof interesting_16[0])];
            memcpy(buf + below(n - 1), &v, sizeof v);
        }
        break;
    case 11: /* interesting 32-bit value */
        if (n >= 4) {
            uint32_t v = interesting_32[below(sizeof interesting_32 / sizeof interesting_32[0])];
            memcpy(buf + below(n - 3), &v, sizeof v);
        }
        break;
    default: /* swap two bytes */
        if (n >= 2) {
            size_t a = below(n), b = below(n);
            uint8_t t = buf[a];
            buf[a] = buf[b];
            buf[b] = t;
        }
        break;
    }
    *size = n;
}

static void random_phase(unsigned long long runs, const struct input *seeds, size_t n_seeds)
{
    static uint8_t buf[INPUT_MAX], last[INPUT_MAX];
    size_t size = 0, last_size = 0;
    for (unsigned long long i = 0; i < runs; i++) {
        size_t kind = below(8);
        if (kind == 0 || n_seeds == 0) {
            /* random bytes */
            size = random_length();
            for (size_t j = 0; j < size; j++)
                buf[j] = (uint8_t)rng();
        } else if (kind == 1) {
            /* bytes drawn from the seeds: random, but in the target's alphabet */
            size = random_length();
            for (size_t j = 0; j < size; j++) {
                const struct input *s = &seeds[below(n_seeds)];
                buf[j] = s->size ? s->data[below(s->size)] : 0;
            }
        } else {
            /* mutations stacked on a seed, or on the previous input to go further */
            if (kind == 2 && last_size > 0) {
                memcpy(buf, last, last_size);
                size = last_size;
            } else {
                const struct input *s = &seeds[below(n_seeds)];
                memcpy(buf, s->data, s->size);
                size = s->size;
            }
            for (size_t m = 1 + below(below(2) ? 4 : 16); m > 0; m--)
                mutate_once(buf, &size, seeds, n_seeds);
        }
        memcpy(last, buf, size);
        last_size = size;
        snprintf(current_what, sizeof current_what, "random input %llu (FUZZ_SEED=%llu)", i,
                 rng_seed);
        run_input(buf, size);
    }
}

static unsigned long long env_number(const char *name, unsigned long long def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end) {
        fprintf(stderr, "%s=%s: expected a number\n", name, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    /* Line-buffered, so every TAP line is out before a crash cuts the process short. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGABRT, on_abort);
#ifdef DRIVER_SANITIZERS
    __sanitizer_set_death_callback(report_failure);
#endif
    mkdir("build", 0755);
    mkdir(FAIL_DIR, 0755);

    static struct input seeds[MAX_SEEDS];
    size_t n_seeds = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            if (!is_regular(argv[i]))
                return fprintf(stderr, "%s: not a file\n", argv[i]), 2;
        int n = run_files(argv + 1, argc - 1, seeds, &n_seeds);
        ok_line(n >= 0, "%d inputs from the command line", n);
    } else {
        int n = load_corpus_dir(CORPUS_DIR, seeds, &n_seeds);
        ok_line(n > 0, "corpus %s: %d inputs", CORPUS_DIR, n < 0 ? 0 : n);

        unsigned long long runs = env_number("FUZZ_RUNS", 20000);
        rng_seed = env_number("FUZZ_SEED", 0x6875746368ull);
        rng_state = rng_seed;
        random_phase(runs, seeds, n_seeds);
        ok_line(1, "%llu random inputs and mutations (FUZZ_SEED=%llu)", runs, rng_seed);
    }
    for (size_t i = 0; i < n_seeds; i++)
        free(seeds[i].data);
    printf("1..%d\n", test_number);
    return 0;
}
