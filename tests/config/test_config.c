/* config: defaults, every key, [model:NAME] sections over [chat] and
 * [sampler], and bad lines: each a warning with its line number while the
 * default stays. */
#include "config.h"
#include "testutil.h"

static int warned(const cfg_config *c, const char *needle)
{
    for (int i = 0; i < c->n_warn; i++)
        if (strstr(c->warn[i], needle))
            return 1;
    return 0;
}

int main(void)
{
    cfg_config c;
    cfg_defaults(&c);
    CHECK(c.v.temp == 0.8f && c.v.top_k == 40 && c.v.max_tokens == 512 && !strcmp(c.v.tmpl, "auto"));
    CHECK(c.v.set == 0 && c.color == 1);

    const char *good =
        "; comment\n"
        "[chat]\n"
        "model = /m/a.gguf\n"
        "model_dirs = /m:/n\n"
        "threads = 2\n"
        "kernel = avx2\n"
        "template = chatml\n"
        "system = Be brief.\n"
        "color = never\n"
        "[sampler]\n"
        "temp = 0.3\n"
        "top_k = 10\n"
        "top_p = 0.9\n"
        "min_p = 0.1\n"
        "repeat_penalty = 1.1\n"
        "repeat_last_n = 32\n"
        "seed = 42\n"
        "[model:small.gguf]\n"
        "temp = 0\n"
        "template = none\n";
    cfg_load_string(&c, good, "good.ini");
    CHECKF(c.n_warn == 0, "%s", c.warn[0]);
    CHECK(!strcmp(c.model, "/m/a.gguf"));
    CHECK(c.n_dirs == 2 && !strcmp(c.model_dirs[1], "/n"));
    CHECK(c.v.threads == 2 && !strcmp(c.v.kernel, "avx2") && !strcmp(c.v.system, "Be brief."));
    CHECK(c.color == 0);
    CHECK(c.v.temp == 0.3f && c.v.top_k == 10 && c.v.seed == 42 && (c.v.set & CFG_SEED));
    cfg_values v;
    cfg_for_model(&c, "/any/where/small.gguf", &v);
    CHECK(v.temp == 0 && !strcmp(v.tmpl, "none") && v.top_k == 10 && v.threads == 2);
    cfg_for_model(&c, "/any/where/other.gguf", &v);
    CHECK(v.temp == 0.3f && !strcmp(v.tmpl, "chatml"));

    /* enable_thinking: on, off, default; per model; a bad value warns and keeps the default */
    CHECK(c.v.thinking == -1);
    cfg_defaults(&c);
    cfg_load_string(&c, "[chat]\nenable_thinking = off\n[model:t.gguf]\nenable_thinking = on\n", "think.ini");
    CHECKF(c.n_warn == 0, "%s", c.warn[0]);
    cfg_for_model(&c, "/m/other.gguf", &v);
    CHECK(v.thinking == 0);
    cfg_for_model(&c, "/m/t.gguf", &v);
    CHECK(v.thinking == 1);
    cfg_defaults(&c);
    cfg_load_string(&c, "[chat]\nenable_thinking = maybe\n", "think2.ini");
    CHECK(warned(&c, "think2.ini:2: enable_thinking") && c.v.thinking == -1);

    /* the KV cache's types: in [chat] and per model; a bad name warns and keeps f16 ("") */
    cfg_defaults(&c);
    CHECK(!c.v.cache_k[0] && !c.v.cache_v[0]);
    cfg_load_string(&c, "[chat]\ncache_type_k = q8_0\n[model:big.gguf]\ncache_type_v = q4_0\n", "kv.ini");
    CHECKF(c.n_warn == 0, "%s", c.warn[0]);
    cfg_for_model(&c, "/m/big.gguf", &v);
    CHECK(!strcmp(v.cache_k, "q8_0") && !strcmp(v.cache_v, "q4_0") && (v.set & CFG_CACHE_K) && (v.set & CFG_CACHE_V));
    cfg_for_model(&c, "/m/small.gguf", &v);
    CHECK(!strcmp(v.cache_k, "q8_0") && !v.cache_v[0]);
    cfg_defaults(&c);
    cfg_load_string(&c, "[chat]\ncache_type_v = q5_0\n", "kv2.ini");
    CHECK(warned(&c, "kv2.ini:2: cache_type_v: 'q5_0' is not a cache type (f16, q8_0, q4_0)") && !c.v.cache_v[0]);

    /* speculative decoding: a draft model per target model ([model:NAME]
     * only), lookup and draft_max anywhere; bad values warn, named */
    cfg_defaults(&c);
    cfg_load_string(&c,
                    "[chat]\nlookup = 3\n"
                    "[model:big.gguf]\ndraft = small-q4.gguf\ndraft_max = 12\n"
                    "[model:/abs/other.gguf]\ndraft = ~/d/tiny.gguf\nlookup = 0\n",
                    "spec.ini");
    CHECKF(c.n_warn == 0, "%s", c.warn[0]);
    CHECK(c.v.lookup == 3 && !c.v.draft[0]);
    cfg_for_model(&c, "/models/big.gguf", &v);
    CHECK(!strcmp(v.draft, "small-q4.gguf") && v.draft_max == 12 && v.lookup == 3 && (v.set & CFG_DRAFT));
    cfg_for_model(&c, "/abs/other.gguf", &v);
    CHECK(!strcmp(v.draft, "~/d/tiny.gguf") && v.lookup == 0 && v.draft_max == 0);
    cfg_for_model(&c, "/models/third.gguf", &v);
    CHECK(!v.draft[0] && !(v.set & CFG_DRAFT) && v.lookup == 3);
    cfg_defaults(&c);
    cfg_load_string(&c,
                    "[chat]\n"             /* 1 */
                    "draft = d.gguf\n"     /* 2: not per model */
                    "[model:m.gguf]\n"     /* 3 */
                    "lookup = 65\n"        /* 4 */
                    "draft_max = 0\n"      /* 5 */
                    "draft_max = 32\n"     /* 6 */
                    "draft =\n"            /* 7 */
                    "lookup = two\n",      /* 8 */
                    "spec2.ini");
    CHECK(warned(&c, "spec2.ini:2: draft belongs in a [model:NAME]"));
    CHECK(warned(&c, "spec2.ini:4: lookup") && warned(&c, "spec2.ini:5: draft_max") &&
          warned(&c, "spec2.ini:6: draft_max") && warned(&c, "spec2.ini:7: draft") && warned(&c, "spec2.ini:8: lookup"));
    cfg_for_model(&c, "m.gguf", &v);
    CHECK(!v.draft[0] && v.lookup == 0 && v.draft_max == 0 && !c.v.draft[0]);

    cfg_defaults(&c);
    const char *bad =
        "[chat]\n"                 /* 1 */
        "threads = lots\n"         /* 2 */
        "temp = 0.5\n"             /* 3: fine ([chat] takes sampler keys too) */
        "what is this\n"           /* 4 */
        "colour = on\n"            /* 5 */
        "[sampler]\n"              /* 6 */
        "top_p = 7\n"              /* 7 */
        "temp = -1\n"              /* 8 */
        "seed = -3\n"              /* 9 */
        "[nonsense]\n"             /* 10 */
        "x = 1\n"                  /* 11 */
        "[model:a.gguf]\n"         /* 12 */
        "bogus = 1\n"              /* 13 */
        "[broken\n";               /* 14 */
    cfg_load_string(&c, bad, "bad.ini");
    CHECK(warned(&c, "bad.ini:2: threads"));
    CHECK(warned(&c, "bad.ini:4: expected"));
    CHECK(warned(&c, "bad.ini:5: unknown key 'colour'"));
    CHECK(warned(&c, "bad.ini:7: top_p"));
    CHECK(warned(&c, "bad.ini:8: temp"));
    CHECK(warned(&c, "bad.ini:9: seed"));
    CHECK(warned(&c, "bad.ini:11: unknown section [nonsense]"));
    CHECK(warned(&c, "bad.ini:13: unknown key 'bogus'"));
    CHECK(warned(&c, "bad.ini:14:"));
    /* defaults kept where the value was bad; good lines still count */
    CHECK(c.v.threads == 0 && c.v.top_p == 0.95f && c.v.temp == 0.5f && !(c.v.set & CFG_SEED));

    /* a very long line is cut, with a warning, and the rest of the file reads on */
    cfg_defaults(&c);
    char longtxt[1200];
    memset(longtxt, 0, sizeof longtxt);
    strcpy(longtxt, "system = ");
    memset(longtxt + 9, 'x', 600);
    strcat(longtxt, "\ntemp = 0.25\n");
    cfg_load_string(&c, longtxt, "long.ini");
    CHECK(warned(&c, "long.ini:1: line longer"));
    CHECK(c.v.temp == 0.25f);

    /* INI syntax both readers (inih, config/inifile.c) take the same way:
     * CRLF, a byte order mark, ':' for '=', inline comments (only after a
     * space), indented continuation lines (the key again: the last wins),
     * comments and blank lines between, a comment after a section.
     * (Not here: an inline comment on a continuation line, which inih
     * keeps in the value up to r55 and drops from r56.) */
    cfg_defaults(&c);
    const char *syntax =
        "\xEF\xBB\xBFthreads = 3\r\n"     /* 1 */
        "[sampler] ; the sampler\r\n"       /* 2 */
        "top_k : 7\n"                       /* 3 */
        "top_p = 0.5 ; a comment\n"         /* 4 */
        "\tmin_p=0.2\t\n"                   /* 5: indented: continues top_p */
        "# hash comment\n"                  /* 6 */
        "\n"                                /* 7 */
        "temp = 0.7;not a comment\n"        /* 8 */
        "[chat]\n"                          /* 9 */
        "system = Be brief.\n"              /* 10 */
        "    And kind.\n"                   /* 11: continues system */
        "model = a=b.gguf\n"                /* 12: the first '=' splits */
        "kernel = scalar ;\n";              /* 13 */
    cfg_load_string(&c, syntax, "syntax.ini");
    CHECKF(c.v.threads == 3, "threads %d", c.v.threads);
    CHECK(c.v.top_k == 7);
    /* line 5 set top_p once more, to "min_p=0.2" (not a number) */
    CHECK(c.v.top_p == 0.5f && c.v.min_p == 0.05f && warned(&c, "syntax.ini:5: top_p"));
    CHECK(warned(&c, "syntax.ini:8: temp") && c.v.temp == 0.8f);
    CHECKF(!strcmp(c.v.system, "And kind."), "system '%s'", c.v.system);
    CHECK(!strcmp(c.model, "a=b.gguf"));
    CHECK(!strcmp(c.v.kernel, "scalar"));
    /* no other line warned (line 11 may: config.c's line check does not
     * know continuation lines) */
    for (int l = 1; l <= 13; l++) {
        char at[32];
        snprintf(at, sizeof at, "syntax.ini:%d:", l);
        CHECKF(l == 5 || l == 8 || l == 11 || !warned(&c, at), "warning at line %d", l);
    }

    /* a missing file is not an error; an unreadable one is a warning */
    cfg_defaults(&c);
    CHECK(cfg_load(&c, "/nonexistent/nibble.ini") == 1 && c.n_warn == 0);
    CHECK(cfg_load(&c, "/") == 0);
    char p[256];
#ifdef _WIN32
    _putenv_s("XDG_CONFIG_HOME", "/x/y");
#else
    setenv("XDG_CONFIG_HOME", "/x/y", 1);
#endif
    cfg_default_path(p, sizeof p);
    CHECK(!strcmp(p, "/x/y/nibble/nibble.ini"));
    return tu_result("test_config");
}
