/* escape: tries, for real, the things a sandboxed program would do to get out, and says what
 * happened. Used by tests/integration/escape*.sh, from inside sandboxes and (as positive
 * controls, with harmless operations only) on the host.
 *
 *   escape OP[:ARG[:ARG]]...
 *
 * Prints one line per operation: "OP ok[ DETAIL]" when the attempt worked, "OP errno=ENAME
 * [DETAIL]" when it did not. Unlike try-syscall, the arguments are real ones: a call that is let
 * through does what it says (creates a namespace, mounts a tmpfs, attaches with ptrace), so an
 * "ok" is proof of the escape, not a guess from an errno. Exit status 0, 2 for a bad operation.
 *
 * Operations:
 *   unshare_user unshare_mnt unshare_net unshare_pid unshare_uts unshare_all clone_newuser
 *   setns:NSFILE           open NSFILE and setns() into it
 *   mount_tmpfs:DIR  remount_rw:PATH  umount:PATH  pivot_root:DIR  chroot_escape:DIR
 *   keyctl_join  add_key  bpf_map  bpf_prog  perf_sw  userfaultfd
 *   int80_getpid  int80_unshare  x32_unshare   the same calls through the i386 and x32 ABIs,
 *                          in a child: "OP killed=SIGNAME" if the child died of a signal
 *   ptrace_attach:PID  ptrace_seize:PID  ptrace_child  ptrace_traceme
 *   proc_mem:PID  process_vm_readv:PID  kill:PID:SIG
 *   socket_packet socket_vsock socket_netlink socket_raw socket_raw_icmp socket_raw6
 *   tcp_connect:PORT  unix_connect:PATH  abstract_connect:NAME   (127.0.0.1 only; reads a line)
 *   tcp_self:PORT  abstract_self:NAME     listen, connect to it, read the greeting back
 *   sethostname:NAME  setdomainname:NAME
 *   shmat:ID  msgctl:ID    attach a SysV shared memory segment / stat a message queue by id
 *   isatty:FD  tiocsti:FD:TEXT  tiocsti_high:FD:TEXT  tiocsti_tty:TEXT  (TEXT plus a newline)
 *   setfcap:PATH           give PATH every file capability (security.capability xattr)
 *   truncate:PATH  open_trunc:PATH   truncate(2) PATH to 0 bytes / open it O_RDONLY|O_TRUNC
 *   fds                    every open fd above 2, and what is reachable through it
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <linux/if_ether.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <unistd.h>

static char op_text[512];

static void say_ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say_ok(const char *fmt, ...)
{
    printf("%s ok", op_text);
    if (fmt && fmt[0]) {
        va_list ap;
        va_start(ap, fmt);
        putchar(' ');
        vprintf(fmt, ap);
        va_end(ap);
    }
    putchar('\n');
}

static void say_errno(int e, const char *where)
{
    const char *name = strerrorname_np(e);
    if (name)
        printf("%s errno=%s", op_text, name);
    else
        printf("%s errno=%d", op_text, e);
    if (where)
        printf(" at=%s", where);
    putchar('\n');
}

/* ok or errno, from a syscall-style return value */
static void report(long rc, const char *where)
{
    if (rc < 0)
        say_errno(errno, where);
    else
        say_ok(NULL);
}

/* ---- namespaces, mounts, roots ------------------------------------------------------------ */

static void do_unshare(int flags)
{
    report(unshare(flags), NULL);
}

static void do_clone_newuser(void)
{
    long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        waitpid((pid_t)pid, NULL, 0);
    report(pid, NULL);
}

static void do_setns(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        say_errno(errno, "open");
        return;
    }
    long rc = setns(fd, 0);
    int e = errno;
    close(fd);
    errno = e;
    report(rc, "setns");
}

static void do_mount_tmpfs(const char *dir)
{
    mkdir(dir, 0755);
    if (mount("none", dir, "tmpfs", 0, "size=1m") < 0) {
        say_errno(errno, NULL);
        return;
    }
    say_ok("mounted %s", dir);
    umount2(dir, MNT_DETACH);
}

static void do_remount_rw(const char *path)
{
    report(mount(NULL, path, NULL, MS_REMOUNT | MS_BIND, NULL), NULL);
}

static void do_umount(const char *path)
{
    report(umount2(path, MNT_DETACH), NULL);
}

static void do_pivot_root(const char *dir)
{
    mkdir(dir, 0755);
    report(syscall(SYS_pivot_root, dir, dir), NULL);
}

/* The classic: chroot into a subdirectory while keeping the cwd outside it, climb, chroot(".").
 * Only ever run inside a sandbox (or unprivileged): it does not undo itself. */
static void do_chroot_escape(const char *dir)
{
    mkdir(dir, 0755);
    if (chdir("/") < 0 || chroot(dir) < 0) {
        say_errno(errno, "chroot");
        return;
    }
    for (int i = 0; i < 64; i++)
        if (chdir("..") < 0)
            break;
    if (chroot(".") < 0) {
        say_errno(errno, "chroot-dot");
        return;
    }
    say_ok("climbed out of %s", dir);
}

/* ---- keyrings, bpf, perf ------------------------------------------------------------------ */

static void do_keyctl_join(void)
{
    report(syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "hutch-escape"), NULL);
}

static void do_add_key(void)
{
    report(syscall(SYS_add_key, "user", "hutch-escape", "x", 1, KEY_SPEC_PROCESS_KEYRING), NULL);
}

static void do_bpf_map(void)
{
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr);
    report(fd, NULL);
    if (fd >= 0)
        close((int)fd);
}

static void do_bpf_prog(void)
{
    struct bpf_insn insns[2];
    memset(insns, 0, sizeof insns);
    insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K; /* r0 = 0 */
    insns[0].dst_reg = BPF_REG_0;
    insns[1].code = BPF_JMP | BPF_EXIT;
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
    attr.insn_cnt = 2;
    attr.insns = (uint64_t)(uintptr_t)insns;
    attr.license = (uint64_t)(uintptr_t) "GPL";
    long fd = syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr);
    report(fd, NULL);
    if (fd >= 0)
        close((int)fd);
}

static void do_perf_sw(void)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.size = sizeof attr;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.disabled = 1;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    report(fd, NULL);
    if (fd >= 0)
        close((int)fd);
}

static void do_userfaultfd(void)
{
    long fd = syscall(SYS_userfaultfd, O_CLOEXEC);
    report(fd, NULL);
    if (fd >= 0)
        close((int)fd);
}

/* ---- other syscall ABIs ------------------------------------------------------------------- */

#define I386_NR_GETPID  20
#define I386_NR_UNSHARE 310
#define X32_SYSCALL_BIT 0x40000000L
#define X32_NR_UNSHARE  272

/* Runs one system call in a child, through int $0x80 (the i386 ABI) or with the x32 bit set, so
 * that a filter killing the caller shows as the child's death. */
static void foreign_abi(int x32, long nr, long arg1)
{
    int p[2];
    if (pipe(p) < 0) {
        say_errno(errno, "pipe");
        return;
    }
    pid_t child = fork();
    if (child < 0) {
        say_errno(errno, "fork");
        return;
    }
    if (child == 0) {
        long ret;
        if (x32) {
            ret = syscall(X32_SYSCALL_BIT | nr, arg1);
            if (ret < 0)
                ret = -errno;
        } else {
            __asm__ volatile("int $0x80"
                             : "=a"(ret)
                             : "a"(nr), "b"(arg1), "c"(0), "d"(0)
                             : "memory");
        }
        if (write(p[1], &ret, sizeof ret) != sizeof ret)
            _exit(1);
        _exit(0);
    }
    close(p[1]);
    long ret = 0;
    ssize_t n = read(p[0], &ret, sizeof ret);
    close(p[0]);
    int st = 0;
    waitpid(child, &st, 0);
    if (WIFSIGNALED(st)) {
        const char *sig = sigabbrev_np(WTERMSIG(st));
        printf("%s killed=SIG%s\n", op_text, sig ? sig : "?");
    } else if (n != sizeof ret) {
        say_errno(EIO, "child");
    } else if (ret < 0 && ret > -4096) {
        say_errno((int)-ret, NULL);
    } else {
        say_ok("returned %ld", ret);
    }
}

/* ---- other processes ---------------------------------------------------------------------- */

/* After a successful attach: wait for the stop, read a word of the tracee, let it go. */
static void attached(pid_t pid, int seized)
{
    if (!seized)
        waitpid(pid, NULL, __WALL);
    errno = 0;
    long word = ptrace(PTRACE_PEEKUSER, pid, 0, NULL);
    int e = errno;
    ptrace(PTRACE_DETACH, pid, NULL, NULL);
    say_ok("attached to %d, peekuser %s", (int)pid, e ? "failed" : "read a word");
    (void)word;
}

static void do_ptrace_attach(pid_t pid, int seize)
{
    long rc = ptrace(seize ? PTRACE_SEIZE : PTRACE_ATTACH, pid, NULL, NULL);
    if (rc < 0)
        say_errno(errno, NULL);
    else
        attached(pid, seize);
}

static void do_ptrace_child(void)
{
    pid_t child = fork();
    if (child < 0) {
        say_errno(errno, "fork");
        return;
    }
    if (child == 0) {
        for (;;)
            pause();
    }
    do_ptrace_attach(child, 0);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
}

/* The child asks to be traced by us; we then try to use that. */
static void do_ptrace_traceme(void)
{
    int p[2];
    if (pipe(p) < 0) {
        say_errno(errno, "pipe");
        return;
    }
    pid_t child = fork();
    if (child < 0) {
        say_errno(errno, "fork");
        return;
    }
    if (child == 0) {
        close(p[0]);
        int e = ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0 ? errno : 0;
        if (write(p[1], &e, sizeof e) != sizeof e)
            _exit(1);
        if (e == 0)
            raise(SIGSTOP);
        _exit(0);
    }
    close(p[1]);
    int e = -1;
    if (read(p[0], &e, sizeof e) != sizeof e)
        e = EIO;
    close(p[0]);
    if (e != 0) {
        say_errno(e, "traceme");
    } else {
        int st;
        waitpid(child, &st, 0);
        errno = 0;
        ptrace(PTRACE_PEEKUSER, child, 0, NULL);
        if (errno)
            say_errno(errno, "peekuser");
        else
            say_ok("traced child %d", (int)child);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
}

static void do_proc_mem(const char *pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/mem", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        say_errno(errno, "open");
        return;
    }
    close(fd);
    say_ok("opened %s", path);
}

static int probe_global = 42;

static void do_process_vm_readv(pid_t pid)
{
    int out = 0;
    struct iovec local = {.iov_base = &out, .iov_len = sizeof out};
    /* The target is another program: the address may well be unmapped there (EFAULT), but that
     * answer already means the access check let us through. */
    struct iovec remote = {.iov_base = &probe_global, .iov_len = sizeof probe_global};
    report(syscall(SYS_process_vm_readv, pid, &local, 1UL, &remote, 1UL, 0UL), NULL);
}

static void do_kill(pid_t pid, int sig)
{
    report(kill(pid, sig), NULL);
}

/* ---- sockets ------------------------------------------------------------------------------ */

static void do_socket(int family, int type, int protocol)
{
    int fd = socket(family, type | SOCK_CLOEXEC, protocol);
    report(fd, NULL);
    if (fd >= 0)
        close(fd);
}

/* After connect: read one line (at most 2 s) and show it. */
static void read_reply(int fd)
{
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n < 0)
        n = 0;
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    say_ok("read=%s", buf);
}

static void loopback(struct sockaddr_in *sa, int port)
{
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

/* abstract: name gets a leading NUL; the length covers exactly the name. */
static socklen_t unix_addr(struct sockaddr_un *sa, const char *name, int abstract)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    size_t len = strlen(name);
    if (len > sizeof sa->sun_path - 2)
        len = sizeof sa->sun_path - 2;
    memcpy(sa->sun_path + (abstract ? 1 : 0), name, len);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (abstract ? 1 : 0));
}

static void connect_and_read(int family, const struct sockaddr *sa, socklen_t len)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        say_errno(errno, "socket");
        return;
    }
    if (connect(fd, sa, len) < 0)
        say_errno(errno, "connect");
    else
        read_reply(fd);
    close(fd);
}

static void do_tcp_connect(int port)
{
    struct sockaddr_in sa;
    loopback(&sa, port);
    connect_and_read(AF_INET, (struct sockaddr *)&sa, sizeof sa);
}

static void do_unix_connect(const char *name, int abstract)
{
    struct sockaddr_un sa;
    socklen_t len = unix_addr(&sa, name, abstract);
    connect_and_read(AF_UNIX, (struct sockaddr *)&sa, len);
}

/* Listens, connects to itself, sends a greeting from the accepted side, reads it back. */
static void self_serve(int family, const struct sockaddr *sa, socklen_t len)
{
    int lfd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) {
        say_errno(errno, "socket");
        return;
    }
    int one = 1;
    if (family == AF_INET)
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, sa, len) < 0 || listen(lfd, 1) < 0) {
        say_errno(errno, "listen");
        close(lfd);
        return;
    }
    int cfd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (cfd < 0 || connect(cfd, sa, len) < 0) {
        say_errno(errno, "connect");
    } else {
        int afd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (afd < 0) {
            say_errno(errno, "accept");
        } else {
            static const char hello[] = "INSIDE\n";
            if (write(afd, hello, sizeof hello - 1) < 0)
                say_errno(errno, "write");
            else
                read_reply(cfd);
            close(afd);
        }
    }
    if (cfd >= 0)
        close(cfd);
    close(lfd);
}

static void do_tcp_self(int port)
{
    struct sockaddr_in sa;
    loopback(&sa, port);
    self_serve(AF_INET, (struct sockaddr *)&sa, sizeof sa);
}

static void do_abstract_self(const char *name)
{
    struct sockaddr_un sa;
    socklen_t len = unix_addr(&sa, name, 1);
    self_serve(AF_UNIX, (struct sockaddr *)&sa, len);
}

/* ---- SysV IPC ----------------------------------------------------------------------------- */

static void do_shmat(int id)
{
    void *p = shmat(id, NULL, SHM_RDONLY);
    if (p == (void *)-1) {
        say_errno(errno, NULL);
        return;
    }
    shmdt(p);
    say_ok("attached segment %d", id);
}

static void do_msgctl(int id)
{
    struct msqid_ds ds;
    report(msgctl(id, IPC_STAT, &ds), NULL);
}

/* ---- terminals ---------------------------------------------------------------------------- */

static void do_isatty(int fd)
{
    if (isatty(fd))
        say_ok("fd %d is a terminal", fd);
    else
        say_errno(errno, NULL);
}

/* Pushes TEXT and a newline into the input queue of the terminal on fd, one byte at a time. */
static void tiocsti_text(int fd, const char *text, int high_bits)
{
    unsigned long cmd = TIOCSTI;
    if (high_bits)
        cmd |= 1UL << 32; /* the kernel truncates the command to 32 bits (CVE-2019-10063) */
    size_t len = strlen(text);
    for (size_t i = 0; i <= len; i++) {
        char c = i < len ? text[i] : '\n';
        if (syscall(SYS_ioctl, fd, cmd, &c) < 0) {
            say_errno(errno, NULL);
            return;
        }
    }
    say_ok("pushed %zu bytes", len + 1);
}

static void do_tiocsti_tty(const char *text)
{
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        say_errno(errno, "open");
        return;
    }
    tiocsti_text(fd, text, 0);
    close(fd);
}

/* ---- files and fds ------------------------------------------------------------------------ */

static void do_setfcap(const char *path)
{
    struct vfs_cap_data cap;
    memset(&cap, 0, sizeof cap);
    cap.magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE;
    cap.data[0].permitted = 0xffffffffu;
    cap.data[1].permitted = 0xffffffffu;
    report(setxattr(path, "security.capability", &cap, sizeof cap, 0), NULL);
}

/* Lists up to 8 names of the directory open as dirfd (through a new fd, so dirfd stays). */
static void list_dir(int dirfd, const char *rel, char *out, size_t size)
{
    int fd = openat(dirfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(out, size, "%s:errno=%s", rel, strerrorname_np(errno));
        return;
    }
    DIR *d = fdopendir(fd);
    size_t used = (size_t)snprintf(out, size, "%s:[", rel);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) && n < 8 && used < size) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        used += (size_t)snprintf(out + used, size - used, "%s%s", n ? "," : "", de->d_name);
        n++;
    }
    if (used < size)
        snprintf(out + used, size - used, "]");
    if (d)
        closedir(d);
}

static void do_fds(void)
{
    struct rlimit rl;
    int max = 4096;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)max)
        max = (int)rl.rlim_cur;
    int found = 0;
    for (int fd = 3; fd < max; fd++) {
        if (fcntl(fd, F_GETFD) < 0)
            continue;
        found++;
        char link[64], target[PATH_MAX] = "?";
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        target[n > 0 ? n : 1] = '\0';
        struct stat st;
        char here[1024] = "", up[1024] = "";
        if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
            list_dir(fd, ".", here, sizeof here);
            list_dir(fd, "..", up, sizeof up);
        }
        say_ok("fd=%d -> %s %s %s", fd, target, here, up);
    }
    if (!found)
        say_ok("none");
}

/* ---- truncation: the Landlock right that came with ABI 3 ---------------------------------- */

static void do_truncate(const char *path)
{
    report(truncate(path, 0), NULL);
}

/* O_RDONLY|O_TRUNC truncates without opening for writing (the kernel asks for write permission,
 * but Landlock before ABI 3 only sees a read). */
static void do_open_trunc(const char *path)
{
    int fd = open(path, O_RDONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) {
        say_errno(errno, NULL);
        return;
    }
    close(fd);
    say_ok(NULL);
}

/* ---- dispatch ----------------------------------------------------------------------------- */

static const char *arg(char **args, int i)
{
    return args[i] ? args[i] : "";
}

static int run_op(char *text)
{
    snprintf(op_text, sizeof op_text, "%s", text);
    char *args[4] = {NULL};
    char *save = NULL;
    char *name = strtok_r(text, ":", &save);
    for (int i = 0; i < 3; i++)
        args[i] = strtok_r(NULL, i == 2 ? "" : ":", &save);
    if (!name)
        return 2;
    errno = 0;
    if (!strcmp(name, "unshare_user"))
        do_unshare(CLONE_NEWUSER);
    else if (!strcmp(name, "unshare_mnt"))
        do_unshare(CLONE_NEWNS);
    else if (!strcmp(name, "unshare_net"))
        do_unshare(CLONE_NEWNET);
    else if (!strcmp(name, "unshare_pid"))
        do_unshare(CLONE_NEWPID);
    else if (!strcmp(name, "unshare_uts"))
        do_unshare(CLONE_NEWUTS);
    else if (!strcmp(name, "unshare_all"))
        do_unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWUTS |
                   CLONE_NEWIPC | CLONE_NEWCGROUP);
    else if (!strcmp(name, "clone_newuser"))
        do_clone_newuser();
    else if (!strcmp(name, "setns"))
        do_setns(arg(args, 0));
    else if (!strcmp(name, "mount_tmpfs"))
        do_mount_tmpfs(arg(args, 0));
    else if (!strcmp(name, "remount_rw"))
        do_remount_rw(arg(args, 0));
    else if (!strcmp(name, "umount"))
        do_umount(arg(args, 0));
    else if (!strcmp(name, "pivot_root"))
        do_pivot_root(arg(args, 0));
    else if (!strcmp(name, "chroot_escape"))
        do_chroot_escape(arg(args, 0));
    else if (!strcmp(name, "keyctl_join"))
        do_keyctl_join();
    else if (!strcmp(name, "add_key"))
        do_add_key();
    else if (!strcmp(name, "bpf_map"))
        do_bpf_map();
    else if (!strcmp(name, "bpf_prog"))
        do_bpf_prog();
    else if (!strcmp(name, "perf_sw"))
        do_perf_sw();
    else if (!strcmp(name, "userfaultfd"))
        do_userfaultfd();
    else if (!strcmp(name, "int80_getpid"))
        foreign_abi(0, I386_NR_GETPID, 0);
    else if (!strcmp(name, "int80_unshare"))
        foreign_abi(0, I386_NR_UNSHARE, CLONE_NEWUSER);
    else if (!strcmp(name, "x32_unshare"))
        foreign_abi(1, X32_NR_UNSHARE, CLONE_NEWUSER);
    else if (!strcmp(name, "ptrace_attach"))
        do_ptrace_attach(atoi(arg(args, 0)), 0);
    else if (!strcmp(name, "ptrace_seize"))
        do_ptrace_attach(atoi(arg(args, 0)), 1);
    else if (!strcmp(name, "ptrace_child"))
        do_ptrace_child();
    else if (!strcmp(name, "ptrace_traceme"))
        do_ptrace_traceme();
    else if (!strcmp(name, "proc_mem"))
        do_proc_mem(arg(args, 0));
    else if (!strcmp(name, "process_vm_readv"))
        do_process_vm_readv(atoi(arg(args, 0)));
    else if (!strcmp(name, "kill"))
        do_kill(atoi(arg(args, 0)), atoi(arg(args, 1)));
    else if (!strcmp(name, "socket_packet"))
        do_socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    else if (!strcmp(name, "socket_vsock"))
        do_socket(AF_VSOCK, SOCK_STREAM, 0);
    else if (!strcmp(name, "socket_netlink"))
        do_socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
    else if (!strcmp(name, "socket_raw"))
        do_socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
    else if (!strcmp(name, "socket_raw_icmp"))
        do_socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
    else if (!strcmp(name, "socket_raw6"))
        do_socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6);
    else if (!strcmp(name, "tcp_connect"))
        do_tcp_connect(atoi(arg(args, 0)));
    else if (!strcmp(name, "unix_connect"))
        do_unix_connect(arg(args, 0), 0);
    else if (!strcmp(name, "abstract_connect"))
        do_unix_connect(arg(args, 0), 1);
    else if (!strcmp(name, "tcp_self"))
        do_tcp_self(atoi(arg(args, 0)));
    else if (!strcmp(name, "abstract_self"))
        do_abstract_self(arg(args, 0));
    else if (!strcmp(name, "sethostname"))
        report(sethostname(arg(args, 0), strlen(arg(args, 0))), NULL);
    else if (!strcmp(name, "setdomainname"))
        report(setdomainname(arg(args, 0), strlen(arg(args, 0))), NULL);
    else if (!strcmp(name, "shmat"))
        do_shmat(atoi(arg(args, 0)));
    else if (!strcmp(name, "msgctl"))
        do_msgctl(atoi(arg(args, 0)));
    else if (!strcmp(name, "isatty"))
        do_isatty(atoi(arg(args, 0)));
    else if (!strcmp(name, "tiocsti"))
        tiocsti_text(atoi(arg(args, 0)), arg(args, 1), 0);
    else if (!strcmp(name, "tiocsti_high"))
        tiocsti_text(atoi(arg(args, 0)), arg(args, 1), 1);
    else if (!strcmp(name, "tiocsti_tty"))
        do_tiocsti_tty(arg(args, 0));
    else if (!strcmp(name, "setfcap"))
        do_setfcap(arg(args, 0));
    else if (!strcmp(name, "fds"))
        do_fds();
    else if (!strcmp(name, "truncate"))
        do_truncate(arg(args, 0));
    else if (!strcmp(name, "open_trunc"))
        do_open_trunc(arg(args, 0));
    else {
        fprintf(stderr, "escape: unknown operation \"%s\"\n", op_text);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* Line-buffered: if an operation kills the process, the lines before it stay. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: %s OP[:ARG[:ARG]]...\n", argv[0]);
        return 2;
    }
    int status = 0;
    for (int i = 1; i < argc; i++)
        if (run_op(argv[i]) != 0)
            status = 2;
    return status;
}
