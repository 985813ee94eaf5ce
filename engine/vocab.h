/* Vocabulary and tokenizer (private to the engine).
 *
 * Byte-level BPE (tokenizer.ggml.model "gpt2") with the pre-tokenizers
 * "smollm", "llama-bpe" (also "llama3"), "qwen2" and "tekken" (Mistral
 * Nemo) (and "default"/"gpt-2"),
 * SentencePiece ("llama": Llama 2, Mistral, TinyLlama) and Gemma 4's BPE
 * over raw UTF-8 ("gemma4"), with
 * control/special tokens, BOS/EOS rules from the metadata. The vocabulary is
 * copied out of the GGUF mapping so the file can be closed after load.
 */
#ifndef ENGINE_VOCAB_H
#define ENGINE_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "gguf.h"

typedef struct eng_vocab eng_vocab;

int eng_vocab_load(const gguf_file *file, eng_vocab **ret_vocab, eng_error *err);
void eng_vocab_free(eng_vocab *vocab);

int eng_vocab_n_tokens(const eng_vocab *vocab);
int eng_vocab_tokenize(const eng_vocab *vocab, const char *text, size_t len, unsigned flags,
                       int32_t *tokens, size_t cap, size_t *ret_n);
int eng_vocab_token_to_piece(const eng_vocab *vocab, int32_t token, bool special,
                             char *buf, size_t cap);
/* The token whose text is text prints in answers, control token or not
 * (llama.cpp's preserved tokens: the markers of a template's tool calls,
 * which the answer's parser reads). Its id; -ENOENT: no such token. */
int eng_vocab_show(eng_vocab *vocab, const char *text);
/* The token whose text is text ends generation (a template's end of turn
 * that the file's eos_token_id may not name). Its id; -ENOENT: no such
 * token. */
int eng_vocab_mark_eog(eng_vocab *vocab, const char *text);
int32_t eng_vocab_bos(const eng_vocab *vocab);
int32_t eng_vocab_eos(const eng_vocab *vocab);
bool eng_vocab_is_eog(const eng_vocab *vocab, int32_t token);

/* Splits text into pre-token pieces as the named pre-tokenizer does ("smollm",
 * "llama-bpe", "qwen2", "tekken", "gpt2"; "gemma4" without its U+2581 for
 * spaces), without BPE; for the tests that check our splits against an
 * independent regex engine. Calls cb for each piece.
 * Returns 0, -ENOTSUP for an unknown name, -EINVAL for invalid UTF-8 handling
 * failures. */
int eng_pretokenize(const char *pre_name, const char *text, size_t len,
                    void (*cb)(void *ud, const char *piece, size_t len), void *ud);

#endif
