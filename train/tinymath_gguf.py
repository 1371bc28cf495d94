"""Write the trained tinymath model as one llama.cpp GGUF file (architecture "llama", F32, "llama" tokenizer)."""

from __future__ import annotations

from pathlib import Path

import gguf
import torch
from tinymath_model import Llama
from tinymath_vocab import ASSISTANT, BOS, CHAT_TEMPLATE, END, UNK, Vocab


def write_gguf(model: Llama, vocab: Vocab, path: Path, name: str) -> None:
    shape = model.shape
    ids = vocab.ids
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_name(name)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_context_length(shape.context)
    writer.add_embedding_length(shape.width)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_rope_freq_base(shape.rope_base)
    writer.add_layer_norm_rms_eps(shape.norm_eps)
    writer.add_vocab_size(len(vocab.tokens))
    writer.add_tokenizer_model("llama")
    writer.add_token_list(list(vocab.tokens))
    writer.add_token_scores(list(vocab.scores))
    writer.add_token_types(list(vocab.types))
    writer.add_bos_token_id(ids[BOS])
    writer.add_eos_token_id(ids[END])
    writer.add_unk_token_id(ids[UNK])
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    writer.add_string("tinymath.assistant_token", ASSISTANT)
    with torch.no_grad():
        for tensor_name, weight in model.gguf_tensors().items():
            writer.add_tensor(tensor_name, weight.detach().to(torch.float32).contiguous().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
