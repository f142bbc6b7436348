/* `hutch doctor`: the host around the sandboxes: root with the capabilities hutch needs, the
 * state and run directories (created to test and removed again if missing), and the /usr the
 * sandboxes see. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/doctor_internal.h"
#include "cli/paths.h"
#include "jail/template.h"
#include "util/fileio.h"
#include "util/strfmt.h"

/* ---------- host directories ---------- */

static bool has_overlay_special(const char *path)
{
    /* overlayfs splits its options at ',' and its lowerdir list at ':', and takes '\' as an
     * escape; hutch passes layer paths unescaped. */
    return strpbrk(path, ",:\\") != NULL;
}

/* mkdir -p that remembers the shortest prefix it created, so the check can undo it. */
static int mkdir_p_tracked(const char *path, size_t *first_made, err_t *err)
{
    char buf[PATH_MAX];
    *first_made = 0;
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return err_set(err, ENAMETOOLONG, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (p[-1] != '/') {
            if (mkdir(buf, 0755) == 0) {
                if (!*first_made)
                    *first_made = strlen(buf);
            } else if (errno != EEXIST) {
                return err_set(err, errno, "mkdir %s", buf);
            }
        }
        *p = c;
        if (!c)
            return 0;
    }
}

static void rmdir_made(const char *path, size_t first_made)
{
    if (!first_made)
        return;
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path); /* mkdir_p_tracked held it whole in as much */
    for (;;) {
        size_t len = strlen(buf);
        while (len > 1 && buf[len - 1] == '/')
            buf[--len] = '\0';
        if (len < first_made || rmdir(buf) < 0)
            return;
        char *slash = strrchr(buf, '/');
        if (!slash || slash == buf)
            return;
        *slash = '\0';
    }
}

/* Finds the first directory on the real path to `path` (symlinks resolved) that others cannot
 * search (no o+x). Returns 0 when there is none, 1 with it in bad/bad_mode, -1 on error. */
static int find_untraversable(const char *path, char *bad, size_t size, mode_t *bad_mode)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        return -1;
    for (char *p = real;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        struct stat st;
        const char *prefix = real[0] ? real : "/";
        if (stat(prefix, &st) < 0)
            return -1;
        if (S_ISDIR(st.st_mode) && !(st.st_mode & S_IXOTH)) {
            snprintf(bad, size, "%s", prefix);
            *bad_mode = st.st_mode & 07777;
            return 1;
        }
        *p = c;
        if (!c)
            return 0;
    }
}

/* Creates and removes a directory in dir: a real write test (root may still hit a read-only
 * mount or an immutable attribute). */
static int try_write_in(const char *dir, err_t *err)
{
    char tmp[PATH_MAX];
    if (strfmt(tmp, sizeof tmp, "%s/.hutch-doctor.XXXXXX", dir) < 0 || !mkdtemp(tmp))
        return err_set(err, errno, "create a directory in %s", dir);
    rmdir(tmp);
    return 0;
}

void check_state_dir(struct doctor_result *r)
{
    const char *dir = hutch_state_dir();
    if (dir[0] != '/') {
        result_set(r, DOCTOR_FAIL,
                   "state directory \"%s\" is not absolute; fix: set "
                   "HUTCH_STATE_DIR to an absolute path",
                   dir);
        return;
    }
    if (has_overlay_special(dir)) {
        result_set(r, DOCTOR_FAIL,
                   "state directory %s contains ',', ':' or '\\', which break "
                   "the overlay mount options its template is passed in; fix: set "
                   "HUTCH_STATE_DIR to a path without them",
                   dir);
        return;
    }
    size_t first_made;
    err_t err;
    if (mkdir_p_tracked(dir, &first_made, &err) < 0) {
        result_set(r, DOCTOR_FAIL,
                   "cannot create the state directory: %s; fix: create %s as "
                   "root with mode 0755, or set HUTCH_STATE_DIR",
                   err.msg, dir);
        rmdir_made(dir, first_made);
        return;
    }
    char bad[PATH_MAX], tpl[PATH_MAX];
    mode_t mode = 0;
    /* Sandboxes run as unprivileged host uids and must reach the template below it, so the
     * whole way down to the template (when it exists) must be searchable by others. */
    bool have_tpl =
        strfmt(tpl, sizeof tpl, "%s/templates/base-v%d/rootfs", dir, TEMPLATE_BASE_VERSION) == 0 &&
        access(tpl, F_OK) == 0;
    const char *deepest = have_tpl ? tpl : dir;
    int found = find_untraversable(deepest, bad, sizeof bad, &mode);
    if (found < 0) {
        result_set(r, DOCTOR_FAIL, "resolving %s: %s", deepest, strerror(errno));
    } else if (found > 0) {
        result_set(r, DOCTOR_FAIL,
                   "%s has mode %04o, without o+x: sandboxes run as unprivileged "
                   "host uids and must traverse it to reach the template under %s/templates; "
                   "fix: chmod o+x %s, or set HUTCH_STATE_DIR to a path where every directory "
                   "has o+x",
                   bad, (unsigned)mode, dir, bad);
    } else if (try_write_in(dir, &err) < 0) {
        result_set(r, DOCTOR_FAIL, "%s; fix: make %s writable by root", err.msg, dir);
    } else {
        result_set(r, DOCTOR_OK, "%s %s, writable, every directory down to %s has o+x", dir,
                   first_made ? "can be created (and was removed again)" : "exists",
                   deepest == tpl ? "the template" : "it");
    }
    rmdir_made(dir, first_made);
}

void check_run_dir(struct doctor_result *r)
{
    const char *dir = hutch_run_dir();
    size_t first_made;
    err_t err;
    if (dir[0] != '/') {
        result_set(r, DOCTOR_FAIL,
                   "run directory \"%s\" is not absolute; fix: set HUTCH_RUN_DIR "
                   "to an absolute path",
                   dir);
        return;
    }
    if (mkdir_p_tracked(dir, &first_made, &err) < 0)
        result_set(r, DOCTOR_FAIL,
                   "cannot create the run directory (uid range locks): %s; fix: "
                   "set HUTCH_RUN_DIR to a writable place such as /run/hutch",
                   err.msg);
    else if (try_write_in(dir, &err) < 0)
        result_set(r, DOCTOR_FAIL, "%s; fix: set HUTCH_RUN_DIR to a writable place", err.msg);
    else
        result_set(r, DOCTOR_OK, "%s %s and writable (uid range locks)", dir,
                   first_made ? "can be created (and was removed again)" : "exists");
    rmdir_made(dir, first_made);
}

void check_usr(struct doctor_result *r)
{
    char real[PATH_MAX], bad[PATH_MAX];
    if (!realpath("/usr", real)) {
        result_set(r, DOCTOR_FAIL, "/usr: %s", strerror(errno));
        return;
    }
    if (has_overlay_special(real)) {
        result_set(r, DOCTOR_FAIL,
                   "/usr resolves to %s, which contains ',', ':' or '\\': "
                   "overlay cannot take it as a lower layer; fix: mount /usr at a plain path",
                   real);
        return;
    }
    mode_t mode = 0;
    int found = find_untraversable(real, bad, sizeof bad, &mode);
    struct stat st;
    if (found != 0 || stat(real, &st) < 0 || !(st.st_mode & S_IROTH)) {
        result_set(r, DOCTOR_FAIL,
                   "%s is not readable and searchable by others (mode %04o): "
                   "sandboxes see the host's /usr as unprivileged uids; fix: chmod o+rx %s",
                   found > 0 ? bad : real, (unsigned)(found > 0 ? mode : st.st_mode & 07777),
                   found > 0 ? bad : real);
        return;
    }
    result_set(r, DOCTOR_OK,
               "/usr%s%s: no ',' ':' '\\' in the path, readable and searchable by "
               "others",
               strcmp(real, "/usr") ? " -> " : "", strcmp(real, "/usr") ? real : "");
}

/* ---------- root ---------- */

void check_root(struct doctor_result *r)
{
    if (geteuid() != 0) {
        result_set(r, DOCTOR_FAIL,
                   "running as uid %u: hutch run needs root (it creates cgroups, "
                   "user namespaces mapped to host uid ranges and overlay mounts); run it as "
                   "root, e.g. sudo hutch ...",
                   (unsigned)geteuid());
        return;
    }
    /* Root in a container may lack the capabilities, or sit in a user namespace of its own. */
    char status[4096] = "", map[256] = "";
    file_read_at(AT_FDCWD, "/proc/self/status", status, sizeof status, NULL);
    const char *cap = strstr(status, "CapEff:");
    unsigned long long eff = cap ? strtoull(cap + 7, NULL, 16) : 0;
    static const struct {
        int bit;
        const char *name;
    } needed[] = {{21, "CAP_SYS_ADMIN"}, {6, "CAP_SETGID"}, {7, "CAP_SETUID"}};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
        if (!(eff >> needed[i].bit & 1)) {
            result_set(r, DOCTOR_FAIL,
                       "euid 0 but without %s (CapEff %llx): hutch needs a "
                       "fully privileged root, not one inside a restricted container",
                       needed[i].name, eff);
            return;
        }
    }
    file_read_at(AT_FDCWD, "/proc/self/uid_map", map, sizeof map, NULL);
    unsigned inside = 1, outside = 1, count = 0;
    sscanf(map, "%u %u %u", &inside, &outside, &count);
    bool initial = inside == 0 && outside == 0 && count == 4294967295u;
    result_set(r, DOCTOR_OK, "euid 0 with CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID%s",
               initial ? ", in the initial user namespace"
                       : "; not in the initial user namespace, so host uid ranges may be short");
}
