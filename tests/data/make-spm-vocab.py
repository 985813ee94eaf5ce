#!/usr/bin/env python3
"""Writes tests/data/vocab-spm.gguf: a SentencePiece BPE vocabulary trained
the way Llama 2 / Mistral vocabularies are (byte fallback, digits split, no
normalisation, whitespace-only pieces allowed, a dummy prefix), on the text of
profiles/tasks/*.jsonl, converted to GGUF as llama.cpp's converter does
(tokenizer.ggml.model "llama", tokens, scores, token types). A vocabulary-only
file: the tokenizer test loads nothing else.

With --phi3 it writes the vocabulary of a Phi-3-like model instead: named
"Phi-3 ..." (llama.cpp gives a model so named Phi-3's token attributes:
whitespace after a special token is dropped) and with Phi-3's chat tokens
<|endoftext|> <|system|> <|user|> <|assistant|> <|end|> as control tokens.

With --gemma, the vocabulary of a Gemma-like model: no dummy prefix (the
GGUF's tokenizer.ggml.add_space_prefix false, as Gemma's converter writes
it), Gemma's ids (pad 0, eos 1, bos 2, unk 3) and its turn tokens
<start_of_turn> <end_of_turn> as control tokens.

Needs the PyPI packages sentencepiece and gguf:
    python3 tests/data/make-spm-vocab.py tests/data/vocab-spm.gguf
    python3 tests/data/make-spm-vocab.py --phi3 tests/data/vocab-spm-phi3.gguf
    python3 tests/data/make-spm-vocab.py --gemma tests/data/vocab-spm-gemma.gguf
"""
import glob, io, json, os, sys

import sentencepiece as spm
import gguf

phi3 = sys.argv[1] == "--phi3"
gemma = sys.argv[1] == "--gemma"
GEMMA_TOKENS = ["<start_of_turn>", "<end_of_turn>"]
out = sys.argv[-1]
PHI3_TOKENS = ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]

root = os.environ.get("SI_ROOT") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
lines = []
for path in sorted(glob.glob(os.path.join(root, "profiles", "tasks", "*.jsonl"))):
    for l in open(path, encoding="utf-8"):
        r = json.loads(l)
        lines += [r["prompt"]] + r.get("references", [])
text = "\n".join(x for x in lines if x.strip())

model = io.BytesIO()
spm.SentencePieceTrainer.train(
    sentence_iterator=iter(text.split("\n")), model_writer=model, vocab_size=3000,
    model_type="bpe", byte_fallback=True, split_digits=True, allow_whitespace_only_pieces=True,
    remove_extra_whitespaces=False, normalization_rule_name="identity", add_dummy_prefix=not gemma,
    character_coverage=0.9995, user_defined_symbols=["[INST]", "[/INST]"],
    control_symbols=["<|im_start|>"] + (PHI3_TOKENS if phi3 else []) + (GEMMA_TOKENS if gemma else []),
    unk_id=3 if gemma else 0, bos_id=2 if gemma else 1, eos_id=1 if gemma else 2, pad_id=0 if gemma else -1,
    num_threads=1, minloglevel=2)
sp = spm.SentencePieceProcessor(model_proto=model.getvalue())

toks, scores, types = [], [], []
T = gguf.TokenType
for i in range(sp.vocab_size()):
    toks.append(sp.id_to_piece(i).encode("utf-8"))
    scores.append(sp.get_score(i))
    types.append(T.UNKNOWN if sp.is_unknown(i) else T.CONTROL if sp.is_control(i) else
                 T.UNUSED if sp.is_unused(i) else T.BYTE if sp.is_byte(i) else
                 T.USER_DEFINED if sp.id_to_piece(i) in ("[INST]", "[/INST]") else T.NORMAL)

w = gguf.GGUFWriter(out, "llama")
w.add_name("Phi-3 spm-test-vocab" if phi3 else "gemma-like spm-test-vocab" if gemma else "spm-test-vocab")
# the shape keys llama.cpp reads even for a vocabulary-only load
w.add_context_length(512); w.add_embedding_length(64); w.add_block_count(1)
w.add_feed_forward_length(128); w.add_head_count(4); w.add_head_count_kv(4)
w.add_rope_dimension_count(16); w.add_layer_norm_rms_eps(1e-5)
w.add_tokenizer_model("llama")
w.add_token_list(toks); w.add_token_scores(scores); w.add_token_types(types)
if gemma:
    w.add_bos_token_id(2); w.add_eos_token_id(1); w.add_unk_token_id(3); w.add_pad_token_id(0)
    w.add_add_space_prefix(False)
else:
    w.add_bos_token_id(1); w.add_eos_token_id(2); w.add_unk_token_id(0)
w.add_add_bos_token(True); w.add_add_eos_token(False)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
print(f"{len(toks)} tokens -> {out}", file=sys.stderr)
