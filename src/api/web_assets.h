#ifndef PAYD_API_WEB_ASSETS_H
#define PAYD_API_WEB_ASSETS_H
/* The dashboard's static files, built into the binary from web/ by cmake/embed_web.cmake. */
#include <stddef.h>

typedef struct web_asset {
    const char *path;         /* relative to web/: "index.html", "assets/app.js" */
    const char *content_type; /* from the file's extension */
    const unsigned char *data;
    size_t len;
    const char *etag; /* strong, quoted: a SHA-256 prefix of the bytes */
} web_asset;

extern const web_asset payd_web_assets[];
extern const int payd_web_asset_count;

#endif
