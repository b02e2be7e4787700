/* Chat templates: how a conversation becomes the text a model was tuned
 * on. nibble does not run the Jinja in tokenizer.chat_template; it
 * recognises the family from marker strings in it and renders that
 * family's fixed layout. Rendered text comes as segments, so the
 * template's own markers are tokenized as special tokens while what the
 * user typed never is (typing "<|im_end|>" cannot end a turn). */
#ifndef NIBBLE_ENG_TEMPLATE_H
#define NIBBLE_ENG_TEMPLATE_H

#include <stddef.h>

enum eng_tmpl {
    ENG_TMPL_NONE = 0, /* no template: plain continuation of the text */
    ENG_TMPL_CHATML,   /* <|im_start|>role ... <|im_end|> (Qwen, SmolLM, ...) */
    ENG_TMPL_LLAMA3,   /* <|start_header_id|>role<|end_header_id|> ... <|eot_id|> */
    ENG_TMPL_LLAMA2,   /* [INST] <<SYS>> ... [/INST] */
    ENG_TMPL_ZEPHYR,   /* <|user|>\n ... </s> (TinyLlama chat) */
    ENG_TMPL_PHI3,     /* <|user|>\n ... <|end|>\n<|assistant|> */
    ENG_TMPL_GEMMA,    /* <start_of_turn>user ... <end_of_turn> */
    ENG_TMPL_COUNT
};

/* "none", "chatml", "llama3", "llama2", "zephyr", "phi3", "gemma". */
const char *eng_tmpl_name(enum eng_tmpl t);
/* Look a family up by name ("auto" is not a family); -1 if unknown. */
int eng_tmpl_find(const char *name);
/* Family of a Jinja chat template (len bytes, need not be NUL-terminated);
 * ENG_TMPL_NONE for an empty or unrecognised one. */
enum eng_tmpl eng_tmpl_detect(const char *jinja, size_t len);
/* Texts of the tokens that end an assistant turn in this family, NULL
 * terminated (the tokenizer's own end-of-generation tokens stop as well). */
const char *const *eng_tmpl_stops(enum eng_tmpl t);

/* A rendered piece of a prompt: special = 1 for template markers
 * (tokenized with special-token parsing), 0 for user text. */
typedef struct eng_tmpl_seg {
    char *text; /* owned by the list */
    int special;
} eng_tmpl_seg;

typedef struct eng_tmpl_out {
    eng_tmpl_seg *seg;
    size_t n, cap;
} eng_tmpl_out;

void eng_tmpl_out_clear(eng_tmpl_out *o);  /* frees the segments, keeps o usable */

/* Append the start of a conversation: the system prompt (may be NULL or
 * empty). The model's BOS token is not included: the tokenizer adds it. */
int eng_tmpl_begin(enum eng_tmpl t, const char *system, eng_tmpl_out *o);
/* Append a user turn and the header of the assistant's answer. first: this
 * is the first user turn (Llama 2 and Gemma fold the system prompt into
 * it); system is the same as given to begin. */
int eng_tmpl_user(enum eng_tmpl t, const char *text, int first, const char *system, eng_tmpl_out *o);
/* Append what closes an assistant turn whose text is already in the
 * context (the end-of-turn marker the model sampled is not fed). */
int eng_tmpl_close(enum eng_tmpl t, eng_tmpl_out *o);
/* Concatenate the segments into one string (caller frees); for tests and
 * for showing what a template renders to. */
char *eng_tmpl_join(const eng_tmpl_out *o);

#endif
