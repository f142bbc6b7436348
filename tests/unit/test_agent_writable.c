/* Agent sandboxes with a writable root (jail_spec.writable_root): what root commands may change
 * (with the namespaced capabilities a writable root keeps) and the user may not, what another
 * sandbox sees of it, that one layer serves one sandbox at a time, and that the changes outlive
 * the sandbox. The control first: without a writable root, root can change none of it. Says SKIP,
 * with the reason, where the host cannot give a sandbox a writable root. Runs as root; every wait
 * is bounded. */
#include <signal.h>

#include "agent_test.h"
#include "jail/disk_layer.h"

static int start_writable(struct jail *jl, const struct jail_spec *base_spec, const char *name,
                          const char *layer_dir, const struct uid_range *u, const char *what,
                          err_t *err)
{
    char sock[96];
    snprintf(sock, sizeof sock, "%s.sock", name);
    struct jail_spec spec = *base_spec;
    spec.name = name;
    spec.writable_root = true;
    spec.layer_dir = layer_dir;
    spec.host_uid_base = u->host_base;
    spec.hold_fd = u->lock_fd;
    spec.listen_fd = make_listener(sock);
    if (spec.listen_fd < 0)
        return err_set(err, errno, "listen on %s", sock);
    int rc = jail_start(&spec, jl, err);
    close(spec.listen_fd);
    if (what)
        ok(rc == 0, "%s (%s)", what, rc ? err->msg : "ok");
    return rc;
}

/* Destroys jl and forgets its commands' ends (a sandbox made again in jl numbers from 1). */
static bool destroyed(struct jail *jl, const char *what)
{
    err_t err = {0};
    int rc = jail_destroy(jl, &err);
    jail_reap(jl);
    size_t kept = 0;
    for (size_t i = 0; i < n_exits; i++)
        if (exits[i].from != jl)
            exits[kept++] = exits[i];
    n_exits = kept;
    if (rc < 0)
        printf("# destroy %s: %s\n", what, err.msg);
    return rc == 0;
}

/* Persistent agent sandboxes: sandbox root changes /usr and /etc through the namespaced
 * capabilities a writable root keeps, the user does not; a second sandbox sees none of it and
 * cannot take the same layer; the changes outlive the sandbox, also under another uid range. */
static void writable_root_checks(void)
{
    char sandboxes[PATH_MAX], layer_a[PATH_MAX], layer_b[PATH_MAX];
    tap_path(sandboxes, sizeof sandboxes, "%s/sandboxes", state_dir);
    tap_path(layer_a, sizeof layer_a, "%s/wr-a", sandboxes);
    tap_path(layer_b, sizeof layer_b, "%s/wr-b", sandboxes);
    err_t err = {0};
    struct uid_range uids2 = {.lock_fd = -1};
    /* A host that cannot give any sandbox a writable root is said to be one, not failed. (A
     * /usr that cannot be idmapped, as the test guest's over 9p, still gives one: idmap.h.) */
    if (access("/dev/loop-control", F_OK) < 0) {
        ok(1, "writable root # SKIP no loop devices here (/dev/loop-control: %s)", strerror(errno));
        return;
    }
    mkdir(sandboxes, 0700);
    if (disk_layer_create(layer_a, 64ull << 20, &err) < 0 ||
        disk_layer_create(layer_b, 64ull << 20, &err) < 0 ||
        uid_range_acquire(lock_path, &uids2, &err) < 0) {
        ok(0, "writable root: setup: %s", err.msg);
        return;
    }
    char caps[64];
    snprintf(caps, sizeof caps, "CapEff:\t%016llx\n", (unsigned long long)JAIL_WRITABLE_ROOT_CAPS);

    struct jail a, b;
    int rc = start_writable(&a, &agent_spec, "agent-wr", layer_a, &uids, NULL, &err);
    ok(rc == 0, "an agent sandbox starts with a writable root (%s)", rc ? err.msg : "ok");
    if (rc < 0)
        goto out;
    check_sh(&a, true,
             "echo v1 >/usr/hutch-wr && echo e1 >/etc/hutch-wr && chown 1000:1000 /etc/hutch-wr && "
             "mkdir -p /usr/local/lib/hutch-wr && grep ^CapEff /proc/self/status",
             caps,
             "a root command writes under /usr and /etc and chowns there, with CHOWN, "
             "DAC_OVERRIDE, FOWNER and FSETID of its namespace");
    check_sh(&a, false,
             "echo h >/home/user/h && ! (echo u >/usr/hutch-wr-user) 2>/dev/null && "
             "grep ^CapEff /proc/self/status",
             "CapEff:\t0000000000000000\n",
             "a user command writes its home but not /usr, and has no capability");
    struct stat st;
    char tpl_file[PATH_MAX + 16];
    snprintf(tpl_file, sizeof tpl_file, "%s/etc/hutch-wr", tpl.rootfs);
    ok(stat("/usr/hutch-wr", &st) < 0 && errno == ENOENT && stat(tpl_file, &st) < 0 &&
           errno == ENOENT,
       "the host's /usr and the template are unchanged");

    rc = start_writable(&b, &agent_spec, "agent-wr2", layer_a, &uids2, NULL, &err);
    ok(rc < 0 && err.errnum == EBUSY, "a second sandbox cannot take a layer in use (%s)",
       rc ? err.msg : "it could");
    if (rc == 0)
        destroyed(&b, "agent-wr2");
    if (start_writable(&b, &agent_spec, "agent-wr2", layer_b, &uids2,
                       "a second sandbox starts on a layer of its own", &err) == 0) {
        check_sh(&b, true,
                 "test ! -e /usr/hutch-wr && test ! -e /etc/hutch-wr && "
                 "test ! -e /usr/local/lib/hutch-wr && echo v2 >/usr/hutch-wr && cat /usr/hutch-wr",
                 "v2\n", "it sees nothing of the first one's changes, and makes its own");
        check_sh(&a, false, "cat /usr/hutch-wr", "v1\n", "which the first one does not see");
        ok(destroyed(&b, "agent-wr2"), "destroy the second");
    }
    ok(destroyed(&a, "agent-wr"), "destroy the first");
    struct disk_layer_usage u;
    rc = disk_layer_usage(layer_a, &u, &err);
    ok(rc == 0, "its layer is free again (%s)", rc ? err.msg : "ok");

    /* Made again on the same layer, under the other uid range: the layer's ids are the
     * sandbox's own, whatever host range it runs under. */
    if (start_writable(&a, &agent_spec, "agent-wr", layer_a, &uids2,
                       "the sandbox is made again on its layer", &err) == 0) {
        check_sh(&a, false,
                 "cat /usr/hutch-wr /etc/hutch-wr /home/user/h && stat -c %u:%g /etc/hutch-wr && "
                 "test -d /usr/local/lib/hutch-wr",
                 "v1\ne1\nh\n1000:1000\n", "what it changed is still there, with its owners");
        ok(destroyed(&a, "agent-wr"), "destroy it again");
    }
out:
    uid_range_release(&uids2);
    rc = disk_layer_remove(layer_a, &err) < 0 || disk_layer_remove(layer_b, &err) < 0 ? -1 : 0;
    ok(rc == 0, "the layers are removed, no sandbox holds them (%s)", rc ? err.msg : "ok");
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    err_t err = {0};
    const struct jail_limits limits = {
        .memory_bytes = 96u << 20, .pids = 256, .disk_bytes = 64u << 20};
    int rc = agent_start("/tmp/hutch-agent-wr.XXXXXX", "agent-ctl", &limits, env, &err);
    ok(rc == 0, "an agent sandbox without a writable root starts (%s)", rc ? err.msg : "ok");
    if (rc < 0)
        return done_testing();
    check_sh(&j, true, "grep ^CapEff /proc/self/status; ! (echo x >/usr/hutch-wr) 2>/dev/null",
             "CapEff:\t0000000000000000\n",
             "without a writable root a root command cannot write /usr, and has no capability");
    ok(destroyed(&j, "agent-ctl"), "destroy it");
    jail_record_remove(run_fd, "agent-ctl", &err);

    writable_root_checks();
    agent_cleanup("agent-ctl");
    return done_testing();
}
