#include "jail/writable_root.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "jail/control.h"
#include "jail/disk_layer.h"
#include "jail/idmap.h"
#include "util/cleanup.h"

static void close_layers(int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

int writable_root_send(int ctl, pid_t pid, const struct jail_spec *spec, unsigned *unmapped,
                       err_t *err)
{
    *unmapped = 0;
    cleanup_fd int userns = idmap_userns_open(pid, err);
    if (userns < 0)
        return err_wrap(err, "writable root");
    int fds[WRITABLE_ROOT_MAX_LAYERS] = {-1, -1, -1, -1};
    size_t n = 0;
    const char *lowers[] = {spec->template_dir, spec->usr_dir, spec->dpkg_dir};
    fds[n] = disk_layer_open(spec->layer_dir, userns, err);
    if (fds[n++] < 0)
        goto fail;
    for (size_t i = 0; i < sizeof lowers / sizeof lowers[0] && lowers[i]; i++) {
        bool plain = false;
        fds[n] = idmap_clone(userns, lowers[i], &plain, err);
        if (fds[n++] < 0)
            goto fail;
        if (plain)
            *unmapped |= 1u << i;
    }
    struct control_msg msg = {
        .type = CONTROL_LAYERS, .code = (int32_t)n, .sig = (int32_t)*unmapped};
    int rc = control_send_fds(ctl, &msg, fds, n);
    int saved = errno;
    close_layers(fds, n);
    return rc < 0 ? err_set(err, saved, "send the writable root's layers to the sandbox") : 0;
fail:
    close_layers(fds, n);
    return err_wrap(err, "writable root");
}

const char *writable_root_unmapped_note(unsigned unmapped, char *buf, size_t size)
{
    static const char *const names[] = {"the template", "/usr", "/var/lib/dpkg"};
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (unmapped & (1u << i) && at < size)
            at += (size_t)snprintf(buf + at, size - at, "%s%s", at ? ", " : "", names[i]);
    if (at < size)
        snprintf(buf + at, size - at,
                 ": the filesystem cannot be idmapped, so its files are owned by nobody inside "
                 "and sandbox root cannot change them (reading and running them work)");
    return buf;
}
