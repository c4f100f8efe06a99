#!/bin/sh
# The libFuzzer run of tests/llm/fuzz_loaders.c: tests/fuzz/fuzz.sh runs every fuzz target.
#   tests/llm/fuzz.sh [SECONDS]   =   tests/fuzz/fuzz.sh loaders [SECONDS]
exec "$(dirname "$0")/../fuzz/fuzz.sh" loaders "$@"
