/* One-shot code runs, hutch's extension beside E2B's calls (docs/API.md, "POST /run"): the code
 * of an /execute body runs in a fresh sandbox of code-interpreter-v1 (one of the warm pool when
 * one is ready, pool.h), in that sandbox's default context of its language, its lines streamed
 * as /execute streams them, and the sandbox is killed when the run ends, fails, passes 60 s, or
 * its client goes. Nothing of one run reaches another: each has a sandbox of its own. */
#pragma once
#include "http/http.h"
#include "serve/serve.h"

void oneshot_route(struct serve *d, struct http_exchange *x, const struct http_request *req);
