#include "jail/writable_root.h"

#include <errno.h>
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

int writable_root_send(int ctl, pid_t pid, const struct jail_spec *spec, err_t *err)
{
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
        fds[n] = idmap_clone(userns, lowers[i], err);
        if (fds[n++] < 0)
            goto fail;
    }
    struct control_msg msg = {.type = CONTROL_LAYERS, .code = (int32_t)n};
    int rc = control_send_fds(ctl, &msg, fds, n);
    int saved = errno;
    close_layers(fds, n);
    return rc < 0 ? err_set(err, saved, "send the writable root's layers to the sandbox") : 0;
fail:
    close_layers(fds, n);
    return err_wrap(err, "writable root");
}
