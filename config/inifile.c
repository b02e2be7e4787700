#include "inifile.h"

#include <string.h>

/* The C locale's white space, without <ctype.h>'s locale dependence. */
static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static char *skip_space(char *s)
{
    while (*s && is_space(*s))
        s++;
    return s;
}

/* Drops white space at the end of s, in place. */
static void trim_end(char *s)
{
    size_t n = strlen(s);
    while (n && is_space(s[n - 1]))
        s[--n] = 0;
}

/* First character of s that is in stops, or the ';' of an inline comment
 * (one with white space before it), or the terminating NUL. */
static char *find_stop(char *s, const char *stops)
{
    int after_space = 0;
    for (; *s; s++) {
        if (stops && strchr(stops, *s))
            break;
        if (*s == ';' && after_space)
            break;
        after_space = is_space(*s);
    }
    return s;
}

int cfg_ini_parse_stream(cfg_ini_reader reader, void *stream, cfg_ini_handler handler, void *user)
{
    char line[CFG_INI_MAX_LINE];
    char section[CFG_INI_MAX_LINE] = "";
    char key[CFG_INI_MAX_LINE] = ""; /* the last key, for continuation lines */
    int lineno = 0, first_error = 0;

    while (reader(line, (int)sizeof line, stream)) {
        lineno++;
        char *s = line;
        if (lineno == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB &&
            (unsigned char)s[2] == 0xBF)
            s += 3;
        trim_end(s);
        char *start = skip_space(s);
        int error = 0;

        if (*start == ';' || *start == '#') {
            /* a comment line */
        } else if (*key && *start && start > s) {
            /* indented under a key: more of its value */
            *find_stop(start, NULL) = 0;
            trim_end(start);
            error = !handler(user, section, key, start);
        } else if (*start == '[') {
            char *end = find_stop(start + 1, "]");
            if (*end == ']') {
                *end = 0;
                memcpy(section, start + 1, strlen(start + 1) + 1);
                key[0] = 0;
            } else {
                error = 1;
            }
        } else if (*start) {
            char *end = find_stop(start, "=:");
            if (*end == '=' || *end == ':') {
                *end = 0;
                trim_end(start);
                char *value = end + 1;
                *find_stop(value, NULL) = 0;
                value = skip_space(value);
                trim_end(value);
                memcpy(key, start, strlen(start) + 1);
                error = !handler(user, section, key, value);
            } else {
                error = 1;
            }
        }
        if (error && !first_error)
            first_error = lineno;
    }
    return first_error;
}
