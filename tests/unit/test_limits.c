/* Lengths of what enters the core (jail.h, "limits"): every name, path, argv and environment
 * one byte over its bound is refused, with the errno and a message that names the field and the
 * bound; one at the bound goes through. Nothing here starts a sandbox: a spec whose lengths pass
 * fails on its uid range (host_uid_base 0), a command on its sandbox not running. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jail/command.h"
#include "jail/jail.h"
#include "tap.h"

static char *strings[64];
static size_t n_strings;

/* A string of len bytes, "/" first when path (the test's to free at the end). */
static const char *filled(size_t len, bool path)
{
    char *s = malloc(len + 1);
    if (!s || n_strings == sizeof strings / sizeof strings[0]) {
        printf("Bail out! out of test strings\n");
        exit(1);
    }
    memset(s, 'a', len);
    if (path && len > 0)
        s[0] = '/';
    s[len] = '\0';
    strings[n_strings++] = s;
    return s;
}

static bool says(const err_t *err, int errnum, const char *words)
{
    bool right = err->errnum == errnum && strstr(err->msg, words);
    if (!right)
        printf("#   errno %d, message: %s\n", err->errnum, err->msg);
    return right;
}

static void check_length_and_args(void)
{
    err_t err = {0};
    ok(jail_check_length(NULL, 4, &err, "x") == 0, "check_length: an absent field passes");
    ok(jail_check_length("abcd", 4, &err, "x") == 0, "check_length: 4 bytes at a bound of 4 pass");
    ok(jail_check_length("abcde", 4, &err, "files[%d].path", 7) < 0 &&
           says(&err, ENAMETOOLONG, "files[7].path is longer than 4 bytes"),
       "check_length: 5 are ENAMETOOLONG, named with their index and the bound");

    const char *big = filled(JAIL_MAX_ARG_BYTES, false);
    const char *too_big = filled(JAIL_MAX_ARG_BYTES + 1, false);
    ok(jail_check_args((const char *const[]){"x", big, NULL}, NULL, JAIL_MAX_ARGS, &err) == 0,
       "check_args: an argv entry of JAIL_MAX_ARG_BYTES passes");
    ok(jail_check_args((const char *const[]){"x", too_big, NULL}, NULL, JAIL_MAX_ARGS, &err) < 0 &&
           says(&err, E2BIG, "argv entry 1 is longer than 131071 bytes"),
       "check_args: one byte more is E2BIG, naming the entry");
    ok(jail_check_args((const char *const[]){"x", NULL}, (const char *const[]){too_big, NULL},
                       JAIL_MAX_ARGS, &err) < 0 &&
           says(&err, E2BIG, "environment entry 0 is longer than 131071 bytes"),
       "check_args: likewise in the environment");

    static const char *many[JAIL_MAX_ARGS + 2];
    for (size_t i = 0; i < JAIL_MAX_ARGS + 1; i++)
        many[i] = "v=1";
    many[JAIL_MAX_ARGS] = NULL;
    ok(jail_check_args((const char *const[]){"x", NULL}, many, JAIL_MAX_ARGS, &err) == 0,
       "check_args: JAIL_MAX_ARGS environment entries pass");
    many[JAIL_MAX_ARGS] = "v=1";
    ok(jail_check_args(many, NULL, JAIL_MAX_ARGS, &err) < 0 &&
           says(&err, E2BIG, "argv has more than 4096 entries"),
       "check_args: one more is E2BIG");
    ok(jail_check_args(many, NULL, 0, &err) == 0,
       "check_args: with no count of its own (a payload's argv), the bytes alone bound it");
    static const char *huge[JAIL_MAX_ARGV_ENV_BYTES / 9 + 2];
    for (size_t i = 0; i < sizeof huge / sizeof *huge - 1; i++)
        huge[i] = "";
    ok(jail_check_args(huge, NULL, 0, &err) < 0 && says(&err, E2BIG, "at most 524288"),
       "check_args: ... and empty entries past the byte bound are E2BIG");

    /* 4 strings of L bytes cost 4 * (L + 1 + 8): exactly the total bound for L = 131063. */
    size_t len = JAIL_MAX_ARGV_ENV_BYTES / 4 - 1 - sizeof(char *);
    const char *quarter = filled(len, false), *over = filled(len + 1, false);
    ok(jail_check_args((const char *const[]){quarter, quarter, NULL},
                       (const char *const[]){quarter, quarter, NULL}, JAIL_MAX_ARGS, &err) == 0,
       "check_args: argv and environment of JAIL_MAX_ARGV_ENV_BYTES together pass");
    ok(jail_check_args((const char *const[]){quarter, quarter, NULL},
                       (const char *const[]){quarter, over, NULL}, JAIL_MAX_ARGS, &err) < 0 &&
           says(&err, E2BIG, "at most 524288"),
       "check_args: one byte more is E2BIG, naming the bound");
}

static char dummy_host; /* never used: every spec here fails validation */
static const char *const default_argv[] = {"/bin/true", NULL};
static const char *const no_env[] = {NULL};

static struct jail_spec base_spec(void)
{
    return (struct jail_spec){
        .cgroups = (struct cgroup_host *)&dummy_host,
        .name = "limits",
        .template_dir = "/t",
        .usr_dir = "/usr",
        .stage_dir = "/s",
        .limits = {.disk_bytes = 1 << 20},
        .host_uid_base = 0, /* fails last, once every length has passed */
        .argv = default_argv,
        .envp = no_env,
        .stdin_fd = -1,
        .stdout_fd = -1,
        .stderr_fd = -1,
        .keep_fd = -1,
    };
}

/* The spec's outcome: refused for its field, or through every length check to the uid range. */
static void spec_case(const struct jail_spec *spec, int errnum, const char *words, const char *what)
{
    struct jail j;
    err_t err = {0};
    ok(jail_start_begin(spec, &j, &err) < 0 &&
           (errnum ? says(&err, errnum, words) : says(&err, EINVAL, "host uid range")),
       "spec: %s", what);
}

/* Each field at its bound (through) and one byte over (refused). */
#define SPEC_FIELD(field, bound, path, name)                                                       \
    do {                                                                                           \
        struct jail_spec s_ = base_spec();                                                         \
        s_.field = filled((bound), (path));                                                        \
        spec_case(&s_, 0, NULL, name " of the bound's length passes");                             \
        s_.field = filled((bound) + 1, (path));                                                    \
        char words_[96];                                                                           \
        tap_path(words_, sizeof words_, "sandbox spec: %s is longer than %zu bytes", name,         \
                 (size_t)(bound));                                                                 \
        spec_case(&s_, ENAMETOOLONG, words_, name " one byte longer is ENAMETOOLONG");             \
    } while (0)

static void check_spec(void)
{
    struct jail_spec s = base_spec();
    spec_case(&s, 0, NULL, "the base spec passes every length check");
    /* The name is also a cgroup name: [A-Za-z0-9._-]. */
    SPEC_FIELD(name, JAIL_MAX_NAME, false, "name");
    SPEC_FIELD(hostname, JAIL_MAX_HOSTNAME, false, "hostname");
    SPEC_FIELD(cwd, JAIL_MAX_SANDBOX_PATH, true, "cwd");
    SPEC_FIELD(template_dir, JAIL_MAX_HOST_PATH, true, "template_dir");
    SPEC_FIELD(usr_dir, JAIL_MAX_HOST_PATH, true, "usr_dir");
    SPEC_FIELD(stage_dir, JAIL_MAX_HOST_PATH, true, "stage_dir");
    SPEC_FIELD(layer_dir, JAIL_MAX_HOST_PATH, true, "layer_dir");
    SPEC_FIELD(dpkg_dir, JAIL_MAX_HOST_PATH, true, "dpkg_dir");

    struct jail_file files[2] = {{.host_fd = 3, .sandbox_path = "/a"}, {.host_fd = 3}};
    s.files = files;
    s.n_files = 2;
    files[1].sandbox_path = filled(JAIL_MAX_SANDBOX_PATH, true);
    spec_case(&s, 0, NULL, "a file's destination of the bound's length passes");
    files[1].sandbox_path = filled(JAIL_MAX_SANDBOX_PATH + 1, true);
    spec_case(&s, ENAMETOOLONG, "files[1].sandbox_path is longer than 4095 bytes",
              "a file's destination one byte longer is ENAMETOOLONG, with its index");
    s = base_spec();

    struct jail_mount mounts[1] = {{.host_path = filled(JAIL_MAX_HOST_PATH, true),
                                    .sandbox_path = filled(JAIL_MAX_SANDBOX_PATH, true)}};
    s.mounts = mounts;
    s.n_mounts = 1;
    spec_case(&s, 0, NULL, "a mount's source and target of their bounds' lengths pass");
    mounts[0].host_path = filled(JAIL_MAX_HOST_PATH + 1, true);
    spec_case(&s, ENAMETOOLONG, "mounts[0].host_path is longer than 4032 bytes",
              "a mount's source one byte longer is ENAMETOOLONG");
    mounts[0].host_path = "/h";
    mounts[0].sandbox_path = filled(JAIL_MAX_SANDBOX_PATH + 1, true);
    spec_case(&s, ENAMETOOLONG, "mounts[0].sandbox_path is longer than 4095 bytes",
              "a mount's target one byte longer is ENAMETOOLONG");
    s = base_spec();

    s.argv = (const char *const[]){"/bin/true", filled(JAIL_MAX_ARG_BYTES + 1, false), NULL};
    spec_case(&s, E2BIG, "sandbox spec: argv entry 1 is longer than 131071 bytes",
              "an argv entry over JAIL_MAX_ARG_BYTES is E2BIG");
    s.argv = default_argv;
    const char *big = filled(JAIL_MAX_ARG_BYTES, false);
    s.envp = (const char *const[]){big, big, big, big, big, NULL};
    spec_case(&s, E2BIG, "at most 524288", "argv and environment over the total are E2BIG");
}

static void check_command(void)
{
    struct jail j;
    memset(&j, 0, sizeof j); /* no cgroup: not running */
    char group[JAIL_COMMAND_GROUP_MAX + 1];
    err_t err = {0};
    struct jail_command_spec c = {.argv = default_argv, .envp = no_env};
    c.cwd = filled(JAIL_MAX_SANDBOX_PATH, true);
    c.tag = filled(JAIL_COMMAND_MAX_TAG, false);
    ok(jail_command_start(&j, &c, 1, group, &err) < 0 && says(&err, ESRCH, "not running"),
       "command: cwd and tag of their bounds' lengths pass (to: the sandbox is not running)");
    c.tag = filled(JAIL_COMMAND_MAX_TAG + 1, false);
    ok(jail_command_start(&j, &c, 1, group, &err) < 0 &&
           says(&err, ENAMETOOLONG, "command: tag is longer than 128 bytes"),
       "command: a tag one byte longer is ENAMETOOLONG");
    c.tag = NULL;
    c.cwd = filled(JAIL_MAX_SANDBOX_PATH + 1, true);
    ok(jail_command_start(&j, &c, 1, group, &err) < 0 &&
           says(&err, ENAMETOOLONG, "command: cwd is longer than 4095 bytes"),
       "command: a cwd one byte longer is ENAMETOOLONG");
    c.cwd = NULL;
    c.argv = (const char *const[]){"x", filled(JAIL_MAX_ARG_BYTES + 1, false), NULL};
    ok(jail_command_start(&j, &c, 1, group, &err) < 0 &&
           says(&err, E2BIG, "command: argv entry 1 is longer than 131071 bytes"),
       "command: an argv entry over JAIL_MAX_ARG_BYTES is E2BIG");
}

int main(void)
{
    check_length_and_args();
    check_spec();
    check_command();
    for (size_t i = 0; i < n_strings; i++)
        free(strings[i]);
    return done_testing();
}
