/* Where hutch keeps things on the host. Environment variables override the defaults. */
#pragma once

/* HUTCH_STATE_DIR, default /var/lib/hutch: templates (and, later, sandboxes and the database). */
const char *hutch_state_dir(void);
/* HUTCH_RUN_DIR, default /run/hutch: runtime locks (uid ranges) and sockets. */
const char *hutch_run_dir(void);
