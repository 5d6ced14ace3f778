/* The web dashboard (§16): the files of web/, built into the binary, served as they are. Every
 * answer carries a strong ETag (a hash of the bytes, computed at build time) and is revalidated
 * on each load (a 304 costs no body), and a Content-Security-Policy under which the page can run
 * only its own scripts and styles and talk only to this server. */
#include "api/dashboard.h"

#include <stdio.h>
#include <string.h>

#include "api/common.h"
#include "api/web_assets.h"

/* No inline script or style, nothing from another origin, no framing, no plugins, and DOM
 * sinks that parse HTML from strings (innerHTML and the like) refused outright. */
#define DASHBOARD_CSP                                                                              \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "                    \
    "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; "               \
    "frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"

static const web_asset *find_asset(const char *path)
{
    for (int i = 0; i < payd_web_asset_count; i++)
        if (!strcmp(payd_web_assets[i].path, path))
            return &payd_web_assets[i];
    return NULL;
}

static void serve_asset(request *req, const char *path)
{
    const web_asset *a = find_asset(path);
    if (!a) {
        reply_error(req, ERR_ROUTE_NOT_FOUND, "no such file");
        return;
    }
    reply_header(req, "Content-Security-Policy", DASHBOARD_CSP);
    reply_header(req, "X-Content-Type-Options", "nosniff");
    reply_header(req, "X-Frame-Options", "DENY");
    reply_header(req, "Referrer-Policy", "no-referrer");
    reply_header(req, "Cross-Origin-Opener-Policy", "same-origin");
    reply_header(req, "Cross-Origin-Resource-Policy", "same-origin");
    reply_header(req, "Cache-Control", "no-cache");
    reply_header(req, "ETag", a->etag);
    const char *inm = request_header(req, "If-None-Match");
    if (inm && etag_list_matches(inm, a->etag, true)) {
        reply_raw(req, 304, "", 0);
        return;
    }
    reply_header(req, "Content-Type", a->content_type);
    reply_raw(req, 200, (const char *)a->data, a->len);
}

void dashboard_index(request *req)
{
    serve_asset(req, "index.html");
}

void dashboard_asset(request *req)
{
    char path[160];
    /* one path segment: the router never hands over a '/', so nothing can climb out */
    snprintf(path, sizeof path, "assets/%s", req->params[0]);
    serve_asset(req, path);
}
