/* uid ranges: each acquire takes a slot no open file description holds, the ones after the last
 * this process took first (a daemon's next range is free at once, and a released one is not
 * reused at once); a slot another holder locks is skipped; the lock goes with the fd. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "jail/userns.h"
#include "tap.h"

static unsigned after(unsigned slot, unsigned n)
{
    return (slot + n) % USERNS_SLOT_COUNT;
}

int main(void)
{
    char lock[] = "/tmp/hutch-test-userns.XXXXXX";
    int tmp = mkstemp(lock);
    if (tmp < 0) {
        ok(0, "a lock file");
        return done_testing();
    }
    close(tmp);
    err_t err;
    struct uid_range a, b, c, d, e;
    ok(uid_range_acquire(lock, &a, &err) == 0, "a first range");
    ok(a.host_base == USERNS_HOST_BASE + a.slot * 65536u, "its host base is its slot's (%u)",
       a.slot);
    ok(uid_range_acquire(lock, &b, &err) == 0 && uid_range_acquire(lock, &c, &err) == 0,
       "two more");
    ok(b.slot == after(a.slot, 1) && c.slot == after(a.slot, 2),
       "each the slot after the last one taken (%u %u %u)", a.slot, b.slot, c.slot);
    unsigned b_slot = b.slot;
    uid_range_release(&b);
    ok(b.lock_fd == -1, "a release closes its lock");
    ok(uid_range_acquire(lock, &d, &err) == 0 && d.slot == after(c.slot, 1),
       "the next one moves on rather than reuse the one just released (%u, released %u)", d.slot,
       b_slot);
    /* another holder of the slot after d's: skipped */
    int other = open(lock, O_RDWR | O_CLOEXEC);
    struct flock fl = {
        .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = after(d.slot, 1), .l_len = 1};
    ok(other >= 0 && fcntl(other, F_OFD_SETLK, &fl) == 0, "another holder locks slot %u",
       after(d.slot, 1));
    ok(uid_range_acquire(lock, &e, &err) == 0 && e.slot == after(d.slot, 2),
       "a slot someone else holds is skipped (%u)", e.slot);
    struct flock probe = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = b_slot, .l_len = 1};
    ok(fcntl(other, F_OFD_SETLK, &probe) == 0, "the released slot is free for anyone");
    probe.l_start = a.slot;
    ok(fcntl(other, F_OFD_SETLK, &probe) < 0, "a held one is not");
    close(other);
    uid_range_release(&a);
    uid_range_release(&c);
    uid_range_release(&d);
    uid_range_release(&e);
    unlink(lock);
    return done_testing();
}
