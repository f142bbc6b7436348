/* Conditional downloads (conditional.h). */
#include "api/conditional.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

void cond_validators_make(uint64_t size, int64_t mtime_ns, struct cond_validators *v)
{
    snprintf(v->etag, sizeof v->etag, "\"%llx-%llx\"", (unsigned long long)mtime_ns,
             (unsigned long long)size);
    /* floor, also before 1970 */
    v->mtime_s = mtime_ns / 1000000000 - (mtime_ns % 1000000000 < 0 ? 1 : 0);
    time_t t = (time_t)v->mtime_s;
    struct tm tm;
    if (!gmtime_r(&t, &tm) ||
        strftime(v->last_modified, sizeof v->last_modified, "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0)
        v->last_modified[0] = '\0';
}

int64_t cond_http_date(const char *s)
{
    static const char *const forms[] = {
        "%a, %d %b %Y %H:%M:%S GMT", /* IMF-fixdate */
        "%A, %d-%b-%y %H:%M:%S GMT", /* RFC 850 */
        "%a %b %e %H:%M:%S %Y",      /* asctime */
    };
    if (!s || strlen(s) > 64)
        return -1;
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        const char *end = strptime(s, forms[i], &tm);
        if (end && *end == '\0') {
            time_t t = timegm(&tm);
            return t >= 0 ? (int64_t)t : -1; /* before 1970: no file here says so */
        }
    }
    return -1;
}

/* Whether the entity-tag list (RFC 9110, 8.8.3: "*" or tags separated by commas) holds etag:
 * strongly (a weak tag never matches) or weakly (W/ ignored on either side). A list that does not
 * parse matches nothing. */
static bool etag_listed(const char *list, const char *etag, bool weak_ok)
{
    if (strlen(list) > COND_HEADER_MAX)
        return false;
    const char *p = list;
    while (*p == ' ' || *p == '\t')
        p++;
    if (p[0] == '*') {
        for (p++; *p == ' ' || *p == '\t'; p++)
            ;
        return *p == '\0';
    }
    size_t want = strlen(etag);
    while (*p) {
        bool weak = false;
        if (p[0] == 'W' && p[1] == '/') {
            weak = true;
            p += 2;
        }
        if (*p != '"')
            return false;
        const char *close = strchr(p + 1, '"');
        if (!close)
            return false;
        size_t n = (size_t)(close - p) + 1;
        if ((!weak || weak_ok) && n == want && memcmp(p, etag, n) == 0)
            return true;
        p = close + 1;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == ',') {
            p++;
            while (*p == ' ' || *p == '\t' || *p == ',')
                p++;
        } else if (*p) {
            return false;
        }
    }
    return false;
}

int cond_evaluate(const struct cond_validators *v, const struct cond_request *r)
{
    /* RFC 9110, 13.2.2: each step only where the one before it did not apply */
    if (r->if_match) {
        if (!etag_listed(r->if_match, v->etag, false))
            return 412;
    } else if (r->if_unmodified_since) {
        int64_t t = cond_http_date(r->if_unmodified_since);
        if (t >= 0 && v->mtime_s > t)
            return 412;
    }
    if (r->if_none_match) {
        if (etag_listed(r->if_none_match, v->etag, true))
            return 304;
    } else if (r->if_modified_since) {
        int64_t t = cond_http_date(r->if_modified_since);
        if (t >= 0 && v->mtime_s <= t)
            return 304;
    }
    return 0;
}

bool cond_if_range(const struct cond_validators *v, const char *if_range)
{
    if (!if_range)
        return true;
    if (if_range[0] == '"' || (if_range[0] == 'W' && if_range[1] == '/'))
        return strcmp(if_range, v->etag) == 0; /* a weak tag never matches here */
    int64_t t = cond_http_date(if_range);
    return t >= 0 && t == v->mtime_s;
}
