/* envd's services, one file each: the request is for sb (found by its E2b-Sandbox-Id header,
 * its access token checked) and names method, the part of the path after the service. */
#pragma once
#include "http/http.h"
#include "serve/sandbox.h"

/* /process.Process/{Start,Connect,List,SendInput,SendSignal,CloseStdin,Update} */
void envd_process_route(struct serve *d, struct sbx *sb, struct http_exchange *x,
                        const struct http_request *req, const char *method);

/* /filesystem.Filesystem/{Stat,MakeDir,Remove,ListDir,Move} */
void envd_files_rpc_route(struct serve *d, struct sbx *sb, struct http_exchange *x,
                          const struct http_request *req, const char *method);
/* GET and POST /files?path=&username= */
void envd_files_http_route(struct serve *d, struct sbx *sb, struct http_exchange *x,
                           const struct http_request *req);

/* Whether req is GET or POST /files with a signature parameter (a URL of the SDK's downloadUrl
 * or uploadUrl). */
bool envd_files_signed(const struct http_request *req);
/* The live sandbox whose access token signed req's URL (expired or not), or NULL. */
struct sbx *envd_files_signer(struct serve *d, const struct http_request *req);
