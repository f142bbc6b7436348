/* An agent sandbox (created with no command) driven through the engine's API, as a daemon would:
 * commands with pipes, stdin and a pty, their verdicts and accounting from their own cgroups, a
 * kill that takes a daemonized tree, an OOM that is one command's and not the sandbox's, the
 * protocol's requests, and a second process that reopens the sandbox it did not create. Runs as
 * root; every wait is bounded. */
#include <signal.h>
#include <sys/wait.h>

#include "agent_test.h"

/* The second process: reopens by name, lists, runs a command, freezes and thaws. */
static int second_process(struct cgroup_host *first)
{
    /* A cgroup host of its own, in the mode the sandbox was made in (the first may be forced). */
    struct cgroup_host *own;
    err_t err;
    if (cgroup_host_open((int)cgroup_host_mode(first), &own, &err) < 0)
        return 10;
    struct jail other;
    struct jail_record rec;
    if (jail_reopen(own, run_fd, "agent-t", &other, &rec, &err) < 0) {
        printf("# reopen: %s\n", err.msg);
        return 11;
    }
    uint32_t id = 9000;
    if (jail_agent_request(&other, PROTO_LIST, id, 0, 0, false, &err) < 0 ||
        wait_reply(&other, id, 5000) < 0 || msg.type != PROTO_LIST_REPLY)
        return 12;
    bool saw_tag = false;
    for (size_t i = 0; i < msg.n_entries; i++)
        saw_tag = saw_tag || strcmp(msg.entries[i].tag, "first") == 0;
    if (!saw_tag)
        return 13;
    static const char *const argv[] = {"/bin/echo", "from-second", NULL};
    struct jail_command_spec spec = {.argv = argv, .envp = env};
    struct started s;
    char why[256];
    next_request = 9100;
    if (start(&other, &spec, &s, why, sizeof why) < 0) {
        printf("# second start: %s\n", why);
        return 14;
    }
    char out[256];
    read_all(s.out, out, sizeof out, 5000);
    const struct exit_seen *e = wait_exit(&other, s.cmd_id, 5000);
    if (strcmp(out, "from-second\n") != 0 || !e || finish(&other, &s, e, NULL) != VERDICT_OK)
        return 15;
    if (jail_set_frozen(&other, true, &err) < 0 || jail_set_frozen(&other, false, &err) < 0)
        return 16;
    jail_close(&other);
    cgroup_host_close(own);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    err_t err = {0};
    const struct jail_limits limits = {
        .memory_bytes = 96u << 20, .pids = 256, .disk_bytes = 64u << 20};
    int rc = agent_start("/tmp/hutch-agent-test.XXXXXX", "agent-t", &limits, env, &err);
    ok(rc == 0, "an agent sandbox starts with no command (%s)", rc ? err.msg : "ok");
    if (rc < 0)
        return done_testing();
    ok(j.init_cgroup != NULL, "its init has a group of its own below the sandbox's");

    uint32_t id = next_request++;
    ok(jail_agent_request(&j, PROTO_HELLO, id, 0, 0, false, &err) == 0 &&
           wait_reply(&j, id, 5000) == 0 && msg.type == PROTO_HELLO_REPLY,
       "HELLO is answered");

    /* pipes, exit status, verdict */
    static const char *const argv1[] = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    struct jail_command_spec c1 = {.argv = argv1, .envp = env, .tag = "first"};
    struct started s;
    char why[512], out[4096];
    ok(start(&j, &c1, &s, why, sizeof why) == 0, "a command starts (%s)", why);
    read_all(s.out, out, sizeof out, 5000);
    is_str(out, "out\n", "its stdout comes through the fd init handed over");
    read_all(s.err, out, sizeof out, 5000);
    is_str(out, "err\n", "and its stderr");
    const struct exit_seen *e = wait_exit(&j, s.cmd_id, 5000);
    ok(e && e->code == 3 && e->sig == 0, "EXITED says exit 3");
    is_str(verdict_code(e ? finish(&j, &s, e, NULL) : VERDICT_XX), "RE", "verdict RE");

    /* user and root */
    static const char *const argv_id[] = {"/usr/bin/id", "-u", NULL};
    struct jail_command_spec c2 = {.argv = argv_id, .envp = env};
    for (int root = 0; root <= 1; root++) {
        c2.as_root = root;
        if (start(&j, &c2, &s, why, sizeof why) < 0) {
            ok(0, "id -u: %s", why);
            continue;
        }
        read_all(s.out, out, sizeof out, 5000);
        is_str(out, root ? "0\n" : "1000\n", "a command runs as %s", root ? "root" : "user");
        e = wait_exit(&j, s.cmd_id, 5000);
        if (e)
            finish(&j, &s, e, NULL);
    }

    /* stdin through the fd, and through STDIN_WRITE */
    static const char *const argv_cat[] = {"/bin/cat", NULL};
    struct jail_command_spec c3 = {.argv = argv_cat, .envp = env, .stdin_pipe = true};
    if (start(&j, &c3, &s, why, sizeof why) == 0) {
        ok(s.in >= 0, "a command with stdin gets its write end");
        uint32_t wid = next_request++;
        ok(jail_agent_stdin_write(&j, wid, s.cmd_id, "via-init ", 9, &err) == 0 &&
               wait_reply(&j, wid, 5000) == 0 && msg.type == PROTO_OK && msg.written == 9,
           "STDIN_WRITE writes 9 bytes");
        (void)!write(s.in, "via-fd", 6);
        close(s.in);
        s.in = -1;
        wid = next_request++;
        ok(jail_agent_request(&j, PROTO_STDIN_CLOSE, wid, s.cmd_id, 0, false, &err) == 0 &&
               wait_reply(&j, wid, 5000) == 0 && msg.type == PROTO_OK,
           "STDIN_CLOSE closes init's copy");
        read_all(s.out, out, sizeof out, 5000);
        is_str(out, "via-init via-fd", "cat got both, then EOF");
        e = wait_exit(&j, s.cmd_id, 5000);
        ok(e && e->code == 0, "and exited 0");
        if (e)
            finish(&j, &s, e, NULL);
    } else {
        ok(0, "cat: %s", why);
    }

    /* a pty with its size, and a resize */
    static const char *const argv_tty[] = {"/bin/sh", "-c", "tty; stty size; read x; stty size",
                                           NULL};
    struct jail_command_spec c4 = {.argv = argv_tty, .envp = env, .pty = true, .rows = 30,
                                   .cols = 100};
    if (start(&j, &c4, &s, why, sizeof why) == 0) {
        ok(s.pty >= 0 && s.out < 0, "a pty command gets the master only");
        /* Resized once the first size is out, not after a fixed sleep: a slow sandbox (the
         * test guest, under TCG) would print the new size twice. */
        size_t n = read_until(s.pty, out, sizeof out, "30 100", 10000);
        uint32_t rid = next_request++;
        ok(jail_agent_resize(&j, rid, s.cmd_id, 40, 120, &err) == 0 &&
               wait_reply(&j, rid, 5000) == 0 && msg.type == PROTO_OK,
           "RESIZE is answered");
        (void)!write(s.pty, "\n", 1);
        read_all(s.pty, out + n, sizeof out - n, 3000);
        ok(strstr(out, "/dev/pts/") && strstr(out, "30 100") && strstr(out, "40 120"),
           "the command sees a pts of its own, 30x100, then 40x120");
        e = wait_exit(&j, s.cmd_id, 5000);
        if (e)
            finish(&j, &s, e, NULL);
    } else {
        ok(0, "pty: %s", why);
    }

    /* kill takes a tree that double-forked and left its session */
    static const char *const argv_tree[] = {
        "/bin/sh", "-c", "setsid sh -c 'sleep 1000 & sleep 1000' & sleep 1000 & wait", NULL};
    struct jail_command_spec c5 = {.argv = argv_tree, .envp = env};
    if (start(&j, &c5, &s, why, sizeof why) == 0) {
        usleep(300000);
        struct cgroup *cg;
        bool populated = false;
        if (jail_command_group_open(&j, s.group, &cg, &err) == 0) {
            struct cgroup_stats st;
            cgroup_read_stats(cg, &st, &err);
            printf("# the tree's group holds %llu processes\n", (unsigned long long)st.pids_current);
            ok(jail_command_kill_tree(&j, s.group, &err) == 0, "kill the command's tree");
            e = wait_exit(&j, s.cmd_id, 5000);
            ok(e && e->sig == SIGKILL, "EXITED says SIGKILL");
            for (int i = 0; i < 100; i++) {
                cgroup_populated(cg, &populated, &err);
                if (!populated)
                    break;
                usleep(10000);
            }
            ok(!populated, "nothing of the tree is left, the setsid'd daemons included");
            cgroup_free(cg);
        }
        if (e)
            is_str(verdict_code(finish(&j, &s, e, NULL)), "SG", "verdict SG");
    } else {
        ok(0, "tree: %s", why);
    }

    /* an OOM is the command's: the sandbox goes on */
    static const char *const argv_oom[] = {"/bin/sh", "-c", "head -c 400M /dev/zero | tail -c 300M >/dev/null",
                                           NULL};
    struct jail_command_spec c6 = {.argv = argv_oom, .envp = env};
    if (start(&j, &c6, &s, why, sizeof why) == 0) {
        e = wait_exit(&j, s.cmd_id, 20000);
        struct verdict_usage u = {0};
        enum verdict v = e ? finish(&j, &s, e, &u) : VERDICT_XX;
        is_str(verdict_code(v), "ML", "a command past the sandbox's memory is ML (oom_kills %llu)",
               (unsigned long long)u.oom_kills);
        ok(u.memory_peak_bytes > 0, "its peak memory is counted (%llu bytes)",
           (unsigned long long)u.memory_peak_bytes);
        static const char *const argv_echo[] = {"/bin/echo", "alive", NULL};
        struct jail_command_spec c7 = {.argv = argv_echo, .envp = env};
        if (start(&j, &c7, &s, why, sizeof why) == 0) {
            read_all(s.out, out, sizeof out, 5000);
            is_str(out, "alive\n", "the sandbox goes on after a command's OOM");
            e = wait_exit(&j, s.cmd_id, 5000);
            if (e)
                finish(&j, &s, e, NULL);
        } else {
            ok(0, "after the OOM: %s", why);
        }
    } else {
        ok(0, "oom: %s", why);
    }

    /* bad requests get errors, and init goes on */
    static const char *const argv_none[] = {"/nonexistent", NULL};
    struct jail_command_spec c8 = {.argv = argv_none, .envp = env};
    ok(start(&j, &c8, &s, why, sizeof why) < 0 && strstr(why, "/nonexistent"),
       "a command that cannot be executed is an ERROR that names it (%s)", why);
    id = next_request++;
    ok(jail_agent_request(&j, PROTO_SIGNAL, id, 777777, 9, false, &err) == 0 &&
           wait_reply(&j, id, 5000) == 0 && msg.type == PROTO_ERROR && msg.errnum == ESRCH,
       "SIGNAL to an unknown command: ESRCH");
    uint8_t junk[64] = {1, 2, 3};
    ok(proto_send(j.control_fd, junk, sizeof junk, NULL, 0) == 0 &&
           next_msg(&j, 5000) == 1 && msg.type == PROTO_ERROR,
       "a malformed message gets an ERROR");

    /* LIST and FORGET */
    id = next_request++;
    ok(jail_agent_request(&j, PROTO_LIST, id, 0, 0, false, &err) == 0 &&
           wait_reply(&j, id, 5000) == 0 && msg.type == PROTO_LIST_REPLY && msg.n_entries >= 5,
       "LIST shows the ended commands (%zu)", msg.n_entries);
    uint32_t first = 0;
    for (size_t i = 0; i < msg.n_entries; i++)
        if (strcmp(msg.entries[i].tag, "first") == 0)
            first = msg.entries[i].cmd_id;
    ok(first != 0, "with their tags");

    /* a process that did not create it */
    ok(jail_record_save(&j, uids.host_base, run_fd, "agent-t.sock", &err) == 0,
       "record the sandbox (%s)", err.msg);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0)
        _exit(second_process(host));
    int status = 0;
    waitpid(child, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "a second process reopens it by name: lists, runs a command, freezes and thaws (%d)",
       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    id = next_request++;
    ok(jail_agent_request(&j, PROTO_FORGET, id, first, 0, false, &err) == 0 &&
           wait_reply(&j, id, 5000) == 0 && msg.type == PROTO_OK,
       "FORGET an ended command");

    /* destroy */
    char cg_path[PATH_MAX] = "";
    bool have_path = cgroup_file_path(j.cgroup, "memory", "", cg_path, sizeof cg_path, NULL) == 0 ||
                     cgroup_file_path(j.cgroup, "", "", cg_path, sizeof cg_path, NULL) == 0;
    ok(have_path, "the sandbox's cgroup directory is known (%s)", cg_path);
    ok(jail_destroy(&j, &err) == 0, "destroy (%s)", err.msg);
    jail_reap(&j);
    struct stat st;
    ok(have_path && stat(cg_path, &st) < 0 && errno == ENOENT, "its cgroups are gone");
    agent_cleanup("agent-t");
    return done_testing();
}
