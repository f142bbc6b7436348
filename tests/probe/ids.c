/* ids: prints the process's user and group ids, effective capabilities and no_new_privs, as
 *
 *   ids ruid=R euid=E suid=S rgid=R egid=E sgid=S capeff=HEX nnp=N
 *
 * Harmless on purpose: the escape tests install a copy of it set-uid root on the host for a
 * moment (to see whether running it from inside a sandbox raises anything), so it must do
 * nothing but print. */
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0) {
        perror("ids: getresuid");
        return 1;
    }
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capget, &hdr, data) < 0) {
        perror("ids: capget");
        return 1;
    }
    unsigned long long eff = ((unsigned long long)data[1].effective << 32) | data[0].effective;
    int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
    printf("ids ruid=%u euid=%u suid=%u rgid=%u egid=%u sgid=%u capeff=%llx nnp=%d\n", (unsigned)ru,
           (unsigned)eu, (unsigned)su, (unsigned)rg, (unsigned)eg, (unsigned)sg, eff, nnp);
    return 0;
}
