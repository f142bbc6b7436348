/* envd's directory watching (envd_watch.c): the WatchDir stream and the watchers that
 * CreateWatcher makes, GetWatcherEvents drains and RemoveWatcher ends, each on one inotify watch
 * of init's (src/init/README.md, "Watches"). */
#pragma once
#include <stdbool.h>

#include "http/http.h"
#include "serve/sandbox.h"

/* Most watchers (CreateWatcher) one sandbox holds; one more is resource_exhausted. */
#define WATCHERS_PER_SANDBOX 64
/* Events a watcher keeps between two GetWatcherEvents; beyond it the oldest go. */
#define WATCHER_MAX_EVENTS 4096

/* Whether method (after /filesystem.Filesystem/) is one of WatchDir, CreateWatcher,
 * GetWatcherEvents, RemoveWatcher. */
bool envd_watch_handles(const char *method);
void envd_watch_route(struct serve *d, struct sbx *sb, struct http_exchange *x,
                      const struct http_request *req, const char *method);
/* The sandbox is gone: its watchers are freed (init's watches went with it). */
void envd_watch_release_all(struct sbx *sb);
