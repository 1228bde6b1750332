#!/usr/bin/env python3
"""Writes a tiny random-weight llama-architecture GGUF model for testing a real engine.

No weights are downloaded: 4 layers, dim 512, 8 heads, a SentencePiece-style vocabulary of
single ASCII characters, a few hundred word pieces and the byte tokens of printable ASCII and
newline. Every token decodes to non-empty ASCII text, so each generated token reaches the
client as text (no held-back partial UTF-8, no empty control-token pieces) and the server's
token counters can be compared with the client's exactly. The output is gibberish; decoding,
batching, HTTP and SSE are the engine's own.

The size is chosen for a 2-core CPU (one core the server's, one the client's): a decode step
costs a few milliseconds, so the server, not the client, is the bottleneck, and the CPU
kernels get more efficient per token as the batch grows, so throughput rises with the number
of busy slots and flattens once they are all busy. Weights are F32 (TINY_GGUF_TYPE=f16 or
q8_0 to try others; on CPU they batch worse).

Usage: tiny_gguf.py OUT.gguf
"""

import os
import sys

import numpy as np
import gguf

N_EMBD = 512
N_LAYER = 4
N_HEAD = 8
N_FF = 1536
N_CTX = 4096
SEED = 20261129
WTYPE = os.environ.get("TINY_GGUF_TYPE", "f32")

WORDS = """the of and to in is that for it as was with be by on not he this are or his from at
which but have an they you were her she there one all we their been has would when who will
more no if out so said what up its about into than them can only other new some could time
these two may then do first any my now such like our over man me even most made after also
did many before must through back years where much your way well down should because each
just those people how too little state good very make world still own see men work long get
here between both life being under never day same another know while last might us great old
year off come since against go came right used take three token server batch request stream
model cache queue slot decode prefill latency throughput""".split()


def vocab():
    tokens, scores, types = [], [], []

    def add(text, score, kind):
        tokens.append(text)
        scores.append(score)
        types.append(kind)

    add("<unk>", 0.0, gguf.TokenType.UNKNOWN)
    # BOS and EOS are plain tokens with visible text: never an empty piece in the stream.
    add("<s>", 0.0, gguf.TokenType.NORMAL)
    add("</s>", 0.0, gguf.TokenType.NORMAL)
    for b in [0x0A] + list(range(0x20, 0x7F)):
        add(f"<0x{b:02X}>", 0.0, gguf.TokenType.BYTE)
    add("\u2581", -1.0, gguf.TokenType.NORMAL)
    # The chatml markers as single pieces, so the chat template costs a few tokens, not
    # dozens: prefill stays cheap next to decode, as in a real chat workload.
    for piece in ["<|im_start|>", "<|im_end|>", "user", "assistant", "system"]:
        add(piece, 0.0, gguf.TokenType.NORMAL)
    for c in range(0x21, 0x7F):
        add(chr(c), -2.0, gguf.TokenType.NORMAL)
    seen = set(tokens)
    for i, w in enumerate(WORDS):
        for piece in (w, "\u2581" + w):
            if piece not in seen:
                seen.add(piece)
                add(piece, -3.0 - i * 0.001, gguf.TokenType.NORMAL)
    return tokens, scores, types


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: tiny_gguf.py OUT.gguf")
    out = sys.argv[1]
    rng = np.random.default_rng(SEED)
    tokens, scores, types = vocab()
    n_vocab = len(tokens)

    w = gguf.GGUFWriter(out, "llama")
    w.add_name("throughline tiny random llama")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(
        {
            "f32": gguf.LlamaFileType.ALL_F32,
            "f16": gguf.LlamaFileType.MOSTLY_F16,
            "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
        }[WTYPE]
    )
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    def t(name, *shape, scale=0.05):
        x = (rng.standard_normal(shape) * scale).astype(np.float32)
        if WTYPE == "q8_0":
            q = gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        elif WTYPE == "f16":
            w.add_tensor(name, x.astype(np.float16))
        else:
            w.add_tensor(name, x)

    def ones(name, n):
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    # numpy shapes are (rows, cols); GGUF stores them reversed, as llama.cpp expects.
    t("token_embd.weight", n_vocab, N_EMBD)
    for i in range(N_LAYER):
        ones(f"blk.{i}.attn_norm.weight", N_EMBD)
        t(f"blk.{i}.attn_q.weight", N_EMBD, N_EMBD)
        t(f"blk.{i}.attn_k.weight", N_EMBD, N_EMBD)
        t(f"blk.{i}.attn_v.weight", N_EMBD, N_EMBD)
        t(f"blk.{i}.attn_output.weight", N_EMBD, N_EMBD)
        ones(f"blk.{i}.ffn_norm.weight", N_EMBD)
        t(f"blk.{i}.ffn_gate.weight", N_FF, N_EMBD)
        t(f"blk.{i}.ffn_up.weight", N_FF, N_EMBD)
        t(f"blk.{i}.ffn_down.weight", N_EMBD, N_FF)
    ones("output_norm.weight", N_EMBD)
    t("output.weight", n_vocab, N_EMBD)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(out)


if __name__ == "__main__":
    main()
