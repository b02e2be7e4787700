/* Character classes, the GPT-2 byte map and pre-tokenizer split rules.
 *
 * The split rules are the regular expressions model families publish
 * with their tokenizers (tokenizer.json "pre_tokenizer"), evaluated by
 * hand: each alternative of a pattern becomes a branch of a matcher that
 * returns the length of the match starting at one position, trying the
 * alternatives in the pattern's order (leftmost-first, greedy, with the
 * one bit of backtracking the patterns need spelled out). A search that
 * finds no match at a position moves on one character, like a regex
 * scanner; text between matches forms words of its own, as the
 * "isolated" split behaviour of those tokenizers does. */
#include "unicode.h"

#include <string.h>
#include <utf8proc.h>

#define LET ENG_UNI_LETTER
#define NUM ENG_UNI_NUMBER
#define PUN ENG_UNI_PUNCT
#define SPC ENG_UNI_SPACE
#define UPR ENG_UNI_UPPERISH
#define LWR ENG_UNI_LOWERISH

size_t eng_uni_next(const unsigned char *s, size_t n, int32_t *cp)
{
    unsigned b = s[0];
    if (b < 0x80) {
        *cp = (int32_t)b;
        return 1;
    }
    size_t need;
    uint32_t v, min;
    if (b >= 0xC2 && b <= 0xDF) {
        need = 2, v = b & 0x1F, min = 0x80;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 3, v = b & 0x0F, min = 0x800;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 4, v = b & 0x07, min = 0x10000;
    } else {
        *cp = -1; /* continuation byte, or a lead byte no valid sequence uses */
        return 1;
    }
    if (need > n) {
        *cp = -1;
        return 1;
    }
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *cp = -1;
            return 1;
        }
        v = v << 6 | (s[i] & 0x3Fu);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        *cp = -1;
        return 1;
    }
    *cp = (int32_t)v;
    return need;
}

/* The White_Space property, which is what \s means in the regex engines
 * the reference tokenizers use. It is not a general category (it mixes
 * Zs, Zl, Zp and a few Cc), so it is listed here. */
static int white_space(uint32_t cp)
{
    if (cp <= 0x20)
        return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x85)
        return 0;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

unsigned eng_uni_class(uint32_t cp)
{
    if (white_space(cp))
        return SPC;
    if (cp > 0x10FFFF)
        return 0;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LT:
        return LET | UPR;
    case UTF8PROC_CATEGORY_LL:
        return LET | LWR;
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
        return LET | UPR | LWR;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
        return UPR | LWR; /* marks: not \p{L}, but in both of GPT-4o's case classes */
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
        return NUM;
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return PUN;
    default:
        return 0;
    }
}

size_t eng_uni_decode(const char *s, size_t len, eng_uni_char *out)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        int32_t cp;
        size_t k = eng_uni_next(u + i, len - i, &cp);
        eng_uni_char *c = &out[n++];
        c->off = (uint32_t)i;
        c->len = (uint8_t)k;
        if (cp < 0) {
            c->cp = u[i];
            c->cls = ENG_UNI_INVALID;
        } else {
            c->cp = (uint32_t)cp;
            c->cls = (uint8_t)eng_uni_class((uint32_t)cp);
        }
        i += k;
    }
    return n;
}

size_t eng_uni_encode(uint32_t cp, char *buf)
{
    unsigned char *b = (unsigned char *)buf;
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        b[0] = (unsigned char)(0xC0 | cp >> 6);
        b[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | cp >> 12);
        b[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    b[0] = (unsigned char)(0xF0 | (cp >> 18 & 0x07));
    b[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    b[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    b[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF keep their value; the other
 * 68 (controls, space, DEL, 0x80..0xA0, soft hyphen) are numbered from
 * U+0100 in byte order: 0x00..0x20 -> U+0100.., 0x7F..0xA0 -> U+0121..,
 * 0xAD -> U+0143. */
uint32_t eng_uni_byte_to_cp(uint8_t b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)
        return b;
    if (b <= 0x20)
        return 0x100u + b;
    if (b == 0xAD)
        return 0x143;
    return 0x121u + (b - 0x7Fu);
}

int eng_uni_cp_to_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp >= 0x100 && cp <= 0x120)
        return (int)(cp - 0x100);
    if (cp >= 0x121 && cp <= 0x142)
        return (int)(cp - 0x121 + 0x7F);
    if (cp == 0x143)
        return 0xAD;
    return -1;
}

/* ---- pre-tokenizer names ---- */

static const struct {
    const char *name;
    enum eng_pretok kind;
    int ignore_merges;
} pre_names[] = {
    {"default", ENG_PRE_GPT2, 0},
    {"gpt-2", ENG_PRE_GPT2, 0},
    {"gpt2", ENG_PRE_GPT2, 0},
    {"mpt", ENG_PRE_GPT2, 0},
    {"olmo", ENG_PRE_GPT2, 0},
    {"jais", ENG_PRE_GPT2, 0},
    {"phi-2", ENG_PRE_GPT2, 0},
    {"roberta-bpe", ENG_PRE_GPT2, 0},
    {"llama-bpe", ENG_PRE_LLAMA3, 1},
    {"llama3", ENG_PRE_LLAMA3, 1},
    {"llama-v3", ENG_PRE_LLAMA3, 1},
    {"falcon3", ENG_PRE_LLAMA3, 1},
    {"dbrx", ENG_PRE_LLAMA3, 0},
    {"smaug-bpe", ENG_PRE_LLAMA3, 0},
    {"qwen2", ENG_PRE_QWEN2, 0},
    {"deepseek-r1-qwen", ENG_PRE_QWEN2, 0},
    {"stablelm2", ENG_PRE_QWEN2, 0},
    {"megrez", ENG_PRE_QWEN2, 0},
    {"deepseek-llm", ENG_PRE_DEEPSEEK_LLM, 0},
    {"deepseek-coder", ENG_PRE_DEEPSEEK_CODER, 0},
    {"falcon", ENG_PRE_FALCON, 0},
    {"starcoder", ENG_PRE_STARCODER, 0},
    {"refact", ENG_PRE_STARCODER, 0},
    {"command-r", ENG_PRE_STARCODER, 0},
    {"smollm", ENG_PRE_STARCODER, 0},
    {"codeshell", ENG_PRE_STARCODER, 0},
    {"exaone", ENG_PRE_STARCODER, 0},
    {"minerva-7b", ENG_PRE_STARCODER, 0},
    {"gpt-4o", ENG_PRE_GPT4O, 0},
    {"llama4", ENG_PRE_GPT4O, 0},
};

int eng_uni_pretok_lookup(const char *name, size_t len, int *ignore_merges)
{
    if (ignore_merges)
        *ignore_merges = 0;
    if (!name) {
        name = "default";
        len = strlen(name);
    }
    for (size_t i = 0; i < sizeof pre_names / sizeof pre_names[0]; i++) {
        if (strlen(pre_names[i].name) == len && memcmp(pre_names[i].name, name, len) == 0) {
            if (ignore_merges)
                *ignore_merges = pre_names[i].ignore_merges;
            return (int)pre_names[i].kind;
        }
    }
    return -1;
}

/* ---- matchers ----
 * A matcher looks at c[i..end) (end is the end of the current piece: a
 * lookahead never sees past it) and returns the match length, or 0 for
 * no match at i; it may raise *skip when it knows no match can start
 * before i + *skip. */
typedef size_t (*matcher)(const eng_uni_char *c, size_t i, size_t end, size_t *skip);

static int other(unsigned cls) { return !(cls & (LET | NUM | SPC)); } /* [^\s\p{L}\p{N}] */

static size_t run(const eng_uni_char *c, size_t i, size_t end, unsigned cls)
{
    while (i < end && (c[i].cls & cls))
        i++;
    return i;
}

static size_t run_other(const eng_uni_char *c, size_t i, size_t end)
{
    while (i < end && other(c[i].cls))
        i++;
    return i;
}

/* \s+(?!\S)|\s+ at a whitespace character: a run that stops before the
 * end gives its last character to the word that follows (" word"), but a
 * single whitespace character is matched on its own. */
static size_t space_run(const eng_uni_char *c, size_t i, size_t end)
{
    size_t r = run(c, i, end, SPC);
    if (r < end && r - i > 1)
        return r - 1 - i;
    return r - i;
}

/* 's|'t|'re|'ve|'m|'ll|'d, on lower-cased letters when fold is set */
static size_t contraction(const eng_uni_char *c, size_t i, size_t end, int fold)
{
    if (c[i].cp != '\'' || i + 1 >= end)
        return 0;
    uint32_t a = c[i + 1].cp, b = i + 2 < end ? c[i + 2].cp : 0;
    if (fold) {
        /* (?i) folds case the Unicode way: U+017F LONG S matches 's' */
        if (a == 0x17F)
            a = 's';
        if (a >= 'A' && a <= 'Z')
            a += 32;
        if (b >= 'A' && b <= 'Z')
            b += 32;
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if (((a == 'r' || a == 'v') && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    return 0;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t m_gpt2(const eng_uni_char *c, size_t i, size_t end, size_t *skip)
{
    (void)skip;
    size_t k = contraction(c, i, end, 0);
    if (k)
        return k;
    /* " ?" takes the space only if the class after it matches, else the
     * space falls to the whitespace alternatives */
    size_t j = (c[i].cp == ' ' && i + 1 < end) ? i + 1 : i;
    unsigned cls = c[j].cls;
    if (cls & LET)
        return run(c, j, end, LET) - i;
    if (cls & NUM)
        return run(c, j, end, NUM) - i;
    if (other(cls))
        return run_other(c, j, end) - i;
    return (c[i].cls & SPC) ? space_run(c, i, end) : 0;
}

/* The alternatives Llama 3's, Qwen2's and GPT-4o's splits end with, at i:
 *   \p{N}{1,maxdig}| ?[^\s\p{L}\p{N}]+[\r\n<also>]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * (also: one more character the punctuation run may end with, GPT-4o's
 * '/', or 0); 0 when none matches. */
static size_t digits_punct_space(const eng_uni_char *c, size_t i, size_t end, size_t maxdig, uint32_t also)
{
    unsigned cls = c[i].cls;
    if (cls & NUM) {
        size_t j = i;
        while (j < end && j - i < maxdig && (c[j].cls & NUM))
            j++;
        return j - i;
    }
    size_t j = (c[i].cp == ' ' && i + 1 < end && other(c[i + 1].cls)) ? i + 1 : i;
    if (other(c[j].cls)) {
        j = run_other(c, j, end);
        while (j < end && (c[j].cp == '\r' || c[j].cp == '\n' || (also && c[j].cp == also)))
            j++;
        return j - i;
    }
    if (!(cls & SPC))
        return 0;
    /* \s*[\r\n]+: the greedy \s* backs off to the last newline of the
     * whitespace run, so the match ends just after it */
    size_t r = i, last_nl = end;
    while (r < end && (c[r].cls & SPC)) {
        if (c[r].cp == '\r' || c[r].cp == '\n')
            last_nl = r;
        r++;
    }
    if (last_nl < end)
        return last_nl + 1 - i;
    return space_run(c, i, end);
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxdig}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * Llama 3 uses maxdig 3, Qwen2 1. */
static size_t llama3_like(const eng_uni_char *c, size_t i, size_t end, size_t maxdig)
{
    size_t k = contraction(c, i, end, 1);
    if (k)
        return k;
    uint32_t ch = c[i].cp;
    unsigned cls = c[i].cls;
    if (cls & LET)
        return run(c, i, end, LET) - i;
    /* one leading character that is neither a newline, letter nor digit
     * joins the letters after it ("?Hello", " world", "\tx") */
    if (!(cls & NUM) && ch != '\r' && ch != '\n' && i + 1 < end && (c[i + 1].cls & LET))
        return run(c, i + 1, end, LET) - i;
    return digits_punct_space(c, i, end, maxdig, 0);
}

/* [^\r\n\p{L}\p{N}]: the one character that may lead GPT-4o's words */
static int word_lead(const eng_uni_char *ch)
{
    return !(ch->cls & (LET | NUM)) && ch->cp != '\r' && ch->cp != '\n';
}

/* GPT-4o's words from j, or 0: U*W+ when upper_first is 0, else U+W*
 * (U, W: its upper- and lower-case classes, which share Lm, Lo and the
 * marks), each followed by an optional case-insensitive contraction. The
 * end is where a backtracking matcher would stop: U* runs greedily and
 * gives back characters only until W+ can take one. */
static size_t case_word(const eng_uni_char *c, size_t j, size_t end, int upper_first)
{
    size_t u = j;
    while (u < end && (c[u].cls & UPR))
        u++;
    size_t e;
    if (u < end && (c[u].cls & LWR)) { /* W after the U run: W+ runs on */
        e = u;
        while (e < end && (c[e].cls & LWR))
            e++;
    } else if (upper_first) {
        if (u == j)
            return 0;
        e = u; /* U+ then an empty W* */
    } else {
        /* W+ must take some of the U run: from its last W-class character */
        e = u;
        while (e > j && !(c[e - 1].cls & LWR))
            e--;
        if (e == j)
            return 0;
    }
    return e + contraction(c, e, end, 1);
}

/* [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
 * [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
 * \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * (GPT-4o's o200k split, gpt-oss's too) */
static size_t m_gpt4o(const eng_uni_char *c, size_t i, size_t end, size_t *skip)
{
    (void)skip;
    for (int upper_first = 0; upper_first < 2; upper_first++) {
        /* the lead character first; without it when the words cannot follow it (a mark may be either) */
        if (word_lead(&c[i]) && i + 1 < end) {
            size_t e = case_word(c, i + 1, end, upper_first);
            if (e)
                return e - i;
        }
        size_t e = case_word(c, i, end, upper_first);
        if (e)
            return e - i;
    }
    return digits_punct_space(c, i, end, 3, '/');
}

static size_t m_llama3(const eng_uni_char *c, size_t i, size_t end, size_t *skip)
{
    (void)skip;
    return llama3_like(c, i, end, 3);
}

static size_t m_qwen2(const eng_uni_char *c, size_t i, size_t end, size_t *skip)
{
    (void)skip;
    return llama3_like(c, i, end, 1);
}

/* [\r\n] */
static size_t m_newline(const eng_uni_char *c, size_t i, size_t end, size_t *skip)
{
    (void)end, (void)skip;
    return c[i].cp == '\r' || c[i].cp == '\n';
}

/* \s?X+ for a class given as a predicate */
static size_t opt_space_run(const eng_uni_char *c, size_t i, size_t end, int (*in)(const eng_uni_char *))
{
    size_t j = i;
    if ((c[i].cls & SPC) && i + 1 < end && in(&c[i + 1]))
        j = i + 1;
    if (!in(&c[j]))
        return 0;
    for (j++; j < end && in(&c[j]); j++)
        ;
    return j - i;
}

static size_t class_run(const eng_uni_char *c, size_t i, size_t end, int (*in)(const eng_uni_char *))
{
    size_t j = i;
    while (j < end && in(&c[j]))
        j++;
    return j - i;
}

static int in_ranges(uint32_t cp, const uint32_t (*r)[2], size_t n)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid][0])
            hi = mid;
        else if (cp > r[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

/* DeepSeek LLM's letter class: cased letters of the Latin, Greek,
 * Cyrillic, Armenian, Georgian, Cherokee, Glagolitic, Coptic, Deseret,
 * Osage, Old Hungarian, Warang Citi and Adlam scripts, and the letterlike
 * symbols and full-width Latin, as ranges sorted for a binary search. */
static const uint32_t ds_letters[][2] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},       {0xD8, 0xF6},
    {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},     {0x295, 0x2AF},     {0x370, 0x373},
    {0x376, 0x377},     {0x37B, 0x37D},     {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},
    {0x38C, 0x38C},     {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},
    {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
    {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},   {0xA722, 0xA76F},
    {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

/* DeepSeek LLM's punctuation class: ASCII punctuation and symbols (and,
 * as the published range is written, the ASCII letters too), their
 * full-width forms, curly quotes, ideographic space, comma and stop */
static const uint32_t ds_punct[][2] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};

/* The CJK class of both DeepSeek tokenizers: U+0800..U+9FA5 (the written
 * ranges 0800-4E00 and 4E00-9FA5 overlap) and Hangul syllables U+AC00.. */
static const uint32_t cjk[][2] = {{0x800, 0x9FA5}, {0xAC00, 0xD7FF}};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static int is_ds_letter(const eng_uni_char *c) { return !(c->cls & ENG_UNI_INVALID) && in_ranges(c->cp, ds_letters, N_OF(ds_letters)); }
static int is_ds_punct(const eng_uni_char *c) { return !(c->cls & ENG_UNI_INVALID) && in_ranges(c->cp, ds_punct, N_OF(ds_punct)); }
static int is_cjk(const eng_uni_char *c) { return !(c->cls & ENG_UNI_INVALID) && in_ranges(c->cp, cjk, N_OF(cjk)); }
static int is_letter(const eng_uni_char *c) { return (c->cls & LET) != 0; }
static int is_punct(const eng_uni_char *c) { return (c->cls & PUN) != 0; }
static int is_number(const eng_uni_char *c) { return (c->cls & NUM) != 0; }

/* [\p{P}\$\+<=>\^~\|`] */
static int is_falcon_punct(const eng_uni_char *c)
{
    if (c->cls & PUN)
        return 1;
    uint32_t cp = c->cp;
    return !(c->cls & ENG_UNI_INVALID) &&
           (cp == '$' || cp == '+' || cp == '<' || cp == '=' || cp == '>' || cp == '^' || cp == '~' || cp == '|' ||
            cp == '`');
}

/* \s+$ : only the whitespace that reaches the end of the piece; a run
 * that stops early cannot match from any of its positions */
static size_t m_trailing_space(const eng_uni_char *c, size_t i, size_t end, size_t *skip)
{
    if (!(c[i].cls & SPC))
        return 0;
    size_t r = run(c, i, end, SPC);
    if (r == end)
        return r - i;
    *skip = r - i;
    return 0;
}

static size_t m_number(const eng_uni_char *c, size_t i, size_t end, size_t *skip)
{
    (void)end, (void)skip;
    return (c[i].cls & NUM) != 0;
}

/* [0-9][0-9][0-9] */
static size_t m_three_digits(const eng_uni_char *c, size_t i, size_t end, size_t *skip)
{
    (void)skip;
    if (i + 3 > end)
        return 0;
    for (size_t k = i; k < i + 3; k++)
        if (c[k].cp < '0' || c[k].cp > '9' || (c[k].cls & ENG_UNI_INVALID))
            return 0;
    return 3;
}

/* One pass of a split: a matcher of its own, or (m NULL) a run of the
 * class in, after an optional whitespace character if opt_space
 * (\s?X+, else X+). */
typedef struct pass {
    matcher m;
    int opt_space;
    int (*in)(const eng_uni_char *);
} pass;

#define CLASS_RUN(in) {NULL, 0, in}
#define SPACE_CLASS_RUN(in) {NULL, 1, in}
#define MATCH(m) {m, 0, NULL}

/* The passes of each pre-tokenizer, in order (eng_pretok). */
static const pass pre_gpt2[] = {MATCH(m_gpt2)};
static const pass pre_llama3[] = {MATCH(m_llama3)};
static const pass pre_qwen2[] = {MATCH(m_qwen2)};
static const pass pre_ds_llm[] = {MATCH(m_newline), SPACE_CLASS_RUN(is_ds_letter), SPACE_CLASS_RUN(is_ds_punct),
                                  MATCH(m_trailing_space), CLASS_RUN(is_cjk), CLASS_RUN(is_number)};
static const pass pre_ds_coder[] = {MATCH(m_newline), SPACE_CLASS_RUN(is_letter), SPACE_CLASS_RUN(is_punct),
                                    CLASS_RUN(is_cjk), MATCH(m_number)};
static const pass pre_falcon[] = {CLASS_RUN(is_falcon_punct), MATCH(m_gpt2), MATCH(m_three_digits)};
static const pass pre_starcoder[] = {MATCH(m_number), MATCH(m_gpt2)};
static const pass pre_gpt4o[] = {MATCH(m_gpt4o)};

/* One pass of a pattern over every piece of the previous pass: matches
 * and the stretches between them become the new pieces. in and out hold
 * piece ends; returns the new count (never more than characters). */
static size_t split_pass(const pass *ps, const eng_uni_char *c, const uint32_t *in, size_t nin, uint32_t *out)
{
    size_t nout = 0, start = 0;
    for (size_t p = 0; p < nin; p++) {
        size_t end = in[p], gap = start, i = start;
        while (i < end) {
            size_t skip = 1, k = ps->m           ? ps->m(c, i, end, &skip)
                                 : ps->opt_space ? opt_space_run(c, i, end, ps->in)
                                                 : class_run(c, i, end, ps->in);
            if (!k) {
                i += skip;
                continue;
            }
            if (i > gap)
                out[nout++] = (uint32_t)i;
            i += k;
            out[nout++] = (uint32_t)i;
            gap = i;
        }
        if (gap < end)
            out[nout++] = (uint32_t)end;
        start = end;
    }
    return nout;
}

size_t eng_uni_pretok_split(enum eng_pretok kind, const eng_uni_char *c, size_t n, uint32_t *ends,
                            uint32_t *scratch)
{
    const pass *passes;
    size_t np;
#define USE(t) (passes = t, np = N_OF(t))
    switch (kind) {
    case ENG_PRE_LLAMA3: USE(pre_llama3); break;
    case ENG_PRE_QWEN2: USE(pre_qwen2); break;
    case ENG_PRE_DEEPSEEK_LLM: USE(pre_ds_llm); break;
    case ENG_PRE_DEEPSEEK_CODER: USE(pre_ds_coder); break;
    case ENG_PRE_FALCON: USE(pre_falcon); break;
    case ENG_PRE_STARCODER: USE(pre_starcoder); break;
    case ENG_PRE_GPT4O: USE(pre_gpt4o); break;
    case ENG_PRE_GPT2:
    default: USE(pre_gpt2); break;
    }
#undef USE
    if (!n)
        return 0;
    /* ping-pong between the two buffers, starting in whichever one makes
     * the last pass write into ends */
    uint32_t *cur = (np % 2 == 0) ? ends : scratch, *next = (cur == ends) ? scratch : ends;
    cur[0] = (uint32_t)n;
    size_t count = 1;
    for (size_t p = 0; p < np; p++) {
        count = split_pass(&passes[p], c, cur, count, next);
        uint32_t *t = cur;
        cur = next;
        next = t;
    }
    return count;
}
