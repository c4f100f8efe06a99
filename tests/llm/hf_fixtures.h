/* hf_fixtures.h - small tokenizer.json files, one per pipeline the HF tokenizer reader
   supports (tokenizer_hf.c): the seeds of fuzz_loaders.c and the variants of test_llm_oom.c.
   Byte-level vocabulary and merges (GPT-2's symbols), character BPE with byte fallback,
   special tokens, the Llama-3 Split regex. */
#ifndef GRZO_TESTS_HF_FIXTURES_H
#define GRZO_TESTS_HF_FIXTURES_H

#define HF_U2581 "\xe2\x96\x81"   /* SentencePiece's space */
#define HF_G_SP "\xc4\xa0"        /* GPT-2's spelling of a space */

#define HF_VOCAB_BL "\"vocab\":{\"a\":0,\"b\":1,\"" HF_G_SP "\":2,\"1\":3,\"'\":4,\"ab\":5,\"" HF_G_SP "a\":6,\"" HF_G_SP \
                    "ab\":7,\"ba\":8}"
#define HF_MERGES_BL "\"merges\":[\"a b\",[\"" HF_G_SP "\",\"a\"],\"" HF_G_SP "a b\",[\"b\",\"a\"]]"
#define HF_SPECIALS "\"added_tokens\":[{\"id\":9,\"content\":\"<s>\",\"special\":true,\"normalized\":false}," \
                    "{\"id\":10,\"content\":\"<x>\",\"special\":false,\"normalized\":false}]"
#define HF_BOS_STEP "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}}," \
                    "{\"Sequence\":{\"id\":\"A\"}}]}"
#define HF_BOS "\"post_processor\":" HF_BOS_STEP
#define HF_SPLIT(re) "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"" re "\"},\"behavior\":\"Isolated\",\"invert\":false}"
#define HF_LLAMA3_RE "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| " \
                     "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"
#define HF_BYTES "\"<0x20>\":3,\"<0x31>\":4,\"<0xC3>\":5,\"<0xA9>\":6"
#define HF_VOCAB_CH "\"vocab\":{\"<unk>\":0,\"<s>\":1,\"</s>\":2," HF_BYTES ",\"" HF_U2581 "\":7,\"a\":8,\"b\":9,\"" \
                    HF_U2581 "a\":10,\"ab\":11}"
#define HF_MERGES_CH "\"merges\":[\"" HF_U2581 " a\",\"a b\"]"
#define HF_SPECIALS_CH "\"added_tokens\":[{\"id\":1,\"content\":\"<s>\",\"special\":true,\"normalized\":false}]"

#define HF_LLAMA3_TOKENIZER                                                                                            \
    "{" HF_SPECIALS ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[" HF_SPLIT(HF_LLAMA3_RE)                  \
    ",{\"type\":\"ByteLevel\",\"use_regex\":false}]},\"post_processor\":{\"type\":\"Sequence\","                          \
    "\"processors\":[{\"type\":\"ByteLevel\"}," HF_BOS_STEP "]},\"model\":{\"type\":\"BPE\","                             \
    "\"ignore_merges\":true," HF_VOCAB_BL "," HF_MERGES_BL "}}"

typedef struct hf_fixture {
    const char *name;     /* the fuzz seed's file name */
    const char *json;     /* tokenizer.json */
    const char *config;   /* tokenizer_config.json, or NULL */
    int byte_level;       /* 1: HF_VOCAB_BL (GPT-2 symbols); 0: HF_VOCAB_CH (characters, byte fallback) */
} hf_fixture;

static const hf_fixture HF_FIXTURES[] = {
    {"hf_gpt2.json", "{" HF_SPECIALS ",\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
                     "\"use_regex\":true}," HF_BOS ",\"model\":{\"type\":\"BPE\"," HF_VOCAB_BL "," HF_MERGES_BL "}}", NULL, 1},
    {"hf_llama3.json", HF_LLAMA3_TOKENIZER, "{\"bos_token\":\"<s>\",\"eos_token\":{\"content\":\"<x>\"},\"chat_template\":\"{{x}}\"}",
     1},
    {"hf_smollm.json", "{" HF_SPECIALS ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":"
                       "\"Digits\",\"individual_digits\":true},{\"type\":\"ByteLevel\"}]},\"model\":{\"type\":\"BPE\","
                       HF_VOCAB_BL "," HF_MERGES_BL "}}", NULL, 1},
    {"hf_llama2.json", "{" HF_SPECIALS_CH ",\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":"
                       "\"Prepend\",\"prepend\":\"" HF_U2581 "\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
                       "\"content\":\"" HF_U2581 "\"}]}," HF_BOS ",\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,"
                       "\"unk_token\":\"<unk>\",\"fuse_unk\":true," HF_VOCAB_CH "," HF_MERGES_CH "}}", "{\"add_bos_token\":false}", 0},
    {"hf_metaspace.json", "{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"" HF_U2581 "\",\"prepend_scheme\":"
                          "\"first\",\"split\":true},\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,"
                          HF_VOCAB_CH "," HF_MERGES_CH "}}", NULL, 0},
};
#define HF_N_FIXTURES (sizeof HF_FIXTURES / sizeof HF_FIXTURES[0])

#endif
