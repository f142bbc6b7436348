/* envd's services as a sandbox's own envd would serve them (routes.h): the request names its
 * sandbox in E2b-Sandbox-Id and must carry that sandbox's access token (X-Access-Token).
 *
 * What E2B's proxy answers in front of envd is kept: an unknown, killed or paused sandbox is a
 * 502 with the sandbox's id (the SDK's isRunning() reads 502 as "not running", its other calls
 * as a timeout); a paused sandbox with autoResume is resumed by the request instead. A missing or
 * wrong token is envd's own 401: Connect's unauthenticated on its RPC paths. */
#include <ctype.h>
#include <jansson.h>
#include <string.h>

#include "api/auth.h"
#include "api/connect_rpc.h"
#include "api/control_json.h"
#include "serve/envd_routes.h"
#include "serve/envd_watch.h"
#include "serve/interp.h"
#include "serve/routes.h"
#include "serve/sandbox.h"

static void respond_unreachable(struct http_exchange *x, const char *id, const char *why)
{
    json_t *j = json_pack("{s:i,s:s,s:s}", "code", 502, "message", why, "sandboxId", id);
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!body) {
        http_respond_error(x, 502, "%s", why);
        return;
    }
    static const struct http_header type[] = {{"Content-Type", "application/json"}};
    http_respond(x, 502, type, 1, body, strlen(body));
    free(body);
}

static bool is_rpc(const char *path)
{
    return strncmp(path, "/process.Process/", 17) == 0 ||
           strncmp(path, "/filesystem.Filesystem/", 23) == 0;
}

static void respond_unauthenticated(struct http_exchange *x, const struct http_request *req,
                                    const char *id)
{
    if (!is_rpc(req->path)) {
        http_respond_error(x, 401, "sandbox %s: missing or wrong X-Access-Token", id);
        return;
    }
    char *body = connect_error_json(CONNECT_UNAUTHENTICATED, "missing or wrong X-Access-Token");
    if (!body) {
        http_respond_error(x, 401, "sandbox %s: missing or wrong X-Access-Token", id);
        return;
    }
    static const struct http_header type[] = {{"Content-Type", "application/json"}};
    http_respond(x, connect_code_http_status(CONNECT_UNAUTHENTICATED), type, 1, body, strlen(body));
    free(body);
}

/* The sandbox named by a Host of E2B's form "PORT-ID.DOMAIN[:PORT]" (the SDK's sandbox URL
 * when neither E2B_SANDBOX_URL nor debug is set), PORT envd's 49983 or the code interpreter's
 * 49999, into id: true when it has that form; *interp tells which. */
static bool host_sandbox(const struct http_request *req, char id[STORE_ID_MAX + 1], bool *interp)
{
    static const char envd_port[] = "49983-", interp_port[] = INTERP_PORT "-";
    const char *host = http_request_header(req, "Host");
    if (!host)
        return false;
    *interp = strncmp(host, interp_port, sizeof interp_port - 1) == 0;
    if (!*interp && strncmp(host, envd_port, sizeof envd_port - 1) != 0)
        return false;
    host += sizeof envd_port - 1;
    size_t n = strcspn(host, ".:");
    if (n == 0 || n > STORE_ID_MAX || host[n] != '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)host[i]) && host[i] != '-' && host[i] != '_')
            return false;
    memcpy(id, host, n);
    id[n] = '\0';
    return true;
}

/* A /files request that brings a signature and no access token: its signature is its
 * authorization, checked by envd_files_http_route (E2B's envd: the token, when one comes, must be
 * right; without it, the signature must). */
static bool signed_files(const struct http_request *req)
{
    const char *token = http_request_header(req, "X-Access-Token");
    return envd_files_signed(req) && (!token || !token[0]);
}

bool routes_is_envd(const struct http_request *req)
{
    char id[STORE_ID_MAX + 1];
    bool interp;
    return http_request_header(req, "E2b-Sandbox-Id") || host_sandbox(req, id, &interp) ||
           envd_files_signed(req);
}

/* Whether the request is for the code interpreter's port: by E2b-Sandbox-Port, or the Host. */
static bool for_interp(const struct http_request *req)
{
    const char *port = http_request_header(req, "E2b-Sandbox-Port");
    char id[STORE_ID_MAX + 1];
    bool interp = false;
    if (port)
        return strcmp(port, INTERP_PORT) == 0;
    return !http_request_header(req, "E2b-Sandbox-Id") && host_sandbox(req, id, &interp) && interp;
}

/* The token the request carries is the sandbox's: envd's X-Access-Token, or on the code
 * interpreter's port the traffic token too (the SDK sends only that one on /contexts). */
static bool token_ok(const struct http_request *req, const struct sbx *sb)
{
    if (auth_token_equal(http_request_header(req, "X-Access-Token"), sb->envd_token))
        return true;
    char traffic[AUTH_TOKEN_MAX + 1];
    return for_interp(req) && auth_traffic_token(sb->envd_token, traffic, sizeof traffic) == 0 &&
           auth_token_equal(http_request_header(req, "E2B-Traffic-Access-Token"), traffic);
}

/* The sandbox the request may reach, or NULL once it was answered. It is named by the
 * E2b-Sandbox-Id header, else by the Host, else (a signed URL made with E2B_SANDBOX_URL, which
 * names no sandbox) by the signature: the one sandbox whose token signed it. */
static struct sbx *reachable(struct serve *d, struct http_exchange *x,
                             const struct http_request *req)
{
    const char *id = http_request_header(req, "E2b-Sandbox-Id");
    char host_id[STORE_ID_MAX + 1];
    bool interp;
    if ((!id || !id[0]) && host_sandbox(req, host_id, &interp))
        id = host_id;
    if ((!id || !id[0]) && signed_files(req)) {
        struct sbx *signer = envd_files_signer(d, req);
        if (!signer) {
            http_respond_error(x, 401, "invalid signature");
            return NULL;
        }
        id = signer->id;
    }
    if (!id || !id[0]) {
        http_respond_error(x, 400, "envd request without an E2b-Sandbox-Id header");
        return NULL;
    }
    struct sbx *sb = sbx_find(d, id);
    if (!sb || sb->pooled || (sb->killing && !sb->cold_stopping) || sb->gone) {
        respond_unreachable(x, id,
                            "The sandbox was not found: it was killed, reached its "
                            "timeout or never existed");
        return NULL;
    }
    if (!signed_files(req) && !token_ok(req, sb)) {
        respond_unauthenticated(x, req, sb->id);
        return NULL;
    }
    /* one paused without its memory boots only through connect, as on E2B */
    if (sb->state == SANDBOX_PAUSED && sb->auto_resume && !sb->cold) {
        err_t err;
        int64_t at_least = sbx_wall_ms() + API_TIMEOUT_DEFAULT_S * 1000; /* E2B's default */
        if (sbx_resume(sb, &err) < 0 ||
            (sb->deadline_ms < at_least && sbx_set_deadline(sb, at_least, &err) < 0)) {
            http_respond_error(x, 500, "sandbox %s: resuming it: %s", sb->id, err.msg);
            return NULL;
        }
    }
    if (sb->state != SANDBOX_RUNNING) {
        respond_unreachable(x, sb->id,
                            sb->state == SANDBOX_PAUSED
                                ? "The sandbox is paused: connect to it (or create it with "
                                  "autoResume) to resume it"
                                : "The sandbox is not running yet");
        return NULL;
    }
    return sb;
}

void routes_envd(struct serve *d, struct http_exchange *x, const struct http_request *req)
{
    struct sbx *sb = reachable(d, x, req);
    if (!sb)
        return;
    if (for_interp(req)) {
        interp_route(d, sb, x, req);
        return;
    }
    if (strcmp(req->path, "/health") == 0) {
        http_respond(x, 204, NULL, 0, NULL, 0);
        return;
    }
    static const char process[] = "/process.Process/";
    if (strncmp(req->path, process, sizeof process - 1) == 0 && strcmp(req->method, "POST") == 0) {
        envd_process_route(d, sb, x, req, req->path + sizeof process - 1);
        return;
    }
    static const char filesystem[] = "/filesystem.Filesystem/";
    if (strncmp(req->path, filesystem, sizeof filesystem - 1) == 0 &&
        strcmp(req->method, "POST") == 0) {
        const char *method = req->path + sizeof filesystem - 1;
        if (envd_watch_handles(method))
            envd_watch_route(d, sb, x, req, method);
        else
            envd_files_rpc_route(d, sb, x, req, method);
        return;
    }
    if (strcmp(req->path, "/files") == 0) {
        envd_files_http_route(d, sb, x, req);
        return;
    }
    http_respond_error(x, 501, "%s %s: not implemented yet", req->method, req->path);
}
