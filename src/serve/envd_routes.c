/* envd's services as a sandbox's own envd would serve them (routes.h): the request names its
 * sandbox in E2b-Sandbox-Id and must carry that sandbox's access token (X-Access-Token). */
#include <string.h>

#include "api/auth.h"
#include "serve/envd_routes.h"
#include "serve/routes.h"
#include "serve/sandbox.h"

void routes_envd(struct serve *d, struct http_exchange *x, const struct http_request *req)
{
    const char *id = http_request_header(req, "E2b-Sandbox-Id");
    struct sbx *sb = id ? sbx_find(d, id) : NULL;
    if (!sb || sb->killing) {
        http_respond_error(x, 404, "sandbox %s not found", id ? id : "");
        return;
    }
    if (!auth_token_equal(http_request_header(req, "X-Access-Token"), sb->envd_token)) {
        http_respond_error(x, 401, "sandbox %s: missing or wrong X-Access-Token", sb->id);
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
        envd_files_rpc_route(d, sb, x, req, req->path + sizeof filesystem - 1);
        return;
    }
    if (strcmp(req->path, "/files") == 0) {
        envd_files_http_route(d, sb, x, req);
        return;
    }
    http_respond_error(x, 501, "%s %s: not implemented yet", req->method, req->path);
}
