/* The daemon's routes: which handler a request goes to. routes_control serves E2B's control
 * plane (routes.c); envd's services (routed by the E2b-Sandbox-Id header) are envd_routes'. */
#pragma once
#include "http/http.h"
#include "serve/serve.h"

/* A control-plane request (no E2b-Sandbox-Id header): checks the API key, then routes. */
void routes_control(struct serve *d, struct http_exchange *x, const struct http_request *req);
/* Whether a request is for a sandbox's envd: an E2b-Sandbox-Id header, a Host "49983-ID.DOMAIN",
 * or a signed /files URL (envd_routes.c). */
bool routes_is_envd(const struct http_request *req);
/* A request for a sandbox's envd (E2b-Sandbox-Id and E2b-Sandbox-Port headers). */
void routes_envd(struct serve *d, struct http_exchange *x, const struct http_request *req);
